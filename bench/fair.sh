#!/usr/bin/env bash
# The like-with-like measurements of the main job (issue 12 item 1): every
# column pinned the same way, its wait style stated, on a verbs device.
# Writes raw results; bench/fair_report.sh turns them into the table.
#
#   bash bench/fair.sh [BUILD_DIR [OUT_DIR]]   (defaults build/default, BUILD_DIR/fair)
#
# Where no verbs device is active it runs itself inside the Soft-RoCE VM
# (tests/rxe/with-device.sh) on rxe0's address (OUT_DIR must then be in the
# source tree, the part of the guest's view that is written through).
#
# Rows (each a CPU placement and a wait style; "server,client" vCPUs):
#   sep-block  0,1  blocking read() / ib_send_lat busy-polling      sizes: VSOCK_BENCH_LAT_SIZES
#   one-block  0,0  blocking read() / ib_send_lat -e (CQ events)    64 B
#   sep-epoll  0,1  epoll_wait() before each read (rsocket: poll(),
#                   its preload has no epoll) / ib_send_lat -e       64 B
#   one-epoll  0,0  the same on one vCPU                             64 B
#   tput       0,1  blocking write() streaming / ib_write_bw         sizes: VSOCK_BENCH_TPUT_SIZES
#   udp-lat    0,1  UDP ping-pong, poll() then recv() (vsock_bench
#                   udp-lat; the server's UDP thread the same) /
#                   ib_send_lat -c UD busy-polling                    64 B
#   udp-rate   0,1  UDP message rate: sendmmsg() of 32 datagrams per
#                   call into a recvmmsg() sink (vsock_bench udp-rate,
#                   sink), for VSOCK_BENCH_TPUT_SECONDS / ib_send_bw -c UD  64 B
#   mcast-lat  0,1  multicast one-to-two: the client sends to a group and
#                   waits for both receivers' unicast answers (vsock_bench
#                   mcast-lat against mcast-echo: two receiver processes,
#                   both on vCPU 0), poll() then recv() everywhere; no
#                   verbs column (perftest has no one-to-many latency)    64 B
# The UDP rows have no rsocket column (vsock_bench --simple has no UDP
# socket; librspreload's datagram sockets refuse the client's connect() and
# do not answer a plain client: docs/performance.md; rsocket has no
# multicast) and are not counted with perf. Each column of
# mcast-lat has a group of its own in VSOCK_FAIR_MCAST_PREFIX (default
# 239.255.77: .1 for the first column, .2 for the next, ...): the servers
# of every column run together, and receivers of one group on other ports
# would also be woken by each datagram (a UD queue pair attaches to a
# group, not to a port). The libvsock columns offload that /24 with
# VSOCK_UDP_MCAST_OFFLOAD.
# Columns: kernel (no preload), libvsock (both ends preloaded; profile
# VSOCK_FAIR_PROFILE, default: the library's default), rsocket
# (librspreload.so, vsock_bench --simple) and verbs (perftest). Socket
# columns are pinned with vsock_bench --cpu, perftest with taskset.
#
# At 64 B every run is also counted: `perf stat` (raw_syscalls:sys_enter,
# context-switches, task-clock) over the client and every thread of the
# server. vsock_bench enables both counters when its measured phase starts
# and disables them when it ends (--perf-ctl), so set-up, the upgrade and
# the warm-up are left out. perftest cannot be told, so its counts are the
# difference between each run and one shorter run of the same row (the same
# set-up, fewer round trips) divided by the extra messages.
#
# Output, in OUT_DIR: raw.txt (one line per run: "row=R col=C round=N result
# ..." plus tcp_segs= rdma_pkts= and, at 64 B, the perf counts: c_sys= c_cs=
# c_ms= of the client, s_*= of a row's server (a line of its own, every
# counted window summed), w_*= of both perftest ends over a whole run),
# samples/R-C-SIZE.txt (every round trip of every round, µs, for the CDF),
# meta.txt (what was run, where). Exit 0 when every cell has a result.
#
# Environment (the VSOCK_BENCH_* names are those of bench/run.sh):
#   VSOCK_BENCH_COLUMNS      (default "kernel libvsock rsocket verbs")
#   VSOCK_BENCH_LAT_SIZES    sep-block sizes (default "64 4096 65536 1048576")
#   VSOCK_BENCH_TPUT_SIZES   (default "64 4096 65536 1048576")
#   VSOCK_BENCH_REPEAT       rounds of the 64 B rows (default 2; 3 took the main job to 12 min
#                            on a host shared with three other guests)
#   VSOCK_BENCH_TPUT_REPEAT  rounds of the larger latency sizes and of throughput (default 1)
#   VSOCK_BENCH_ITERS        round trips per latency run (default 1000; large sizes 16 MiB / size, >= 20)
#   VSOCK_BENCH_SECONDS      time bound of a latency run (default 1)
#   VSOCK_BENCH_TPUT_SECONDS length of a throughput run (default 1)
#   VSOCK_FAIR_ROWS          rows to run (default "sep-block one-block sep-epoll tput udp-lat udp-rate mcast-lat"; one-epoll
#                            is left out to keep the main job short: ~10 s per run here)
#   VSOCK_FAIR_PROFILE       VSOCK_PROFILE of the libvsock column (default: unset)
#   VSOCK_FAIR_EXTRA         columns measured in the 64 B blocking rows and udp-lat only (sep-block,
#                            one-block, udp-lat; default "libvsock:latency": libvsock with
#                            VSOCK_PROFILE=latency, whose 2 ms spin is the nearest thing to
#                            busy-polling verbs)
set -uo pipefail
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$(cd "${1:-$source_dir/build/default}" 2>/dev/null && pwd) ||
  { echo "fair.sh: ${1:-build/default} not found: build first" >&2; exit 1; }
