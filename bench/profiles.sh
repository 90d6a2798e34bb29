#!/usr/bin/env bash
# The profile table: 64 B TCP ping-pong p50 / p99 and the CPU it costs, for
# kernel TCP and for libvsock under each VSOCK_PROFILE, side by side in one
# run. Reported, never asserted (docs/performance.md, "Profiles").
#
#   bash bench/profiles.sh [BUILD_DIR]     (default build/default; builds nothing)
#
# Where no verbs device is active it runs itself inside the Soft-RoCE VM
# (tests/rxe/with-device.sh) on rxe0's address; with no way to get a device
# it says so and exits 77.
#
# For each CPU layout (server CPU, client CPU) and each way of waiting, the
# columns run interleaved (order flipped every round), each run with a fresh
# server: kernel (no preload), then libvsock with VSOCK_PROFILE=default,
# latency, throughput in both processes. One run = vsock_bench client
# --test tcp-lat --size 64 --peer-pid <server>; its measured phase gives the
# round-trip p50 / p99 and the CPU time (user + system, all threads) of the
# client (getrusage) and of the server (/proc/PID/stat). The table shows the
# medians over rounds; "CPU s / 1M msgs" = (client + server CPU) per million
# 64 B messages, one round trip being two messages; "cores busy" = that CPU
# over the measured wall time.
#
# Environment:
#   VSOCK_PROFILES_LAYOUTS  "S,C ..." CPU pairs (default "0,1 0,0": different
#                           vCPUs, then the same vCPU)
#   VSOCK_PROFILES_WAITS    vsock_bench --wait modes (default "block epoll")
#   VSOCK_PROFILES_COLUMNS  (default "kernel default latency throughput")
#   VSOCK_PROFILES_ROUNDS   runs per column (default 3)
#   VSOCK_PROFILES_ITERS    round trips per run after 300 warm-up (default 2000)
#   VSOCK_PROFILES_SECONDS  time bound of one run (default 3)
#   VSOCK_PROFILES_RAW      also append every result line to this file
#   VSOCK_BENCH_ADDR        address (default $RXE_VM_IPADDR, else 127.0.0.1)
#   Any other VSOCK_* setting (e.g. VSOCK_SPIN_US) reaches the libvsock columns.
set -uo pipefail
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$(cd "${1:-$source_dir/build/default}" 2>/dev/null && pwd) ||
  { echo "profiles.sh: ${1:-build/default} not found: build first" >&2; exit 1; }

source "$source_dir/bench/on_device.sh"
bench_on_device "$source_dir/bench/profiles.sh" "$build_dir"

bench=$build_dir/bench/vsock_bench
libvsock=$build_dir/lib/libvsock.so
[ -x "$bench" ] && [ -f "$libvsock" ] || { echo "profiles.sh: $bench or $libvsock missing: build first" >&2; exit 1; }
addr=${VSOCK_BENCH_ADDR:-${RXE_VM_IPADDR:-127.0.0.1}}
read -r -a layouts <<<"${VSOCK_PROFILES_LAYOUTS:-0,1 0,0}"
read -r -a waits <<<"${VSOCK_PROFILES_WAITS:-block epoll}"
read -r -a columns <<<"${VSOCK_PROFILES_COLUMNS:-kernel default latency throughput}"
rounds=${VSOCK_PROFILES_ROUNDS:-3}
iters=${VSOCK_PROFILES_ITERS:-2000}
seconds=${VSOCK_PROFILES_SECONDS:-3}
# The emulated guest is slow, more so when the host is busy: an upgrade that
# times out (200 ms by default) leaves the run on TCP, which is not what a
# libvsock column is meant to measure. Such runs are left out of the medians.
upgrade_ms=${VSOCK_UPGRADE_TIMEOUT_MS:-2000}
work=$(mktemp -d /tmp/vsock-profiles.XXXXXX) || exit 1
raw=${VSOCK_PROFILES_RAW:-$work/raw.txt}
source "$source_dir/bench/bench_server.sh"
trap 'bench_stop_server; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# column_env COLUMN -> the env assignments of its processes. A column is
# "kernel" or a profile name, optionally followed by "+VAR=VALUE" settings
# for both processes (e.g. latency+VSOCK_SPIN_US=20000; LD_PRELOAD=PATH
# measures another build of the library).
column_env() {
  local name=${1%%+*} extra=""
  [[ "$1" == *+* ]] && extra=${1#*+} && extra=${extra//+/ }
  case "$name" in
    kernel) echo "LD_PRELOAD= $extra" ;;
    *) echo "LD_PRELOAD=$libvsock VSOCK_PROFILE=$name VSOCK_STATS=1 VSOCK_LOG_FILE=$work/stats.log" \
      "VSOCK_UPGRADE_TIMEOUT_MS=$upgrade_ms $extra" ;;
  esac
}

rdma_packets() {
  local f n=0
  for f in /sys/class/infiniband/*/ports/*/hw_counters/sent_pkts; do [ -r "$f" ] && n=$((n + $(cat "$f"))); done
  echo "$n"
}

