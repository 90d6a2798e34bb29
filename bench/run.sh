#!/usr/bin/env bash
# Kernel sockets vs libvsock, side by side, in one run; prints a markdown table.
#
# Usage: bench/run.sh [BUILD_DIR]        (default: build/default; builds nothing)
#
# Measures, with bench/vsock_bench, for every column:
#   TCP and UDP ping-pong latency (p50 / p99 of the round trip, µs) at 64 B, 1 KiB, 16 KiB
#   TCP streaming throughput (MB/s, 10^6 bytes) at 64 B, 4 KiB, 64 KiB, 1 MiB
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
#                          also known: rsocket = librspreload.so, needs a verbs device;
#                          verbs = perftest on the verbs device, the raw-verbs ceiling)
#   VSOCK_BENCH_RATIOS     ratio columns "A/B ..." (default: every column / the first);
#                          issue 3's targets are checked where a pair has one (✓ / ✗)
#   VSOCK_BENCH_TESTS      measurements to run (default "tcp-lat udp-lat tcp-call tcp-tput")
#   VSOCK_BENCH_LAT_SIZES  ping-pong sizes (default "64 1024 16384"; UDP skips > 65507)
#   VSOCK_BENCH_TPUT_SIZES streaming write sizes (default "64 4096 65536 1048576")
#   VSOCK_BENCH_SIMPLE_COLUMNS  columns whose vsock_bench runs with --simple (no UDP,
#                          no poll(), no SO_RCVTIMEO; default "rsocket")
#   VSOCK_BENCH_REPEAT     rounds (runs per column) of each latency and call-cost
#                          measurement (default 15; many short runs share noise best)
#   VSOCK_BENCH_TPUT_REPEAT  rounds of each throughput measurement (default 5)
#   VSOCK_BENCH_LAT_CPUS   "SERVER_CPU CLIENT_CPU" for latency runs (default "0 0";
#                          empty = let the scheduler choose). See docs/performance.md.
#   VSOCK_BENCH_TPUT_CPUS  the same for throughput runs (default: empty)
#   VSOCK_BENCH_ITERS      round trips per latency run (default 3000, after 1000 warm-up;
#                          for large messages at most 16 MiB / size, at least 20)
#   VSOCK_BENCH_SECONDS    time bound of one latency run (default 3)
#   VSOCK_BENCH_TPUT_SECONDS  length of one throughput run (default: VSOCK_BENCH_SECONDS or 1)
#   VSOCK_BENCH_VERBS_DEV, VSOCK_BENCH_VERBS_GID  verbs column's device and GID index
#                          (default $RXE_VM_DEV / $RXE_VM_GID_INDEX, else the first device)
#   VSOCK_BENCH_VERBS_LAT, VSOCK_BENCH_VERBS_BW  perftest tools (default ib_send_lat, ib_send_bw)
#   VSOCK_BENCH_RAW        also write every client result line to this file
#   VSOCK_BENCH_ONLY       run only these measurements, e.g. "tcp-lat:64 tcp-tput:65536"
#
# Adding a column: give it a case in column_preload (an LD_PRELOAD value), or,
# for a tool that is not a preload (e.g. perftest's ib_send_lat), define
# measure_column_NAME TEST SIZE CPUS that prints a vsock_bench-style result line
# (status 2: no counterpart of TEST, shown as n/a; else on failure the last
# line of its stderr is the reason shown in the table).
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
tput_seconds=${VSOCK_BENCH_TPUT_SECONDS:-${VSOCK_BENCH_SECONDS:-1}}
read -r -a tests <<<"${VSOCK_BENCH_TESTS:-tcp-lat udp-lat tcp-call tcp-tput}"
read -r -a latency_sizes <<<"${VSOCK_BENCH_LAT_SIZES:-64 1024 16384}"
read -r -a throughput_sizes <<<"${VSOCK_BENCH_TPUT_SIZES:-64 4096 65536 1048576}"
simple_columns=" ${VSOCK_BENCH_SIMPLE_COLUMNS-rsocket} "
if [ -n "${VSOCK_BENCH_RATIOS:-}" ]; then
  read -r -a ratios <<<"$VSOCK_BENCH_RATIOS"
else
  ratios=()
  for c in "${columns[@]:1}"; do ratios+=("$c/${columns[0]}"); done
fi
wanted() { [[ " ${tests[*]} " == *" $1 "* ]]; }

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

# simple_arg COLUMN -> "--simple" for the columns that need it
simple_arg() { [[ "$simple_columns" == *" $1 "* ]] && echo --simple; }