out=${2:-$build_dir/fair}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1

source "$source_dir/bench/on_device.sh"
bench_on_device "$source_dir/bench/fair.sh" "$build_dir" "$out"

bench=$build_dir/bench/vsock_bench
libvsock=$build_dir/lib/libvsock.so
rspreload=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
[ -x "$bench" ] && [ -f "$libvsock" ] || { echo "fair.sh: $bench or $libvsock missing: build first" >&2; exit 1; }
addr=${VSOCK_BENCH_ADDR:-${RXE_VM_IPADDR:-127.0.0.1}}
read -r -a columns <<<"${VSOCK_BENCH_COLUMNS:-kernel libvsock rsocket verbs}"
read -r -a lat_sizes <<<"${VSOCK_BENCH_LAT_SIZES:-64 4096 65536 1048576}"
read -r -a tput_sizes <<<"${VSOCK_BENCH_TPUT_SIZES:-64 4096 65536 1048576}"
read -r -a extra_columns <<<"${VSOCK_FAIR_EXTRA-libvsock:latency}"
read -r -a rows <<<"${VSOCK_FAIR_ROWS:-sep-block one-block sep-epoll tput udp-lat udp-rate mcast-lat}"
mcast_prefix=${VSOCK_FAIR_MCAST_PREFIX:-239.255.77}
declare -A mcast_group  # column -> its group (mcast-lat)
mcast_groups=0
rounds=${VSOCK_BENCH_REPEAT:-2}
size_rounds=${VSOCK_BENCH_TPUT_REPEAT:-1}
iters=${VSOCK_BENCH_ITERS:-1000}
seconds=${VSOCK_BENCH_SECONDS:-1}
tput_seconds=${VSOCK_BENCH_TPUT_SECONDS:-1}
warmup=200
verbs_dev=${VSOCK_BENCH_VERBS_DEV:-${RXE_VM_DEV:-$(ls /sys/class/infiniband 2>/dev/null | head -1)}}
verbs_gid=${VSOCK_BENCH_VERBS_GID:-${RXE_VM_GID_INDEX:-}}

work=$(mktemp -d /tmp/vsock-fair.XXXXXX) || exit 1
rm -rf "$out/samples" "$out/raw.txt"
mkdir -p "$out/samples"
raw=$out/raw.txt
: >"$raw"
failed=0
note() { echo "fair.sh: $*" >&2; }

