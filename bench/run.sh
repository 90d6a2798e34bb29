#!/usr/bin/env bash
# Kernel sockets vs libvsock, side by side, in one run; prints a markdown table.
#
# Usage: bench/run.sh [BUILD_DIR]        (default: build/default; builds nothing)
#
# Measures, with bench/vsock_bench, for every column:
#   TCP and UDP ping-pong latency (p50 / p99, µs) at 64 B, 1 KiB, 16 KiB
#   TCP streaming throughput (MB/s) at 64 B, 4 KiB, 64 KiB, 1 MiB
#   the cost of one recv(MSG_DONTWAIT) on an empty TCP socket (ns/call)
# Each measurement runs VSOCK_BENCH_REPEAT times, the columns interleaved
# (kernel, libvsock, libvsock, kernel, kernel, ...: the order flips every
# round) so they share the machine's noise;
# the table shows medians and, for each column after the first, its ratio to
# the first: the median over rounds of the ratio of the two runs of a round
# (latency: p50, lower is better; call cost: lower is better; throughput:
# higher is better).
#
# Environment:
#   VSOCK_BENCH_ADDR       address to use (default 127.0.0.1)
#   VSOCK_BENCH_COLUMNS    columns, first is the baseline (default "kernel libvsock";
#                          also known: rsocket = librspreload.so, needs a verbs device)
#   VSOCK_BENCH_REPEAT     rounds (runs per column) of each latency and call-cost
#                          measurement (default 15; many short runs share noise best)
#   VSOCK_BENCH_TPUT_REPEAT  rounds of each throughput measurement (default 5)
#   VSOCK_BENCH_LAT_CPUS   "SERVER_CPU CLIENT_CPU" for latency runs (default "0 0";
#                          empty = let the scheduler choose). See docs/performance.md.
#   VSOCK_BENCH_TPUT_CPUS  the same for throughput runs (default: empty)
#   VSOCK_BENCH_ITERS      round trips per latency run (default 3000, after 1000 warm-up)
#   VSOCK_BENCH_SECONDS    time bound of one latency run / length of one throughput run
#                          (default 3 / 1)
#   VSOCK_BENCH_RAW        also write every client result line to this file
#   VSOCK_BENCH_ONLY       run only these measurements, e.g. "tcp-lat:64 tcp-tput:65536"
#
# Adding a column: give it a case in column_preload (an LD_PRELOAD value), or,
# for a tool that is not a preload (e.g. perftest's ib_send_lat), define
# measure_column_NAME KIND SIZE that prints a vsock_bench-style result line.
set -uo pipefail
export TMPDIR=${TMPDIR:-/tmp}
[ -n "$TMPDIR" ] || export TMPDIR=/tmp

source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${1:-$source_dir/build/default}
bench=$build_dir/bench/vsock_bench
libvsock=$build_dir/lib/libvsock.so
addr=${VSOCK_BENCH_ADDR:-127.0.0.1}
read -r -a columns <<<"${VSOCK_BENCH_COLUMNS:-kernel libvsock}"
repeat=${VSOCK_BENCH_REPEAT:-15}
tput_repeat=${VSOCK_BENCH_TPUT_REPEAT:-5}
lat_cpus=${VSOCK_BENCH_LAT_CPUS-0 0}
tput_cpus=${VSOCK_BENCH_TPUT_CPUS-}
lat_iters=${VSOCK_BENCH_ITERS:-3000}
lat_seconds=${VSOCK_BENCH_SECONDS:-3}
tput_seconds=${VSOCK_BENCH_SECONDS:-1}
latency_sizes=(64 1024 16384)
throughput_sizes=(64 4096 65536 1048576)

die() { echo "run.sh: $*" >&2; exit 1; }
note() { echo "run.sh: $*" >&2; }

[ -x "$bench" ] || die "$bench not found: build first (cmake --build $build_dir)"
[ "${#columns[@]}" -ge 1 ] || die "VSOCK_BENCH_COLUMNS is empty"

# The LD_PRELOAD value of a column; fails (with a reason on stderr) when the
# column cannot run here.
column_preload() {
  case "$1" in
    kernel) echo "" ;;
    libvsock)
      [ -f "$libvsock" ] || { note "libvsock: $libvsock not built"; return 1; }
      echo "$libvsock"
      ;;
    rsocket)
      local rs=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
      [ -f "$rs" ] || { note "rsocket: $rs not installed"; return 1; }
      echo "$rs"
      ;;
    *) note "unknown column $1"; return 1 ;;
  esac
}

