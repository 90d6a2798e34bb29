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
# the first (latency: p50 ratio, lower is better; throughput: higher is better).
#
# Environment:
#   VSOCK_BENCH_ADDR       address to use (default 127.0.0.1)
#   VSOCK_BENCH_COLUMNS    columns, first is the baseline (default "kernel libvsock";
#                          also known: rsocket = librspreload.so, needs a verbs device)
#   VSOCK_BENCH_REPEAT     runs per measurement and column (default 5)
#   VSOCK_BENCH_LAT_CPUS   "SERVER_CPU CLIENT_CPU" for latency runs (default "0 0";
#                          empty = let the scheduler choose). See docs/performance.md.
#   VSOCK_BENCH_TPUT_CPUS  the same for throughput runs (default: empty)
#   VSOCK_BENCH_ITERS      round trips per latency run (default 10000, after 1000 warm-up)
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
repeat=${VSOCK_BENCH_REPEAT:-5}
lat_cpus=${VSOCK_BENCH_LAT_CPUS-0 0}
tput_cpus=${VSOCK_BENCH_TPUT_CPUS-}
lat_iters=${VSOCK_BENCH_ITERS:-10000}
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
    iters=1000000 seconds=$lat_seconds
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

ratio() {  # a b -> a/b with 2 decimals, or "-"
  awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'
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

# run_measurement LABEL TEST SIZE CPUS: REPEAT interleaved runs of every
# column; appends a table row.
run_measurement() {
  local label=$1 test=$2 size=$3 cpus=$4 rep column line i
  selected "$test" "$size" || return 0
  declare -A results=()
  local -a order
  for ((rep = 1; rep <= repeat; rep++)); do
    order=()
    for ((i = 0; i < ${#columns[@]}; i++)); do
      if ((rep % 2)); then order+=("${columns[$i]}"); else order=("${columns[$i]}" "${order[@]}"); fi
    done
    for column in "${order[@]}"; do
      line=$(measure "$column" "$test" "$size" "$cpus")
      if [ -n "$line" ]; then
        echo "$column $line" >>"$raw"
        results[$column]+="$line"$'\n'
      fi
    done
  done
  local row="| $label | $(human_size "$size") |" base="" value p50 p99
  local -a main_values=()
  for column in "${columns[@]}"; do
    if [ "$test" = tcp-tput ] || [ "$test" = tcp-call ]; then
      value=$(printf '%s' "${results[$column]:-}" | field "$([ "$test" = tcp-tput ] && echo MBps || echo ns_per_call)" | median)
      main_values+=("$value")
      row+=" $value |"
    else
      p50=$(printf '%s' "${results[$column]:-}" | field p50_us | median)
      p99=$(printf '%s' "${results[$column]:-}" | field p99_us | median)
      main_values+=("$p50")
      row+=" $p50 / $p99 |"
    fi
  done
  [[ "$row" == *fail* ]] && failed=1
  for ((i = 1; i < ${#columns[@]}; i++)); do
    row+=" $(ratio "${main_values[$i]}" "${main_values[0]}") |"
  done
  rows+=("$row")
  note "$row"
}

start=$SECONDS
note "columns: ${columns[*]}; $repeat interleaved runs each; address $addr; latency CPUs '${lat_cpus}', throughput CPUs '${tput_cpus}'"

start_servers "$lat_cpus"
for test in tcp-lat udp-lat; do
  proto=${test%%-*}
  for size in "${latency_sizes[@]}"; do
    run_measurement "${proto^^} latency p50 / p99 (µs)" "$test" "$size" "$lat_cpus"
  done
done
run_measurement "recv() on an empty TCP socket (ns/call)" tcp-call 0 "$lat_cpus"
cleanup

start_servers "$tput_cpus"
for size in "${throughput_sizes[@]}"; do
  run_measurement "TCP throughput (MB/s)" tcp-tput "$size" "$tput_cpus"
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
echo "Medians of $repeat interleaved runs; latency ${lat_iters} round trips (after 1000 warm-up) per run," \
  "CPUs (server client): '${lat_cpus:-any}'; throughput ${tput_seconds} s per run, CPUs '${tput_cpus:-any}';" \
  "address $addr; $(nproc) CPUs; total $((SECONDS - start)) s."
if [ -s "$work/client-errors.log" ]; then
  note "client errors:"
  sort -u "$work/client-errors.log" | head -20 >&2
fi
exit "$failed"