# perf: the counters at 64 B (tracepoints need tracefs, which the VM's init
# does not mount); without it the cells say "-".
events=raw_syscalls:sys_enter,context-switches,task-clock
have_perf=0
if command -v perf >/dev/null; then
  [ -d /sys/kernel/tracing/events/raw_syscalls ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
  [ -d /sys/kernel/tracing/events/raw_syscalls ] && have_perf=1
fi
((have_perf)) || note "perf or its tracepoints unavailable: no system call / context switch counts"

# ---- servers: one per column of a row, each optionally under perf ----
declare -A server_pid server_port server_perf server_ctl server_err
server_pids=()
stop_servers() {
  local c pid i
  for c in "${!server_pid[@]}"; do
    pid=${server_pid[$c]}
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  done
  # perf (the servers' parent when counted) writes its counts as its child ends
  for pid in "${server_pids[@]}"; do wait "$pid" 2>/dev/null; done
  server_pid=() server_pids=()
}
trap 'stop_servers; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# column_env COLUMN -> env assignments of both of its processes
column_env() {
  case "$1" in
    kernel) echo "LD_PRELOAD=" ;;
    libvsock) echo "LD_PRELOAD=$libvsock VSOCK_UPGRADE_TIMEOUT_MS=2000 VSOCK_UDP_MCAST_OFFLOAD=$mcast_prefix.0/24${VSOCK_FAIR_PROFILE:+ VSOCK_PROFILE=$VSOCK_FAIR_PROFILE}" ;;
    rsocket) echo "LD_PRELOAD=$rspreload" ;;
    libvsock:*) echo "LD_PRELOAD=$libvsock VSOCK_UPGRADE_TIMEOUT_MS=2000 VSOCK_UDP_MCAST_OFFLOAD=$mcast_prefix.0/24 VSOCK_PROFILE=${1#libvsock:}" ;;
  esac
}
simple_arg() { [ "$1" = rsocket ] && echo --simple; }

# start_server ROW COLUMN SCPU COUNT(0|1) [MODE (server | sink: udp-rate's
# receiver | mcast-echo: mcast-lat's two receivers)]
start_server() {
  local row=$1 c=$2 scpu=$3 count=$4 mode=${5:-server} so=$work/server-$c.out pid i port bg
  : >"$so"
  server_port[$c]="" server_perf[$c]="" server_ctl[$c]=""
  local -a cmd=(env $(column_env "$c") "$bench" "$mode" --addr "$addr" --port 0 --cpu "$scpu" $(simple_arg "$c"))
  if [ "$mode" = mcast-echo ]; then
    mcast_groups=$((mcast_groups + 1))
    mcast_group[$c]=$mcast_prefix.$mcast_groups
    cmd+=(--group "${mcast_group[$c]}" --receivers 2)
  fi
  if ((count && have_perf)); then
    server_ctl[$c]=$work/ctl-$c server_perf[$c]=$work/server-$c.perf
    rm -f "${server_ctl[$c]}" "${server_ctl[$c]}.ack"
    mkfifo "${server_ctl[$c]}" "${server_ctl[$c]}.ack"
    perf stat -x, -D -1 --control "fifo:${server_ctl[$c]},${server_ctl[$c]}.ack" -e "$events" \
      -o "${server_perf[$c]}" -- "${cmd[@]}" >"$so" 2>&1 </dev/null &
  else
    "${cmd[@]}" >"$so" 2>&1 </dev/null &
  fi
  bg=$!
  server_pids+=("$bg")
  for ((i = 0; i < 200; i++)); do
    port=$(sed -n 's/^READY \([0-9][0-9]*\)$/\1/p' "$so")
    [ -n "$port" ] && break
    sleep 0.1
  done
  # the vsock_bench process itself (perf's child when counted); mcast-echo's
  # children are its receivers: it stops them itself
  pid=$bg
  ((count && have_perf)) && pid=$(pgrep -n -x vsock_bench -P "$bg" 2>/dev/null || echo "$bg")
  server_pid[$c]=$pid
  if [ -z "$port" ]; then
    server_err[$c]="server did not start: $(grep -v '^READY' "$so" | tail -1 | head -c 160)"
    note "$row $c ${server_err[$c]}"
    return 1
  fi
  server_port[$c]=$port
}

