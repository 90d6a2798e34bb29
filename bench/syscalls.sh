#!/usr/bin/env bash
# System calls and context switches per 64 B ping-pong round trip, counted
# (docs/performance.md, "System calls per message"). Reported, never asserted.
#
#   bash bench/syscalls.sh [BUILD_DIR]     (default build/default; builds nothing)
#
# Where no verbs device is active it runs itself inside the Soft-RoCE VM
# (tests/rxe/with-device.sh) on rxe0's address.
#
# How: `perf stat` counts the tracepoints raw_syscalls:sys_enter (every
# system call) and syscalls:sys_enter_NAME (which ones), and the software event
# context-switches, for the client (perf runs it) and for the server (perf
# attaches to it once it is listening; all its threads, the library's own
# included). Each cell is two runs that differ only in the number of round
# trips (ITERS_A and ITERS_B, same warm-up): the difference divided by
# ITERS_B - ITERS_A is the cost of one round trip in the steady state, with
# process start, connection set-up, the upgrade and exit cancelled out.
# Cells are medians over ROUNDS such pairs.
#
# Columns: kernel (no preload), libvsock under a VSOCK_PROFILE (default,
# latency, throughput; "+VAR=VALUE" appends settings), rsocket
# (librspreload.so, vsock_bench --simple) and verbs (perftest ib_send_lat:
# busy-polling raw verbs; its server and client pinned like the others).
#
# Environment:
#   VSOCK_SYSCALLS_LAYOUTS  "S,C ..." CPU pairs (default "0,1 0,0")
#   VSOCK_SYSCALLS_COLUMNS  (default "kernel default latency rsocket verbs")
#   VSOCK_SYSCALLS_WAIT     vsock_bench --wait mode (default block)
#   VSOCK_SYSCALLS_ITERS    "ITERS_A ITERS_B" (default "200 1000")
#   VSOCK_SYSCALLS_ROUNDS   pairs per cell (default 3)
#   VSOCK_SYSCALLS_TOP      syscalls listed per cell (default 6)
#   VSOCK_BENCH_ADDR        address (default $RXE_VM_IPADDR, else 127.0.0.1)
set -uo pipefail
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$(cd "${1:-$source_dir/build/default}" 2>/dev/null && pwd) ||
  { echo "syscalls.sh: ${1:-build/default} not found: build first" >&2; exit 1; }

source "$source_dir/bench/on_device.sh"
bench_on_device "$source_dir/bench/syscalls.sh" "$build_dir"

bench=$build_dir/bench/vsock_bench
libvsock=$build_dir/lib/libvsock.so
rspreload=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
[ -x "$bench" ] && [ -f "$libvsock" ] || { echo "syscalls.sh: $bench or $libvsock missing: build first" >&2; exit 1; }
command -v perf >/dev/null || { echo "syscalls.sh: perf not installed (linux-perf)" >&2; exit 1; }
# The tracepoints need tracefs (the VM's init does not mount it).
if [ ! -d /sys/kernel/tracing/events/raw_syscalls ] && [ ! -d /sys/kernel/debug/tracing/events/raw_syscalls ]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null ||
    { echo "syscalls.sh: no tracefs (mount -t tracefs nodev /sys/kernel/tracing)" >&2; exit 1; }
fi
addr=${VSOCK_BENCH_ADDR:-${RXE_VM_IPADDR:-127.0.0.1}}
read -r -a layouts <<<"${VSOCK_SYSCALLS_LAYOUTS:-0,1 0,0}"
read -r -a columns <<<"${VSOCK_SYSCALLS_COLUMNS:-kernel default latency rsocket verbs}"
read -r iters_a iters_b <<<"${VSOCK_SYSCALLS_ITERS:-200 1000}"
wait_mode=${VSOCK_SYSCALLS_WAIT:-block}
rounds=${VSOCK_SYSCALLS_ROUNDS:-3}
top=${VSOCK_SYSCALLS_TOP:-6}
warmup=100
# Every system call (raw_syscalls), and by name the ones a socket data path
# makes; the rest show as "other". (syscalls:sys_enter_* would name all of
# them, but perf then takes a minute to attach and detach its ~350 events.)
named="read write readv writev recvfrom sendto recvmsg sendmsg poll ppoll select pselect6 epoll_wait epoll_pwait
  fcntl getsockopt setsockopt ioctl sched_yield futex clock_gettime nanosleep clock_nanosleep gettid getpid tgkill"