# start_servers CPUS: one vsock_bench server per column, each under its own
# preload; fills server_port[COLUMN] (empty when the column is unavailable)
# and server_error[COLUMN] (why not).
declare -A server_port server_error
start_servers() {
  local cpus=$1 column preload out pid i port
  for column in "${columns[@]}"; do
    server_port[$column]=""
    declare -F "measure_column_$column" >/dev/null && continue
    if ! preload=$(column_preload "$column" 2>"$work/preload.err"); then
      server_error[$column]=$(tail -1 "$work/preload.err")
      continue
    fi
    out=$work/server-$column.out
    : >"$out"
    # shellcheck disable=SC2046
    timeout -k 5 900 env LD_PRELOAD="$preload" "$bench" server --addr "$addr" --port 0 \
      $(cpu_args "$cpus" server) $(simple_arg "$column") >"$out" 2>&1 </dev/null &
    pid=$!
    server_pids+=("$pid")
    port=""
    for ((i = 0; i < 150; i++)); do
      port=$(sed -n 's/^READY \([0-9][0-9]*\)$/\1/p' "$out")
      [ -n "$port" ] && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if [ -z "$port" ]; then
      server_error[$column]="server did not start: $(grep -v '^READY' "$out" | tail -1 | head -c 200)"
      note "$column ${server_error[$column]}"
      continue
    fi
    server_port[$column]=$port
  done
}

# lat_iters_for SIZE: round trips of one latency run (fewer for large messages,
# which are slow on the emulated test bed; the run is also bounded in time).
lat_iters_for() {
  local n=$((16777216 / $1))
  ((n > lat_iters)) && n=$lat_iters
  ((n < 20)) && n=20
  echo "$n"
}

# ---- the raw-verbs column: perftest on the verbs device ----
verbs_dev=${VSOCK_BENCH_VERBS_DEV:-${RXE_VM_DEV:-}}
verbs_gid=${VSOCK_BENCH_VERBS_GID:-${RXE_VM_GID_INDEX:-}}
verbs_lat_tool=${VSOCK_BENCH_VERBS_LAT:-ib_send_lat}
verbs_bw_tool=${VSOCK_BENCH_VERBS_BW:-ib_send_bw}