# perf_fields PREFIX FILE... (perf -x, output) -> " PREFIX_sys= PREFIX_cs=
# PREFIX_ms=": system calls, context switches, task-clock ms, summed
perf_fields() {
  local p=$1
  shift
  awk -F, -v p="$p" '$3 == "raw_syscalls:sys_enter" { s += $1 } $3 == "context-switches" { c += $1 }
    $3 == "task-clock" { t += $1 } END { printf " %s_sys=%d %s_cs=%d %s_ms=%.3f", p, s, p, c, p, t }' "$@"
}

path_counters() {  # "TCP_OUT_SEGMENTS RDMA_SENT_PACKETS" of this machine
  local tcp rdma=0 f
  tcp=$(awk '$1 == "Tcp:" { if (h) { print $12; exit } h = 1 }' /proc/net/snmp 2>/dev/null)
  for f in /sys/class/infiniband/*/ports/*/hw_counters/sent_pkts; do
    [ -r "$f" ] && rdma=$((rdma + $(cat "$f")))
  done
  echo "${tcp:-0} $rdma"
}

lat_iters_for() {  # SIZE -> round trips of one run
  local n=$((16777216 / $1))
  ((n > iters)) && n=$iters
  ((n < 20)) && n=20
  echo "$n"
}

# socket_run ROW COLUMN TEST SIZE CCPU WAIT -> one result line (client side;
# at 64 B with the client's perf counts and, when the server is counted, its
# counts are read at the end of the row)
socket_run() {
  local row=$1 c=$2 test=$3 size=$4 ccpu=$5 wait=$6 n secs line
  local -a extra=() pre=()
  [ -n "${server_port[$c]:-}" ] || { echo "${server_err[$c]:-no server}" >"$work/run.err"; return 1; }
  if [ "$test" = tcp-tput ]; then
    n=1000000000000 secs=$tput_seconds
  elif [ "$test" = udp-rate ]; then
    n=1 secs=$tput_seconds extra=(--batch 32)
  elif [ "$test" = udp-lat ]; then
    n=$(lat_iters_for "$size") secs=$seconds
    extra=(--warmup "$warmup" --samples "$work/samples.txt")
  elif [ "$test" = mcast-lat ]; then
    n=$(lat_iters_for "$size") secs=$seconds
    extra=(--warmup "$warmup" --samples "$work/samples.txt" --group "${mcast_group[$c]}" --receivers 2)
  else
    n=$(lat_iters_for "$size") secs=$seconds
    extra=(--wait "$wait" --warmup "$warmup" --peer-pid "${server_pid[$c]}" --samples "$work/samples.txt")
    # counted at 64 B only (the server's counts are summed over its row)
    if [ -n "${server_ctl[$c]}" ] && ((size == 64)); then
      rm -f "$work/cctl" "$work/cctl.ack" "$work/client.perf"
      mkfifo "$work/cctl" "$work/cctl.ack"
      extra+=(--perf-ctl "${server_ctl[$c]}" --perf-ctl "$work/cctl")
      pre=(perf stat -x, -D -1 --control "fifo:$work/cctl,$work/cctl.ack" -e "$events" -o "$work/client.perf" --)
    fi
  fi
  rm -f "$work/samples.txt"
  line=$(timeout -k 5 $((secs + 60)) "${pre[@]}" env $(column_env "$c") "$bench" client --test "$test" --addr "$addr" \
    --port "${server_port[$c]}" --size "$size" --iters "$n" --seconds "$secs" --cpu "$ccpu" $(simple_arg "$c") \
    "${extra[@]}" 2>"$work/run.err" </dev/null | grep '^result ')
  [ -n "$line" ] || { [ -s "$work/run.err" ] || echo "client failed, no result" >"$work/run.err"; return 1; }
  ((${#pre[@]})) && line+="$(perf_fields c "$work/client.perf")"
  echo "$line"
}

# verbs_run ROW TEST SIZE SCPU CCPU EVENTS(0|1) [ITERS] -> a result line in
# vsock_bench's units (round trips: perftest's one-way figures doubled);
# at 64 B latency with both ends' whole-run perf counts.
verbs_port=18800
verbs_run() {
  local row=$1 test=$2 size=$3 scpu=$4 ccpu=$5 ev=$6 n=${7:-} tool bound spid rc i line count=0
  local -a args pre_s=() pre_c=()
  case "$test" in
    tcp-lat) tool=ib_send_lat n=${n:-$(lat_iters_for "$size")} bound=$((seconds * 10 + 30))
      args=(-n "$n" -H); ((size == 64 && have_perf)) && count=1 ;;
    tcp-tput) tool=ib_write_bw bound=$((tput_seconds * 10 + 30))
      # a byte budget of 24 MiB per second of tput_seconds, 16..20000 messages
      n=$((25165824 * tput_seconds / size)); ((n > 20000)) && n=20000; ((n < 16)) && n=16
      args=(-n "$n") ;;
    udp-lat) tool=ib_send_lat n=${n:-$(lat_iters_for "$size")} bound=$((seconds * 10 + 30))
      args=(-c UD -n "$n" -H) ;;
    udp-rate) tool=ib_send_bw bound=$((tput_seconds * 10 + 30))
      args=(-c UD -n 20000) ;;
  esac
  command -v "$tool" >/dev/null || { echo "$tool not installed (perftest)" >"$work/run.err"; return 1; }
  ((ev)) && args+=(-e)
  args+=(-d "$verbs_dev" -s "$size" -F)
  [ -n "$verbs_gid" ] && args+=(-x "$verbs_gid")
  verbs_port=$((verbs_port + 1))
  args+=(-p "$verbs_port")
  if ((count)); then
    pre_s=(perf stat -x, -e "$events" -o "$work/vs.perf" --) pre_c=(perf stat -x, -e "$events" -o "$work/vc.perf" --)
  fi
  timeout -k 2 $((bound + 10)) "${pre_s[@]}" taskset -c "$scpu" "$tool" "${args[@]}" >"$work/verbs-server.out" 2>&1 </dev/null &
  spid=$!
  for ((i = 0; i < 100; i++)); do
    grep -qs ":$(printf '%04X' "$verbs_port") .* 0A " /proc/net/tcp && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
  done
  timeout -k 2 "$bound" "${pre_c[@]}" taskset -c "$ccpu" "$tool" "${args[@]}" "$addr" >"$work/verbs-client.out" 2>&1 </dev/null
  rc=$?
  for ((i = 0; i < 50; i++)); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
  kill -TERM "$spid" 2>/dev/null
  wait "$spid" 2>/dev/null
  # the summary line: after a "#bytes" header, first field the size
  line=$(awk -v s="$size" '/#bytes/ { h = 1; next } h && $1 == s && NF >= 5 { l = $0 } END { print l }' "$work/verbs-client.out")
  if [ -z "$line" ]; then
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "$tool timed out after ${bound} s" >"$work/run.err"
    else echo "$tool exit $rc: $(grep -iE 'err|fail|couldn|unable|invalid' "$work/verbs-client.out" | tail -1 | head -c 160)" >"$work/run.err"; fi
    return 1
  fi
  if [ "$test" = tcp-lat ] || [ "$test" = udp-lat ]; then
    # -H: every iteration ("N, usec" lines, one-way), doubled like the summary
    awk -F', ' '/^#, usec/ { on = 1; next } on && /^[0-9]+, [0-9.]+$/ { printf "%.2f\n", 2 * $2 } /^---/ { on = 0 }' \
      "$work/verbs-client.out" >"$work/samples.txt"
    # bytes iters t_min t_max t_typical t_avg t_stdev p99 p99.9
    line=$(echo "$line" | awk -v t="$tool$( ((ev)) && echo _-e)" '{ if (NF < 9) exit 1
      printf "result test='"$test"' size=%d iters=%d p50_us=%.2f p99_us=%.2f p999_us=%.2f mean_us=%.2f min_us=%.2f max_us=%.2f msgs=%d tool=%s\n",
        $1, $2, 2 * $5, 2 * $8, 2 * $9, 2 * $6, 2 * $3, 2 * $4, 2 * $2, t }') ||
      { echo "$tool: unexpected output" >"$work/run.err"; return 1; }
    ((count)) && line+="$(perf_fields w "$work/vs.perf" "$work/vc.perf")"
  elif [ "$test" = udp-rate ]; then
    # bytes iters bw_peak bw_avg msg_rate (Mpps): what the receiver completed
    line=$(echo "$line" | awk -v t="$tool" '{ if (NF < 5 || $5 + 0 <= 0) exit 1
      printf "result test=udp-rate size=%d iters=%d recv_mps=%.4f MBps=%.1f tool=%s_-c_UD\n", $1, $2, $5, $4 * 1.048576, t }') ||
      { echo "$tool reported no message rate" >"$work/run.err"; return 1; }
  else
    # bytes iters bw_peak bw_avg msg_rate; MiB/s -> MB/s
    line=$(echo "$line" | awk -v t="$tool" '{ if (NF < 5 || $4 + 0 <= 0) exit 1
      printf "result test=tcp-tput size=%d iters=%d MBps=%.1f tool=%s\n", $1, $2, $4 * 1.048576, t }') ||
      { echo "$tool reported no bandwidth" >"$work/run.err"; return 1; }
  fi
  echo "$line"
}

