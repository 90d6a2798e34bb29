#!/usr/bin/env bash
# Process start and fork cost (issue 10 item 5): what the library adds to a
# process that does little or nothing with RDMA. Reported, never asserted
# (docs/performance.md, "Process start and fork cost").
#
#   bash bench/process_cost.sh [BUILD_DIR]     (default build/default; builds nothing)
#
# Where no verbs device is active it runs itself in the Soft-RoCE VM
# (bench/on_device.sh). Cases, each run kernel (nothing preloaded) and
# libvsock (preloaded), interleaved, VSOCK_PROCESS_RUNS times:
#   start     /bin/true: start and exit
#   socket    a TCP and a UDP socket made and closed, nothing else
#   connect   one connection (connect, 1 byte out and back, close) to a
#             server without libvsock (vsock_process_cost server), then exit
#   cached    the same process, connections 2..11 to that server (under
#             libvsock the peer is then in the failure cache): per connection
#   fork      a process with one connection to a server with libvsock when
#             the column has it (upgraded under libvsock) forks; the child
#             exit(0)s at once: the child's cost
#   fork-pass as fork, but the child first sends the connection to its
#             parent (SCM_RIGHTS), which uses it
# Columns: wall time (median of the runs; for start and connect, the whole
# process as the shell sees it, fork() to exit; for cached, the median time
# of one connection inside the process; for fork cases, fork() to waitpid()
# in the parent). Then, from one `strace -f` run per case and column: the
# system calls made (cached: per connection, the difference of an 11- and
# a 1-connection run over 10; fork cases: the child's and its threads'
# only), the opens of /dev/infiniband/* and the threads started (clone with
# CLONE_THREAD), counted the same way.
#
# Environment:
#   VSOCK_PROCESS_RUNS        timed runs per case and column (default 11)
#   VSOCK_PROCESS_OTHER_LIB   a third column, "other": this libvsock.so
#                             (e.g. an older build's) in place of BUILD_DIR's
#   VSOCK_UPGRADE_TIMEOUT_MS  for the libvsock column (default 2000, as setup_time.sh)
#   VSOCK_BENCH_ADDR          address (default $RXE_VM_IPADDR, else 127.0.0.1)
set -u
source_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$(cd "${1:-$source_dir/build/default}" 2>/dev/null && pwd) ||
  { echo "process_cost.sh: ${1:-build/default} not found: build first" >&2; exit 1; }
source "$source_dir/bench/on_device.sh"
bench_on_device "$source_dir/bench/process_cost.sh" "$build_dir"

prog=$build_dir/bench/vsock_process_cost
libvsock=$build_dir/lib/libvsock.so
[ -x "$prog" ] && [ -f "$libvsock" ] || { echo "process_cost.sh: $prog or $libvsock missing: build first" >&2; exit 1; }
command -v strace >/dev/null || { echo "process_cost.sh: strace missing" >&2; exit 1; }
addr=${VSOCK_BENCH_ADDR:-${RXE_VM_IPADDR:-127.0.0.1}}
runs=${VSOCK_PROCESS_RUNS:-11}
upgrade_ms=${VSOCK_UPGRADE_TIMEOUT_MS:-2000}
work=$(mktemp -d /tmp/vsock-process.XXXXXX) || exit 1
plain_pid="" vsock_pid=""
stop_servers() {
  local pid
  for pid in $plain_pid $vsock_pid; do kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  plain_pid="" vsock_pid=""
}
trap 'stop_servers; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# start_server OUT ENV... : a vsock_process_cost server in the background
# (last_pid); server_port waits for its port.
start_server() {
  local out=$1
  shift
  env "$@" "$prog" server --addr "$addr" >"$out" 2>&1 </dev/null &
  last_pid=$!
}
server_port() {
  local i port=""
  for ((i = 0; i < 200; i++)); do
    port=$(sed -n 's/^READY \([0-9][0-9]*\)$/\1/p' "$1")
    [ -n "$port" ] && break
    sleep 0.1
  done
  echo "$port"
}
start_server "$work/plain.out" LD_PRELOAD=
plain_pid=$last_pid
start_server "$work/vsock.out" LD_PRELOAD="$libvsock" VSOCK_UPGRADE_TIMEOUT_MS="$upgrade_ms"
vsock_pid=$last_pid
plain_port=$(server_port "$work/plain.out")
vsock_port=$(server_port "$work/vsock.out")
[ -n "$plain_port" ] && [ -n "$vsock_port" ] || { echo "process_cost.sh: a server did not start" >&2; exit 1; }

columns=(kernel libvsock)
[ -n "${VSOCK_PROCESS_OTHER_LIB:-}" ] && columns+=(other)
column_env() {
  case "$1" in
    kernel) echo "LD_PRELOAD=" ;;
    other) echo "LD_PRELOAD=$VSOCK_PROCESS_OTHER_LIB VSOCK_UPGRADE_TIMEOUT_MS=$upgrade_ms" ;;
    *) echo "LD_PRELOAD=$libvsock VSOCK_UPGRADE_TIMEOUT_MS=$upgrade_ms" ;;
  esac
}