port_listening() {  # PORT: is a TCP socket listening on it (any address)?
  local hex
  hex=$(printf '%04X' "$1")
  awk -v p=":$hex" 'FNR > 1 && substr($2, length($2) - 4) == p && $4 == "0A" { found = 1 } END { exit !found }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# measure_column_verbs TEST SIZE CPUS: a perftest server + client pair on the
# device, both bounded, pinned with taskset to CPUS ("SERVER CLIENT", as the
# socket columns' --cpu; empty: unpinned); prints a result line in
# vsock_bench's units:
#   tcp-lat  -> $verbs_lat_tool -n N: perftest prints half the round trip
#               (t_typical = median, 99% percentile); doubled here, so p50_us /
#               p99_us are round trips like vsock_bench's. Busy-polling.
#   tcp-tput -> $verbs_bw_tool -n N (N messages, ~24 MiB per second of
#               VSOCK_BENCH_TPUT_SECONDS, 16..20000): "BW average" is in MiB/s
#               (2^20 B); converted to MB/s (10^6 B). A zero is a failure.
measure_column_verbs() {
  local test=$1 size=$2 tool iters bound port spid rc i line
  local -a args pin_server=() pin_client=() cpu_pair
  read -r -a cpu_pair <<<"${3:-}"
  if [ "${#cpu_pair[@]}" -eq 2 ]; then
    pin_server=(taskset -c "${cpu_pair[0]}") pin_client=(taskset -c "${cpu_pair[1]}")
  fi
  case "$test" in
    tcp-lat) tool=$verbs_lat_tool iters=$(lat_iters_for "$size"); args=(-n "$iters"); bound=$((lat_seconds * 10 + 30)) ;;
    tcp-tput)
      # -n: a byte budget of 24 MiB per second of VSOCK_BENCH_TPUT_SECONDS
      # (-D gave no completions in its window for 1 MiB messages on rxe: 0 MB/s)
      tool=$verbs_bw_tool iters=$((25165824 * tput_seconds / size))
      ((iters > 20000)) && iters=20000
      ((iters < 16)) && iters=16
      args=(-n "$iters"); bound=$((tput_seconds * 10 + 30)) ;;
    *) echo "no raw-verbs counterpart of $test" >&2; return 2 ;;
  esac
  command -v "$tool" >/dev/null || { echo "$tool not installed (perftest)" >&2; return 1; }
  local dev=$verbs_dev
  if [ -z "$dev" ]; then
    dev=$(ls /sys/class/infiniband 2>/dev/null | head -1)
    [ -n "$dev" ] || { echo "no verbs device" >&2; return 1; }
  fi
  args+=(-d "$dev" -s "$size" -F)
  [ -n "$verbs_gid" ] && args+=(-x "$verbs_gid")
  # a fresh TCP port for perftest's exchange each time (no TIME_WAIT clashes)
  port=$(($(cat "$work/verbs-port" 2>/dev/null || echo 18600) + 1))
  ((port > 19599)) && port=18601
  echo "$port" >"$work/verbs-port"
  args+=(-p "$port")
  timeout -k 2 $((bound + 10)) "${pin_server[@]}" "$tool" "${args[@]}" >"$work/verbs-server.out" 2>&1 </dev/null &
  spid=$!
  for ((i = 0; i < 100; i++)); do
    port_listening "$port" && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
  done
  timeout -k 2 "$bound" "${pin_client[@]}" "$tool" "${args[@]}" "$addr" >"$work/verbs-client.out" 2>&1 </dev/null
  rc=$?
  for ((i = 0; i < 50; i++)); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
  kill -TERM "$spid" 2>/dev/null
  wait "$spid" 2>/dev/null
  # the data line after the "#bytes" header whose first field is the size
  line=$(awk -v s="$size" '/#bytes/ { h = 1; next } h && $1 == s && NF >= 5 { print; exit }' "$work/verbs-client.out")
  if [ -z "$line" ]; then
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "$tool timed out after ${bound} s" >&2
    else echo "$tool exit $rc: $(grep -iE 'err|fail|couldn|unable|invalid' "$work/verbs-client.out" | tail -1 | head -c 160)" >&2; fi
    return 1
  fi
  if [ "$test" = tcp-lat ]; then
    # bytes iters t_min t_max t_typical t_avg t_stdev p99 p99.9
    echo "$line" | awk -v t="$tool" '{ if (NF < 8) exit 1
      printf "result test=tcp-lat size=%d iters=%d p50_us=%.2f p99_us=%.2f mean_us=%.2f min_us=%.2f max_us=%.2f tool=%s\n",
        $1, $2, 2 * $5, 2 * $8, 2 * $6, 2 * $3, 2 * $4, t }' || { echo "$tool: unexpected output: $line" >&2; return 1; }
  else
    # bytes iters bw_peak bw_avg msg_rate
    echo "$line" | awk -v t="$tool" '{ if (NF < 5 || $4 + 0 <= 0) exit 1
      printf "result test=tcp-tput size=%d iters=%d MBps=%.1f Gbps=%.3f tool=%s\n", $1, $2, $4 * 1.048576, $4 * 1.048576 * 8 / 1000, t }' || { echo "$tool reported no bandwidth: $line" >&2; return 1; }
  fi
}

# measure COLUMN TEST SIZE CPUS -> one "result ..." line; on failure nothing,
# the reason in $work/run.err, status 2 when the column has no such test.
measure() {
  local column=$1 test=$2 size=$3 cpus=$4 preload iters seconds rc
  : >"$work/run.err"
  if declare -F "measure_column_$column" >/dev/null; then
    "measure_column_$column" "$test" "$size" "$cpus" 2>"$work/run.err"
    return
  fi
  if [ -z "${server_port[$column]}" ]; then
    echo "${server_error[$column]:-no server}" >"$work/run.err"
    return 1
  fi
  preload=$(column_preload "$column" 2>/dev/null) || return 1
  if [ "$test" = tcp-tput ]; then
    iters=1000000000000 seconds=$tput_seconds
  elif [ "$test" = tcp-call ]; then
    iters=300000 seconds=$lat_seconds
  else
    iters=$(lat_iters_for "$size") seconds=$lat_seconds
  fi
  # shellcheck disable=SC2046
  timeout -k 5 $((seconds + 40)) env LD_PRELOAD="$preload" "$bench" client --test "$test" --addr "$addr" \
    --port "${server_port[$column]}" --size "$((size > 0 ? size : 1))" --iters "$iters" --warmup 1000 --seconds "$seconds" \
    $(cpu_args "$cpus" client) $(simple_arg "$column") >"$work/run.out" 2>"$work/run.err"
  rc=$?
  cat "$work/run.err" >>"$work/client-errors.log"
  grep '^result ' "$work/run.out" && return 0
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "client timed out" >>"$work/run.err"
  elif [ "$rc" -gt 128 ]; then echo "client killed by signal $((rc - 128))" >>"$work/run.err"
  elif [ ! -s "$work/run.err" ]; then echo "client exit $rc, no result" >>"$work/run.err"; fi
  return 1
}