# row_spec ROW -> "SCPU CCPU WAIT VERBS_EVENTS TEST"
row_spec() {
  case "$1" in
    sep-block) echo "0 1 block 0 tcp-lat" ;;
    one-block) echo "0 0 block 1 tcp-lat" ;;
    sep-epoll) echo "0 1 epoll 1 tcp-lat" ;;
    one-epoll) echo "0 0 epoll 1 tcp-lat" ;;
    tput) echo "0 1 block 0 tcp-tput" ;;
    udp-lat) echo "0 1 poll 0 udp-lat" ;;
    udp-rate) echo "0 1 block 0 udp-rate" ;;
    mcast-lat) echo "0 1 poll 0 mcast-lat" ;;
    *) return 1 ;;
  esac
}

# run_cell ROW COLUMN TEST SIZE ROUND SCPU CCPU WAIT EV
run_cell() {
  local row=$1 c=$2 test=$3 size=$4 round=$5 scpu=$6 ccpu=$7 wait=$8 ev=$9 line t0 t1 r0 r1 w=$8 began=$SECONDS
  [ "$c" = rsocket ] && [ "$w" = epoll ] && w=poll  # librspreload has no epoll
  if [ "$c" = verbs ]; then
    w=busy-poll
    ((ev)) && w=cq-events
  fi
  : >"$work/run.err"
  read -r t0 r0 <<<"$(path_counters)"
  if [ "$c" = verbs ]; then line=$(verbs_run "$row" "$test" "$size" "$scpu" "$ccpu" "$ev")
  else line=$(socket_run "$row" "$c" "$test" "$size" "$ccpu" "$w"); fi
  read -r t1 r1 <<<"$(path_counters)"
  if [ -z "$line" ]; then
    echo "row=$row col=$c round=$round FAILED test=$test size=$size: $(tail -1 "$work/run.err" | head -c 200)" >>"$raw"
    note "$row $c $size round $round FAILED: $(tail -1 "$work/run.err" | head -c 200)"
    failed=1
    return
  fi
  echo "row=$row col=$c round=$round wait=$w $line tcp_segs=$((t1 - t0)) rdma_pkts=$((r1 - r0)) run_s=$((SECONDS - began))" >>"$raw"
  note "$row $c $size round $round: $(echo "$line" | grep -oE '(p50_us|p99_us|MBps|recv_mps|loss_pct|c_sys|w_sys)=[0-9.]+' | tr '\n' ' ')($((SECONDS - began)) s)"
  [ -s "$work/samples.txt" ] && [[ "$test" = *-lat ]] && cat "$work/samples.txt" >>"$out/samples/$row-$c-$size.txt"
  rm -f "$work/samples.txt"
}