work=$(mktemp -d /tmp/vsock-bench.XXXXXX) || die "mktemp failed"
server_pids=()
cleanup() {
  local pid i
  for pid in "${server_pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || continue
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  server_pids=()
}
trap 'cleanup; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# cpu_args "S C" server|client -> "--cpu N" or nothing
cpu_args() {
  local -a cpus
  read -r -a cpus <<<"$1"
  [ "${#cpus[@]}" -eq 2 ] || return 0
  if [ "$2" = server ]; then echo "--cpu ${cpus[0]}"; else echo "--cpu ${cpus[1]}"; fi
}

# start_servers CPUS: one vsock_bench server per column, each under its own
# preload; fills server_port[COLUMN] (empty when the column is unavailable).
declare -A server_port
start_servers() {
  local cpus=$1 column preload out pid i port
  for column in "${columns[@]}"; do
    server_port[$column]=""
    declare -F "measure_column_$column" >/dev/null && continue
    preload=$(column_preload "$column") || continue
    out=$work/server-$column.out
    : >"$out"
    # shellcheck disable=SC2046
    timeout -k 5 600 env LD_PRELOAD="$preload" "$bench" server --addr "$addr" --port 0 \
      $(cpu_args "$cpus" server) >"$out" 2>&1 </dev/null &
    pid=$!
    server_pids+=("$pid")
    port=""
    for ((i = 0; i < 100; i++)); do
      port=$(sed -n 's/^READY \([0-9][0-9]*\)$/\1/p' "$out")
      [ -n "$port" ] && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if [ -z "$port" ]; then
      note "$column server did not start: $(head -c 300 "$out")"
      continue
    fi
    server_port[$column]=$port
  done
}

# measure COLUMN TEST SIZE CPUS -> one "result ..." line, or nothing on failure.
measure() {
  local column=$1 test=$2 size=$3 cpus=$4 preload iters seconds
  if declare -F "measure_column_$column" >/dev/null; then
    "measure_column_$column" "$test" "$size"
    return
  fi
  [ -n "${server_port[$column]}" ] || return 1
  preload=$(column_preload "$column" 2>/dev/null) || return 1
  if [ "$test" = tcp-tput ]; then
    iters=1000000000000 seconds=$tput_seconds
  elif [ "$test" = tcp-call ]; then
    iters=300000 seconds=$lat_seconds
  else
    iters=$lat_iters seconds=$lat_seconds
  fi
  # shellcheck disable=SC2046
  timeout -k 5 $((seconds + 40)) env LD_PRELOAD="$preload" "$bench" client --test "$test" --addr "$addr" \
    --port "${server_port[$column]}" --size "$((size > 0 ? size : 1))" --iters "$iters" --warmup 1000 --seconds "$seconds" \
    $(cpu_args "$cpus" client) 2>>"$work/client-errors.log" | grep '^result '
}

field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }

median() {  # numbers on stdin -> median, or "fail" when none
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "fail"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

human_size() {
  local s=$1
  if ((s == 0)); then echo "-"; elif ((s >= 1048576)); then echo "$((s / 1048576)) MiB"; elif ((s >= 1024)); then echo "$((s / 1024)) KiB"; else echo "$s B"; fi
}

selected() {  # TEST SIZE: is this measurement in VSOCK_BENCH_ONLY (or is that unset)?
  [ -z "${VSOCK_BENCH_ONLY:-}" ] && return 0
  [[ " $VSOCK_BENCH_ONLY " == *" $1:$2 "* ]]
}

rows=()
failed=0
raw=${VSOCK_BENCH_RAW:-$work/raw.txt}
: >"$raw"

# main_field TEST: the figure of a result line that the ratio compares.
main_field() {
  case "$1" in
    tcp-tput) echo MBps ;;
    tcp-call) echo ns_per_call ;;
    *) echo p50_us ;;
  esac
}