events="raw_syscalls:sys_enter,context-switches$(printf ',syscalls:sys_enter_%s' $named)"
work=$(mktemp -d /tmp/vsock-syscalls.XXXXXX) || exit 1
server_pid="" perf_pid=""
stop_all() {
  local pid i
  for pid in $perf_pid; do kill -INT "$pid" 2>/dev/null; done
  for pid in $perf_pid; do
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null
  for pid in $server_pid; do
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  done
  for pid in $perf_pid $server_pid; do wait "$pid" 2>/dev/null; done
  server_pid="" perf_pid=""
}
trap 'stop_all; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# column_env COLUMN -> env assignments of both processes.
column_env() {
  local name=${1%%+*} extra=""
  [[ "$1" == *+* ]] && extra=${1#*+} && extra=${extra//+/ }
  case "$name" in
    kernel) echo "LD_PRELOAD= $extra" ;;
    rsocket) echo "LD_PRELOAD=$rspreload $extra" ;;
    *) echo "LD_PRELOAD=$libvsock VSOCK_PROFILE=$name VSOCK_UPGRADE_TIMEOUT_MS=2000 VSOCK_STATS=1" \
      "VSOCK_LOG_FILE=$work/stats.log $extra" ;;
  esac
}

# perf -x, output -> "event count" lines (counts summed over lines of one event)
perf_counts() {
  awk -F, '$1 ~ /^[0-9]+$/ { n[$3] += $1 } END { for (e in n) print e, n[e] }' "$1"
}

# run_socket COLUMN SCPU CCPU ITERS -> $work/client.perf, $work/server.perf; status 0 if the run
# completed (and, for libvsock, both ends upgraded)
run_socket() {
  local column=$1 scpu=$2 ccpu=$3 iters=$4 port i real simple=""
  [ "${column%%+*}" = rsocket ] && simple=--simple
  : >"$work/server.out"
  : >"$work/stats.log"
  # shellcheck disable=SC2046
  env $(column_env "$column") "$bench" server --addr "$addr" --port 0 --cpu "$scpu" $simple \
    >"$work/server.out" 2>&1 </dev/null &
  server_pid=$!
  port=""
  for ((i = 0; i < 200; i++)); do
    port=$(sed -n 's/^READY \([0-9][0-9]*\)$/\1/p' "$work/server.out")
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "$column: server did not start: $(tail -1 "$work/server.out")" >&2; stop_all; return 1; }
  perf stat -x, -e "$events" -p "$server_pid" -o "$work/server.perf" 2>/dev/null &
  perf_pid=$!
  sleep 0.5  # perf attaches
  # shellcheck disable=SC2046
  timeout -k 5 120 perf stat -x, -e "$events" -o "$work/client.perf" -- env $(column_env "$column") "$bench" client \
    --test tcp-lat --size 64 --addr "$addr" --port "$port" --iters "$iters" --warmup "$warmup" --seconds 100 \
    --cpu "$ccpu" --wait "$wait_mode" $simple >"$work/client.out" 2>&1 </dev/null
  stop_all
  grep -q '^result ' "$work/client.out" || { echo "$column: client: $(tail -1 "$work/client.out")" >&2; return 1; }
  case "${column%%+*}" in
    kernel | rsocket) return 0 ;;
  esac
  # both processes' counters at exit: 2 upgrades, else the run was TCP
  real=$(awk '/stats:/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "upgrades_done") u += kv[2] } }
    END { print u + 0 }' "$work/stats.log")
  [ "$real" = 2 ] || { echo "$column: run stayed on TCP (upgrades_done=$real)" >&2; return 1; }
}

# run_verbs SCPU CCPU ITERS: ib_send_lat pinned with taskset, like the socket columns.
verbs_port=18700
run_verbs() {
  local scpu=$1 ccpu=$2 iters=$3 i dev gid
  dev=${RXE_VM_DEV:-$(ls /sys/class/infiniband | head -1)}
  gid=${RXE_VM_GID_INDEX:+-x $RXE_VM_GID_INDEX}
  verbs_port=$((verbs_port + 1))
  # shellcheck disable=SC2086
  taskset -c "$scpu" ib_send_lat -d "$dev" $gid -s 64 -n "$iters" -F -p "$verbs_port" >"$work/server.out" 2>&1 </dev/null &
  server_pid=$!
  for ((i = 0; i < 100; i++)); do
    grep -qs ":$(printf '%04X' "$verbs_port") .* 0A " /proc/net/tcp && break
    sleep 0.1
  done
  perf stat -x, -e "$events" -p "$server_pid" -o "$work/server.perf" 2>/dev/null &
  perf_pid=$!
  sleep 0.5
  # shellcheck disable=SC2086
  timeout -k 5 120 perf stat -x, -e "$events" -o "$work/client.perf" -- taskset -c "$ccpu" ib_send_lat -d "$dev" $gid \
    -s 64 -n "$iters" -F -p "$verbs_port" "$addr" >"$work/client.out" 2>&1 </dev/null
  local rc=$?
  stop_all
  [ "$rc" = 0 ] || { echo "verbs: ib_send_lat exit $rc: $(tail -1 "$work/client.out")" >&2; return 1; }
}