# run_one COLUMN WAIT SCPU CCPU -> a result line with rdma_pkts=, or nothing
run_one() {
  local column=$1 wait=$2 scpu=$3 ccpu=$4 r0 line
  : >"$work/stats.log"
  # shellcheck disable=SC2046
  if ! bench_start_server "$work/server.out" env $(column_env "$column") timeout -k 5 120 "$bench" server \
      --addr "$addr" --port 0 --cpu "$scpu"; then
    echo "$column: server did not start: $(tail -1 "$work/server.out")" >>"$work/errors"
    bench_stop_server
    return 1
  fi
  r0=$(rdma_packets)
  # timeout's child is the server itself (exec), so its pid is the one to read
  # shellcheck disable=SC2046
  line=$(env $(column_env "$column") timeout -k 5 $((seconds + 60)) "$bench" client --test tcp-lat --size 64 \
    --addr "$addr" --port "$server_port" --iters "$iters" --warmup 300 --seconds "$seconds" --cpu "$ccpu" \
    --wait "$wait" --peer-pid "$(pgrep -P "$server_pid" -x vsock_bench || echo "$server_pid")" 2>>"$work/errors" |
    grep '^result ')
  bench_stop_server
  # the library's own log lines (not its counters) go with the errors
  grep -v 'stats:' "$work/stats.log" >>"$work/errors"
  # both processes' counters (printed at exit): upgrades and sleeps, summed
  [ -n "$line" ] && echo "$line rdma_pkts=$(($(rdma_packets) - r0))$(stat_sums)"
}

# " upgrades=N wait_sleeps=N" summed over the stats lines of $work/stats.log
stat_sums() {
  awk '/stats:/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "upgrades_done") u += kv[2]
      if (kv[1] == "wait_sleeps") { s += kv[2]; has = 1 } } ; n++ }
    END { if (n) { printf " upgrades=%d", u; if (has) printf " wait_sleeps=%d", s } }' "$work/stats.log"
}

field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }
median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

start=$SECONDS
rows=()
for layout in "${layouts[@]}"; do
  scpu=${layout%,*} ccpu=${layout#*,}
  if [ "$scpu" = "$ccpu" ]; then where="same vCPU ($scpu)"; else where="different vCPUs ($scpu, $ccpu)"; fi
  for wait in "${waits[@]}"; do
    declare -A lines=()
    for ((round = 1; round <= rounds; round++)); do
      order=()
      for column in "${columns[@]}"; do
        if ((round % 2)); then order+=("$column"); else order=("$column" "${order[@]}"); fi
      done
      for column in "${order[@]}"; do
        line=$(run_one "$column" "$wait" "$scpu" "$ccpu") || true
        echo "$where $wait $column ${line:-FAILED}" >>"$raw"
        echo "profiles.sh: $where $wait $column ${line:-FAILED}" >&2
        [ -n "$line" ] && lines[$column]+="$line"$'\n'
      done
    done
    for column in "${columns[@]}"; do
      data=${lines[$column]:-}
      note=""
      if [ "${column%%+*}" != kernel ] && [ -n "$data" ]; then
        # only the runs whose two processes both switched to RDMA
        all=$(printf '%s' "$data" | grep -c .)
        data=$(printf '%s' "$data" | grep ' upgrades=2\b')
        kept=$(printf '%s' "$data" | grep -c .)
        ((kept < all)) && note=" ($((all - kept)) of $all runs stayed on TCP)"
      fi
      if [ -z "$data" ]; then rows+=("| $where | $wait | $column | failed$note | | | | | |"); continue; fi
      p50=$(printf '%s' "$data" | field p50_us | median)
      p99=$(printf '%s' "$data" | field p99_us | median)
      cpu_m=$(printf '%s' "$data" | awk '{ c = s = m = w = 0
          for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "cpu_s") c = kv[2]; if (kv[1] == "peer_cpu_s") s = kv[2]
            if (kv[1] == "msgs") m = kv[2] }
          if (m > 0) printf "%.2f\n", (c + s) / m * 1e6 }' | median)
      busy=$(printf '%s' "$data" | awk '{ c = s = w = 0
          for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "cpu_s") c = kv[2]; if (kv[1] == "peer_cpu_s") s = kv[2]
            if (kv[1] == "wall_s") w = kv[2] }
          if (w > 0) printf "%.2f\n", (c + s) / w }' | median)
      pkts=$(printf '%s' "$data" | field rdma_pkts | median)
      # sleeps per message over the whole run (warm-up included: +600 messages)
      sleeps=$(printf '%s' "$data" | awk '{ s = -1; m = 0
          for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "wait_sleeps") s = kv[2]; if (kv[1] == "msgs") m = kv[2] }
          if (s >= 0) printf "%.3f\n", s / (m + 600) }' | median)
      rows+=("| $where | $wait | ${column/#kernel/kernel TCP}$note | $p50 | $p99 | $cpu_m | $busy | $sleeps | $pkts |")
    done
    unset lines
  done
done

echo
echo "| CPUs (server, client) | wait | column | p50 µs | p99 µs | CPU s / 1M msgs | cores busy | sleeps / msg | RDMA pkts / run |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
echo
echo "64 B TCP ping-pong (TCP_NODELAY) at $addr; medians of $rounds interleaved runs per cell, each $iters round trips" \
  "after 300 warm-up (bounded to ${seconds} s), a fresh server per run. Columns other than kernel TCP: libvsock with" \
  "VSOCK_PROFILE=<column> in both processes. CPU = user + system of client and server over the measured phase;" \
  "1 round trip = 2 messages. sleeps / msg: the library's wait_sleeps counter (a blocking call or a poll/epoll" \
  "wait that went to sleep on an upgraded socket; both processes, warm-up included) per message; '-' without it." \
  "$(nproc) CPUs; total $((SECONDS - start)) s."
if [ -s "$work/errors" ]; then
  echo "profiles.sh: errors:" >&2
  sort -u "$work/errors" | head -20 >&2
fi
