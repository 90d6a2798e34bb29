#!/usr/bin/env bash
# What one request costs redis-server's thread (issue 12: CPU per message,
# counted where it transfers to real hardware): Debian's redis-server on
# vCPU 0, redis-benchmark on vCPU 1 (`-t set,get -n N -c 20 -P 1`), per
# column the server's main thread's user and system CPU time and its
# context switches per request (/proc/PID/task/PID/{stat,status}, read
# around the measured run, after a warm-up run that lets the connections'
# channels park), with requests/s beside. User time is redis' own work plus
# the library's (on real hardware the library's share stays); system time
# is the kernel's TCP stack, or rxe's emulation of the device (which real
# hardware does not spend on the CPU). Reported, never asserted
# (docs/performance.md, "What a request costs redis-server's thread").
#
#   bash bench/app_cpu.sh [BUILD_DIR]     (default build/default; builds nothing)
#
# Where no verbs device is active it runs itself in the Soft-RoCE VM.
# Environment:
#   VSOCK_APP_CPU_COLUMNS   (default "kernel libvsock"; "libvsock+VAR=VALUE"
#                           adds settings; "PATH/libvsock.so" another build's)
#   VSOCK_APP_CPU_ROUNDS    rounds, the columns interleaved (default 3)
#   VSOCK_APP_CPU_REQUESTS  -n of the measured run (default 20000)
#   VSOCK_BENCH_ADDR        address (default $RXE_VM_IPADDR, else 127.0.0.1)
set -u
source_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$(cd "${1:-$source_dir/build/default}" 2>/dev/null && pwd) ||
  { echo "app_cpu.sh: ${1:-build/default} not found: build first" >&2; exit 1; }
source "$source_dir/bench/on_device.sh"
bench_on_device "$source_dir/bench/app_cpu.sh" "$build_dir"
source "$source_dir/bench/rounds.sh"

for tool in redis-server redis-benchmark redis-cli; do
  command -v "$tool" >/dev/null || { echo "app_cpu.sh: $tool not installed (apt-get install redis-server redis-tools)" >&2; exit 1; }
done
addr=${VSOCK_BENCH_ADDR:-${RXE_VM_IPADDR:-127.0.0.1}}
rounds=${VSOCK_APP_CPU_ROUNDS:-3}
requests=${VSOCK_APP_CPU_REQUESTS:-20000}
read -r -a columns <<<"${VSOCK_APP_CPU_COLUMNS:-kernel libvsock}"
port=7799
hz=$(getconf CLK_TCK)
work=$(mktemp -d /tmp/vsock-app-cpu.XXXXXX) || exit 1
source "$source_dir/bench/bench_server.sh"
trap 'bench_stop_server; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# column_env COLUMN -> env assignments
column_env() {
  local name=${1%%+*} extra="" lib
  [[ "$1" == *+* ]] && extra=${1#*+} && extra=${extra//+/ }
  case "$name" in
    kernel) echo "LD_PRELOAD= $extra" ;;
    libvsock) lib=$build_dir/lib/libvsock.so ;;
    *) lib=$name ;;
  esac
  [ "$name" = kernel ] || echo "LD_PRELOAD=$lib VSOCK_UPGRADE_TIMEOUT_MS=10000 $extra"
}

# The server thread's "utime stime voluntary nonvoluntary".
thread_counts() {
  local task=/proc/$server_pid/task/$server_pid
  echo "$(awk '{ print $14, $15 }' "$task/stat") $(awk '/^(non)?voluntary_ctxt_switches/ { printf "%s ", $2 }' "$task/status")"
}

# run_one COLUMN -> "set_rps=.. get_rps=.. user_us=.. sys_us=.. vcs=.. ivcs=.." (per request)
run_one() {
  local column=$1 before after result
  # shellcheck disable=SC2046
  env $(column_env "$column") taskset -c 0 redis-server --port "$port" --bind "$addr" --protected-mode no --save '' \
    --appendonly no --daemonize no >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 100); do
    env -u LD_PRELOAD timeout 5 redis-cli -h "$addr" -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  # shellcheck disable=SC2046
  env $(column_env "$column") timeout -k 5 60 taskset -c 1 redis-benchmark -h "$addr" -p "$port" -t set -n 2000 -c 20 \
    -P 1 --csv >/dev/null 2>&1
  before=$(thread_counts)
  # shellcheck disable=SC2046
  result=$(env $(column_env "$column") timeout -k 5 120 taskset -c 1 redis-benchmark -h "$addr" -p "$port" -t set,get \
    -n "$requests" -c 20 -P 1 --csv 2>/dev/null | tr -d '"' | awk -F, '$1 == "SET" { s = $2 } $1 == "GET" { g = $2 }
      END { if (s != "" && g != "") print "set_rps=" s, "get_rps=" g }')
  after=$(thread_counts)
  bench_stop_server
  [ -n "$result" ] || return 1
  echo "$result $(echo "$before $after" | awk -v n=$((2 * requests)) -v hz="$hz" '{
    printf "user_us=%.1f sys_us=%.1f vcs=%.3f ivcs=%.3f", ($5 - $1) * 1e6 / hz / n, ($6 - $2) * 1e6 / hz / n,
      ($7 - $3) / n, ($8 - $4) / n }')"
}

raw=$work/raw.txt
bench_rounds app_cpu.sh "$rounds" "$raw" "${columns[@]}"

echo
echo "| column | SET requests/s | GET requests/s | server thread: user µs / request | system µs / request | voluntary / involuntary context switches per request |"
echo "|---|---:|---:|---:|---:|---:|"
for c in "${columns[@]}"; do
  rows=$(grep "^column=$c " "$raw" 2>/dev/null)
  [ -n "$rows" ] || { echo "| $c | failed | | | | |"; continue; }
  echo "| $c | $(field set_rps <<<"$rows" | median) | $(field get_rps <<<"$rows" | median) |" \
    "$(field user_us <<<"$rows" | median) | $(field sys_us <<<"$rows" | median) |" \
    "$(field vcs <<<"$rows" | median) / $(field ivcs <<<"$rows" | median) |"
done
echo
echo "redis-benchmark -t set,get -n $requests -c 20 -P 1 (after a warm-up of 2,000 SETs), medians of $rounds rounds," \
  "columns interleaved; redis-server on vCPU 0, redis-benchmark on vCPU 1, both preloaded for libvsock columns;" \
  "CPU times of the server's main thread at $hz ticks/s, divided by the $((2 * requests)) requests."
exit 0