# paired_ratio "A1 A2 ..." "B1 B2 ...": median over rounds of Ai / Bi,
# skipping rounds where either failed ("-").
paired_ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    n = split(a, x, " "); split(b, y, " "); m = 0
    for (i = 1; i <= n; i++) if (x[i] != "-" && y[i] != "-" && y[i] + 0 > 0) r[++m] = x[i] / y[i]
    if (m == 0) { print "-"; exit }
    for (i = 2; i <= m; i++) for (j = i; j > 1 && r[j - 1] > r[j]; j--) { t = r[j]; r[j] = r[j - 1]; r[j - 1] = t }
    printf "%.2f", m % 2 ? r[(m + 1) / 2] : (r[m / 2] + r[m / 2 + 1]) / 2
  }'
}

# run_measurement LABEL TEST SIZE CPUS ROUNDS: ROUNDS interleaved runs of
# every column; appends a table row of medians and paired ratios.
run_measurement() {
  local label=$1 test=$2 size=$3 cpus=$4 rounds=$5 rep column line i value key
  selected "$test" "$size" || return 0
  key=$(main_field "$test")
  declare -A results=() by_round=()
  local -a order
  for ((rep = 1; rep <= rounds; rep++)); do
    order=()
    for ((i = 0; i < ${#columns[@]}; i++)); do
      if ((rep % 2)); then order+=("${columns[$i]}"); else order=("${columns[$i]}" "${order[@]}"); fi
    done
    for column in "${order[@]}"; do
      line=$(measure "$column" "$test" "$size" "$cpus")
      if [ -n "$line" ]; then
        echo "$column $line" >>"$raw"
        results[$column]+="$line"$'\n'
        by_round[$column]+="$(echo "$line" | field "$key") "
      else
        by_round[$column]+="- "
      fi
    done
  done
  local row="| $label | $(human_size "$size") |"
  for column in "${columns[@]}"; do
    value=$(printf '%s' "${results[$column]:-}" | field "$key" | median)
    if [[ "$test" == *-lat ]]; then
      value+=" / $(printf '%s' "${results[$column]:-}" | field p99_us | median)"
    fi
    row+=" $value |"
  done
  [[ "$row" == *fail* ]] && failed=1
  for ((i = 1; i < ${#columns[@]}; i++)); do
    row+=" $(paired_ratio "${by_round[${columns[$i]}]}" "${by_round[${columns[0]}]}") |"
  done
  rows+=("$row")
  note "$row"
}

start=$SECONDS
note "columns: ${columns[*]}; $repeat (throughput $tput_repeat) interleaved runs each; address $addr; latency CPUs '${lat_cpus}', throughput CPUs '${tput_cpus}'"

start_servers "$lat_cpus"
for test in tcp-lat udp-lat; do
  proto=${test%%-*}
  for size in "${latency_sizes[@]}"; do
    run_measurement "${proto^^} latency p50 / p99 (µs)" "$test" "$size" "$lat_cpus" "$repeat"
  done
done
run_measurement "recv() on an empty TCP socket (ns/call)" tcp-call 0 "$lat_cpus" "$repeat"
cleanup

start_servers "$tput_cpus"
for size in "${throughput_sizes[@]}"; do
  run_measurement "TCP throughput (MB/s)" tcp-tput "$size" "$tput_cpus" "$tput_repeat"
done
cleanup

header="| measurement | size |" rule="|---|---:|"
for column in "${columns[@]}"; do header+=" $column |"; rule+="---:|"; done
for ((i = 1; i < ${#columns[@]}; i++)); do header+=" ${columns[$i]} / ${columns[0]} |"; rule+="---:|"; done
echo
echo "$header"
echo "$rule"
printf '%s\n' "${rows[@]}"
echo
echo "Medians of $repeat interleaved runs per column (throughput: $tput_repeat) of ${lat_iters} round trips" \
  "(after 1000 warm-up) / 300000 recv calls / ${tput_seconds} s of streaming;" \
  "ratio = median over rounds of the per-round ratio. CPUs (server client): latency '${lat_cpus:-any}'," \
  "throughput '${tput_cpus:-any}'; address $addr; $(nproc) CPUs; total $((SECONDS - start)) s."
if [ -s "$work/client-errors.log" ]; then
  note "client errors:"
  sort -u "$work/client-errors.log" | head -20 >&2
fi
exit "$failed"