# path_counters -> "TCP_OUT_SEGMENTS RDMA_SENT_PACKETS" of this machine (the
# second summed over the verbs devices' hw_counters; 0 without). The deltas
# over a run show which path its bytes took: a preload that silently falls
# back to kernel TCP (librspreload.so does, e.g. without a device) shows up.
path_counters() {
  local tcp rdma=0 f
  tcp=$(awk '$1 == "Tcp:" { if (h) { print $12; exit } h = 1 }' /proc/net/snmp 2>/dev/null)
  for f in /sys/class/infiniband/*/ports/*/hw_counters/sent_pkts; do
    [ -r "$f" ] && rdma=$((rdma + $(cat "$f")))
  done
  echo "${tcp:-0} $rdma"
}
declare -A column_tcp_segs column_rdma_pkts

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
failures=()
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

# target PAIR TEST -> "<=1.2" / ">=0.8" ... : issue 3's targets, or nothing.
target() {
  case "$1:$2" in
    libvsock/verbs:tcp-lat) echo "<=1.2" ;;
    libvsock/rsocket:tcp-lat) echo "<=1.0" ;;
    libvsock/verbs:tcp-tput) echo ">=0.8" ;;
    libvsock/rsocket:tcp-tput) echo ">=1.0" ;;
  esac
}

# mark RATIO TARGET -> "RATIO ✓" / "RATIO ✗" / RATIO
mark() {
  [ -n "$2" ] && [ "$1" != "-" ] || { echo "$1"; return; }
  awk -v r="$1" -v t="$2" 'BEGIN { v = substr(t, 3) + 0
    ok = substr(t, 1, 2) == "<=" ? r + 0 <= v : r + 0 >= v
    printf "%s %s", r, ok ? "✓" : "✗" }'
}