# the verbs baseline of a counted row: one short run whose counts are
# subtracted (fair_report.sh) from the full runs'
verbs_baseline() {
  local row=$1 scpu=$2 ccpu=$3 ev=$4 line
  line=$(verbs_run "$row" tcp-lat 64 "$scpu" "$ccpu" "$ev" 100) || { note "$row verbs baseline failed"; return; }
  echo "row=$row col=verbs round=base $line" >>"$raw"
}

start=$SECONDS
{
  echo "date=$(date -u +%FT%TZ) nproc=$(nproc) addr=$addr dev=$verbs_dev gid=$verbs_gid"
  echo "columns=${columns[*]} extra=${extra_columns[*]} rows=${rows[*]} rounds=$rounds size_rounds=$size_rounds iters=$iters seconds=$seconds tput_seconds=$tput_seconds warmup=$warmup"
  echo "profile=${VSOCK_FAIR_PROFILE:-default} perf=$have_perf load=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/meta.txt"
note "$(tr '\n' ' ' <"$out/meta.txt")"

for row in "${rows[@]}"; do
  read -r scpu ccpu wait ev test <<<"$(row_spec "$row")"
  [ -n "$test" ] || { note "unknown row $row"; continue; }
  if [ "$test" = tcp-tput ]; then sizes=("${tput_sizes[@]}")
  elif [ "$row" = sep-block ]; then sizes=("${lat_sizes[@]}")
  else sizes=(64); fi
  server_mode=server
  [ "$test" = udp-rate ] && server_mode=sink
  [ "$test" = mcast-lat ] && server_mode=mcast-echo
  counted=0
  [[ "$test" = tcp-lat && " ${sizes[*]} " == *" 64 "* ]] && counted=1
  base_columns=("${columns[@]}")
  # UDP rows: no rsocket (vsock_bench --simple has no UDP socket); the
  # multicast row no verbs either
  if [[ "$test" = udp-* || "$test" = mcast-* ]]; then
    base_columns=()
    for c in "${columns[@]}"; do
      [ "$c" = rsocket ] || { [ "$test" = mcast-lat ] && [ "$c" = verbs ]; } || base_columns+=("$c")
    done
  fi
  row_columns=("${base_columns[@]}")
  # the extra columns: 64 B, blocking rows (in epoll rows they cost the most time)
  # and the UDP ping-pong (its verbs column busy-polls: the latency profile's
  # spin is the like-with-like column)
  with_extra=0
  ((counted)) && [[ "$row" == *-block ]] && with_extra=1
  [ "$row" = udp-lat ] || [ "$row" = mcast-lat ] && with_extra=1
  ((with_extra)) && row_columns+=("${extra_columns[@]}")
  for c in "${row_columns[@]}"; do
    [ "$c" = verbs ] && continue
    start_server "$row" "$c" "$scpu" "$counted" "$server_mode"
  done
  ((counted && have_perf)) && [[ " ${columns[*]} " == *" verbs "* ]] && verbs_baseline "$row" "$scpu" "$ccpu" "$ev"
  for size in "${sizes[@]}"; do
    n=$size_rounds
    [[ "$test" = *-lat ]] && ((size == 64)) && n=$rounds
    size_columns=("${base_columns[@]}")
    ((with_extra && size == 64)) && size_columns+=("${extra_columns[@]}")
    for ((round = 1; round <= n; round++)); do
      order=()
      for c in "${size_columns[@]}"; do
        if ((round % 2)); then order+=("$c"); else order=("$c" "${order[@]}"); fi
      done
      for c in "${order[@]}"; do run_cell "$row" "$c" "$test" "$size" "$round" "$scpu" "$ccpu" "$wait" "$ev"; done
    done
  done
  stop_servers
  # the servers' counts over every measured window of the row (64 B runs)
  for c in "${row_columns[@]}"; do
    [ -n "${server_perf[$c]:-}" ] && [ -s "${server_perf[$c]}" ] &&
      echo "row=$row col=$c round=server$(perf_fields s "${server_perf[$c]}")" >>"$raw"
    server_perf[$c]="" server_ctl[$c]=""
  done
done
echo "total_s=$((SECONDS - start))" >>"$out/meta.txt"
note "done in $((SECONDS - start)) s; results in $out"
exit "$failed"