run_any() {  # COLUMN SCPU CCPU ITERS
  if [ "$1" = verbs ]; then
    # perftest's -n counts the warm-up in: add it so both kinds compare
    run_verbs "$2" "$3" $(($4 + warmup))
  else
    run_socket "$@"
  fi
}

# diff_counts A_DIR B_DIR -> "event per_round_trip" for client+server, client, server
per_trip() {
  local a=$1 b=$2
  for side in client server; do
    perf_counts "$a/$side.perf" | sed "s/^/a $side /"
    perf_counts "$b/$side.perf" | sed "s/^/b $side /"
  done | awk -v d=$((iters_b - iters_a)) '
    { v[$1, $2, $3] = $4; ev[$3] = 1 }
    END { for (e in ev) {
        c = (v["b", "client", e] - v["a", "client", e]) / d
        s = (v["b", "server", e] - v["a", "server", e]) / d
        printf "%s %.3f %.3f %.3f\n", e, c + s, c, s } }'
}

median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "syscalls.sh: columns ${columns[*]}; layouts ${layouts[*]}; iters $iters_a/$iters_b (+$warmup warm-up); $rounds rounds; wait $wait_mode" >&2
rows=()
start=$SECONDS
for layout in "${layouts[@]}"; do
  scpu=${layout%,*} ccpu=${layout#*,}
  if [ "$scpu" = "$ccpu" ]; then where="same vCPU ($scpu)"; else where="different vCPUs ($scpu, $ccpu)"; fi
  for column in "${columns[@]}"; do
    : >"$work/cell"
    ok=0
    for ((round = 1; round <= rounds; round++)); do
      mkdir -p "$work/a" "$work/b"
      run_any "$column" "$scpu" "$ccpu" "$iters_a" || continue
      mv "$work/client.perf" "$work/server.perf" "$work/a/"
      run_any "$column" "$scpu" "$ccpu" "$iters_b" || continue
      mv "$work/client.perf" "$work/server.perf" "$work/b/"
      per_trip "$work/a" "$work/b" | sed "s/^/$round /" >>"$work/cell"
      ok=$((ok + 1))
      echo "syscalls.sh: $where $column round $round: $(awk -v r="$round" '$1 == r && $2 == "raw_syscalls:sys_enter" { printf "%s syscalls/RT (client %s, server %s)", $3, $4, $5 }' "$work/cell")" >&2
    done
    if ((ok == 0)); then rows+=("| $where | $column | failed | | | | |"); continue; fi
    total=$(awk '$2 == "raw_syscalls:sys_enter" { print $3 }' "$work/cell" | median)
    client=$(awk '$2 == "raw_syscalls:sys_enter" { print $4 }' "$work/cell" | median)
    server=$(awk '$2 == "raw_syscalls:sys_enter" { print $5 }' "$work/cell" | median)
    switches=$(awk '$2 == "context-switches" { print $3 }' "$work/cell" | median)
    # the busiest system calls: median per round trip over the rounds
    names=$(awk '$2 ~ /^syscalls:sys_enter_/ { sub("syscalls:sys_enter_", "", $2); print $2 }' "$work/cell" | sort -u |
      while read -r name; do
        m=$(awk -v n="syscalls:sys_enter_$name" '$2 == n { print $3 }' "$work/cell" | median)
        awk -v m="$m" -v n="$name" 'BEGIN { if (m >= 0.05) printf "%s %.2f\n", n, m }'
      done | sort -k2 -gr | head -n "$top" | awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2 }')
    # what the named ones do not cover
    other=$(awk '$2 == "raw_syscalls:sys_enter" { t[$1] = $3 } $2 ~ /^syscalls:sys_enter_/ { s[$1] += $3 }
      END { for (r in t) print t[r] - s[r] }' "$work/cell" | median)
    awk -v o="$other" 'BEGIN { exit !(o >= 0.05) }' && names+=", other $other"
    rows+=("| $where | $column | $ok | $total | $client / $server | $switches | $names |")
  done
done

echo
echo "| CPUs (server, client) | column | pairs | syscalls / round trip | client / server | context switches / round trip | which (per round trip) |"
echo "|---|---|---:|---:|---:|---:|---|"
printf '%s\n' "${rows[@]}"
echo
echo "64 B ping-pong, vsock_bench --wait $wait_mode; per round trip = (run of $iters_b - run of $iters_a round trips) / $((iters_b - iters_a)), both after $warmup warm-up; medians of up to $rounds pairs; perf stat tracepoints (raw_syscalls:sys_enter, syscalls:sys_enter_NAME) and context-switches over the client and all server threads; verbs = ib_send_lat (busy-polling) under taskset; $((SECONDS - start)) s."