# run_measurement LABEL TEST SIZE CPUS ROUNDS: ROUNDS interleaved runs of
# every column; appends a table row of medians and paired ratios.
run_measurement() {
  local label=$1 test=$2 size=$3 cpus=$4 rounds=$5 rep column line i value key rc reason pair a b tcp0 tcp1 rdma0 rdma1
  selected "$test" "$size" || return 0
  key=$(main_field "$test")
  declare -A results=() by_round=() nfail=() reasons=() na=()
  local -a order
  for ((rep = 1; rep <= rounds; rep++)); do
    order=()
    for ((i = 0; i < ${#columns[@]}; i++)); do
      if ((rep % 2)); then order+=("${columns[$i]}"); else order=("${columns[$i]}" "${order[@]}"); fi
    done
    for column in "${order[@]}"; do
      [ -n "${na[$column]:-}" ] && { by_round[$column]+="- "; continue; }
      read -r tcp0 rdma0 <<<"$(path_counters)"
      line=$(measure "$column" "$test" "$size" "$cpus")
      rc=$?
      read -r tcp1 rdma1 <<<"$(path_counters)"
      column_tcp_segs[$column]=$((${column_tcp_segs[$column]:-0} + tcp1 - tcp0))
      column_rdma_pkts[$column]=$((${column_rdma_pkts[$column]:-0} + rdma1 - rdma0))
      [ -n "$line" ] && line+=" tcp_segs=$((tcp1 - tcp0)) rdma_pkts=$((rdma1 - rdma0))"
      if [ -n "$line" ]; then
        echo "$column $line" >>"$raw"
        results[$column]+="$line"$'\n'
        by_round[$column]+="$(echo "$line" | field "$key") "
      else
        by_round[$column]+="- "
        if [ "$rc" = 2 ]; then na[$column]=1; continue; fi
        nfail[$column]=$((${nfail[$column]:-0} + 1))
        reason=$(grep -v '^[[:space:]]*$' "$work/run.err" | tail -1 | tr '|' '/' | head -c 160)
        reasons[$column]=${reason:-unknown}
        echo "$column FAILED test=$test size=$size: ${reasons[$column]}" >>"$raw"
      fi
    done
  done
  local row="| $label | $(human_size "$size") |"
  for column in "${columns[@]}"; do
    if [ -n "${na[$column]:-}" ]; then
      value="n/a"
    elif [ -z "${results[$column]:-}" ]; then
      value="failed: ${reasons[$column]}"
      failed=1
    else
      value=$(printf '%s' "${results[$column]}" | field "$key" | median)
      if [[ "$test" == *-lat ]]; then
        value+=" / $(printf '%s' "${results[$column]}" | field p99_us | median)"
      fi
      if [ -n "${nfail[$column]:-}" ]; then
        value+=" (${nfail[$column]} of $rounds runs failed)"
        failed=1
      fi
    fi
    if [ -n "${nfail[$column]:-}" ]; then
      failures+=("$column, $test $(human_size "$size"): ${nfail[$column]} of $rounds runs failed; last reason: ${reasons[$column]}")
    fi
    row+=" $value |"
  done
  for pair in "${ratios[@]}"; do
    a=${pair%%/*} b=${pair#*/}
    row+=" $(mark "$(paired_ratio "${by_round[$a]:-}" "${by_round[$b]:-}")" "$(target "$pair" "$test")") |"
  done
  rows+=("$row")
  note "$row"
}

start=$SECONDS
note "columns: ${columns[*]}; tests: ${tests[*]}; $repeat (throughput $tput_repeat) interleaved runs each; address $addr; latency CPUs '${lat_cpus}', throughput CPUs '${tput_cpus}'"

if wanted tcp-lat || wanted udp-lat || wanted tcp-call; then
  start_servers "$lat_cpus"
  for test in tcp-lat udp-lat; do
    wanted "$test" || continue
    proto=${test%%-*}
    for size in "${latency_sizes[@]}"; do
      [ "$test" = udp-lat ] && ((size > 65507)) && continue
      run_measurement "${proto^^} latency p50 / p99 (µs)" "$test" "$size" "$lat_cpus" "$repeat"
    done
  done
  wanted tcp-call && run_measurement "recv() on an empty TCP socket (ns/call)" tcp-call 0 "$lat_cpus" "$repeat"
  cleanup
fi

if wanted tcp-tput; then
  start_servers "$tput_cpus"
  for size in "${throughput_sizes[@]}"; do
    run_measurement "TCP throughput (MB/s)" tcp-tput "$size" "$tput_cpus" "$tput_repeat"
  done
  cleanup
fi

header="| measurement | size |" rule="|---|---:|"
for column in "${columns[@]}"; do header+=" $column |"; rule+="---:|"; done
for pair in "${ratios[@]}"; do header+=" ${pair%%/*} / ${pair#*/} |"; rule+="---:|"; done
echo
echo "$header"
echo "$rule"
printf '%s\n' "${rows[@]}"
echo
echo "Medians of $repeat interleaved runs per column (throughput: $tput_repeat) of up to ${lat_iters} round trips" \
  "(after up to 1000 warm-up; large messages: 16 MiB / size, at least 20; each run bounded to ${lat_seconds} s)" \
  "/ 300000 recv calls / ${tput_seconds} s of streaming;" \
  "ratio = median over rounds of the per-round ratio (latency: p50, lower is better; throughput: higher is better)." \
  "CPUs (server client): latency '${lat_cpus:-any}', throughput '${tput_cpus:-any}'; address $addr; $(nproc) CPUs; total $((SECONDS - start)) s."
if [[ " ${columns[*]} " == *" verbs "* ]]; then
  echo "verbs = perftest on ${verbs_dev:-the first device} (GID index ${verbs_gid:-default}): latency $verbs_lat_tool," \
    "busy-polling, pinned with taskset to the same CPUs as the socket columns, its one-way figures (t_typical, 99% percentile) doubled to round trips; throughput $verbs_bw_tool -n (24 MiB per ${tput_seconds} s," \
    "16..20000 messages), MiB/s converted to MB/s."
fi
if [[ "$simple_columns" != "  " ]]; then
  for column in "${columns[@]}"; do
    [[ "$simple_columns" == *" $column "* ]] && echo "$column runs vsock_bench --simple (blocking accept, no UDP, no SO_RCVTIMEO; same measured loops)."
  done
fi
summary="Path check, over all runs of a column (TCP segments sent / RDMA packets sent while it ran):"
for column in "${columns[@]}"; do summary+=" $column ${column_tcp_segs[$column]:-0} / ${column_rdma_pkts[$column]:-0};"; done
echo "${summary%;}."
if [[ " ${ratios[*]} " == *" libvsock/verbs "* || " ${ratios[*]} " == *" libvsock/rsocket "* ]]; then
  echo "Targets (issue 3), marked ✓/✗: libvsock latency ≤ 1.2× verbs and ≤ rsocket; libvsock throughput ≥ 0.8× verbs and ≥ rsocket."
fi
if [ "${#failures[@]}" -gt 0 ]; then
  echo
  echo "Failures:"
  printf -- '- %s\n' "${failures[@]}"
fi
if [ -s "$work/client-errors.log" ]; then
  note "client errors:"
  sort -u "$work/client-errors.log" | head -20 >&2
fi
exit "$failed"