# case_cmd CASE COLUMN -> the command line
case_cmd() {
  local port=$vsock_port
  [ "$2" = kernel ] && port=$plain_port
  case "$1" in
    start) echo "/bin/true" ;;
    socket) echo "$prog socket" ;;
    connect) echo "$prog connect --addr $addr --port $plain_port --conns 1" ;;
    cached) echo "$prog connect --addr $addr --port $plain_port --conns 11" ;;
    fork) echo "$prog fork --addr $addr --port $port" ;;
    fork-pass) echo "$prog fork --addr $addr --port $port --pass" ;;
  esac
}

now_ns() { date +%s%N; }
field() { sed -n "s/.* $1=\([0-9.-]*\).*/\1/p" <<<"$2"; }
median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# One timed run: prints milliseconds.
timed_run() {
  local kase=$1 column=$2 out start end
  local -a envs cmd
  read -r -a envs <<<"$(column_env "$column")"
  read -r -a cmd <<<"$(case_cmd "$kase" "$column")"
  start=$(now_ns)
  out=$(env "${envs[@]}" "${cmd[@]}" 2>>"$work/errors")
  end=$(now_ns)
  case "$kase" in
    start | socket | connect) awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f\n", (b - a) / 1e6 }' ;;
    cached) awk -v u="$(field rest_p50_us "$out")" 'BEGIN { printf "%.3f\n", u / 1000 }' ;;
    fork*) awk -v u="$(field child_us "$out")" 'BEGIN { printf "%.2f\n", u / 1000 }' ;;
  esac
}

# counts TRACE [PID]: "syscalls devopens threads" over every process of the
# trace, or over PID and the threads and processes it started.
counts() {
  awk -v root="${2:-}" '
    { pid = $1; line = $0; sub(/^[0-9]+ +/, "", line) }
    root != "" && !(pid in mine) { if (pid == root) mine[pid] = 1; else next }
    line ~ /^[a-z_0-9]+\(/ || line ~ /^<\.\.\. [a-z_0-9]+ resumed>/ {
      if (line ~ /^[a-z_0-9]+\(/) calls++
      if (line ~ /^open(at)?\(.*"\/dev\/infiniband\//) opens++
      if (line ~ /^clone3?\(/ && line ~ /CLONE_THREAD/) threads++
      if (line ~ /clone/ && match(line, /= [0-9]+$/)) mine[substr(line, RSTART + 2)] = 1
    }
    END { printf "%d %d %d\n", calls, opens, threads }' "$1"
}

traced() {
  local kase=$1 column=$2 out child e
  local -a envs cmd
  read -r -a envs <<<"$(column_env "$column")"
  read -r -a cmd <<<"$(case_cmd "$kase" "$column")"
  local -a set=()
  for e in "${envs[@]}"; do set+=(-E "$e"); done
  # strace itself is not preloaded: only the traced program gets the settings
  out=$(env -u LD_PRELOAD strace -f -qq -o "$work/trace" "${set[@]}" "${cmd[@]}" 2>>"$work/errors")
  child=$(sed -n 's/^child \([0-9]*\)$/\1/p' <<<"$out")
  counts "$work/trace" "$child"
}

echo "process_cost.sh: guest $(uname -r), $(nproc) vCPUs; $runs runs per case and column; address $addr;" \
  "preloaded columns: VSOCK_UPGRADE_TIMEOUT_MS=$upgrade_ms${VSOCK_PROCESS_OTHER_LIB:+; other: $VSOCK_PROCESS_OTHER_LIB}"
cases=(start socket connect cached fork fork-pass)
for kase in "${cases[@]}"; do
  for ((r = 0; r < runs; r++)); do
    order=("${columns[@]}")
    ((r % 2)) && order=($(printf '%s\n' "${columns[@]}" | tac))
    for column in "${order[@]}"; do echo "$column $(timed_run "$kase" "$column")" >>"$work/time.$kase"; done
  done
  for column in "${columns[@]}"; do
    if [ "$kase" = cached ]; then
      read -r c1 o1 t1 <<<"$(traced connect "$column")"
      read -r c2 o2 t2 <<<"$(traced cached "$column")"
      echo "$column $(((c2 - c1) / 10)) $(((o2 - o1) / 10)) $(((t2 - t1) / 10))" >>"$work/count.$kase"
    else
      echo "$column $(traced "$kase" "$column")" >>"$work/count.$kase"
    fi
  done
done

printf '\n%-10s %-9s %10s %9s %9s %9s %9s\n' case column ms added_ms syscalls devopens threads
for kase in "${cases[@]}"; do
  k=$(awk '$1 == "kernel" { print $2 }' "$work/time.$kase" | median)
  for column in "${columns[@]}"; do
    t=$(awk -v c="$column" '$1 == c { print $2 }' "$work/time.$kase" | median)
    read -r _ calls opens threads <<<"$(grep "^$column " "$work/count.$kase")"
    awk -v c="$kase" -v col="$column" -v k="$k" -v t="$t" -v n="$calls" -v o="$opens" -v th="$threads" 'BEGIN {
      printf "%-10s %-9s %10s %9s %9s %9s %9s\n", c, col, t, (col == "kernel" ? "" : sprintf("%+.2f", t - k)), n, o, th }'
  done
done
echo "(ms: start, socket, connect = the process as the shell sees it; cached = one connection, in the process;" \
  "fork, fork-pass = fork() to waitpid(); added_ms against kernel. syscalls, devopens (/dev/infiniband opens)" \
  "and threads started: one strace -f run; cached per connection; fork cases the child's only)"
[ -s "$work/errors" ] && { echo "stderr of the runs (first lines):"; head -5 "$work/errors"; }
exit 0
