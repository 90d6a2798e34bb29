#!/bin/bash
# apps.sh PRELOAD redis|iperf3
# Real programs from Debian's packages, unmodified, across the two hosts of
# the two-host bed (tests/rxe/two-hosts.sh): the server on host a, the
# client on host b; first both without the library (the kernel's figure),
# then both under it.
#
#   redis   redis-server; redis-benchmark SET and GET, VSOCK_TH_CLIENTS
#           clients (default 20), VSOCK_TH_REQUESTS requests each test
#           (default 4000). The server counts exactly the calls sent.
#   iperf3  iperf3 -s -1; iperf3 -c for 5 s (a reverse run too).
#
# Under the library each host's processes must have upgraded their
# connections and carried at least 90% of their bytes over RDMA each way
# (stats), and each host's rxe0 must have counted the packets. Figures of
# both runs are printed side by side (MEASURED lines).
source "$(dirname "$0")/twohost_lib.sh"
[ $# -eq 2 ] || { echo "usage: $0 PRELOAD redis|iperf3"; exit 2; }
preload=$(ut_abs "$1") program=$2
th_leave_share
clients=${VSOCK_TH_CLIENTS:-20}
requests=${VSOCK_TH_REQUESTS:-4000}
port=$((20000 + RANDOM % 20000))  # host a's, told to host b
# The default (200 ms) is for real links: under emulation 20 connections'
# rdma_cm handshakes across the two guests at once take longer, and a
# timeout keeps the peer on TCP for peer_fail_cache_s (as on one host:
# tests/apps use 10 s).
upgrade_timeout=${VSOCK_UPGRADE_TIMEOUT_MS:-5000}

# preload_env MODE LOG: PRE=(the command prefix that runs a program under
# the library, logging to LOG) when MODE is libvsock, else PRE=(). A
# prefix, not a function: a background job must be the program itself, so
# that signalling its PID signals the program.
preload_env() {
  PRE=()
  [ "$1" = libvsock ] && PRE=(env LD_PRELOAD="$preload" VSOCK_STATS=1 VSOCK_LOG_LEVEL=info VSOCK_LOG_FILE="$2"
    VSOCK_UPGRADE_TIMEOUT_MS="$upgrade_timeout")
  return 0
}

# expect_rdma LOG WHAT MIN_UPGRADES: the processes that logged to LOG
# upgraded MIN_UPGRADES connections and moved >= 90% of their bytes each
# way over RDMA.
expect_rdma() {
  local log=$1 what=$2 min=$3 s rs rr ts tr up
  s=$(ut_stats "$log" upgrades_done rdma_bytes_sent rdma_bytes_received tcp_bytes_sent tcp_bytes_received)
  [ -n "$s" ] || ut_fail "$what: no stats line in $log"
  th_log "$what: $s"
  th_log "$what: $(ut_stats "$log" upgrade_attempts fallback_timeout fallback_declined fallback_rejected \
    fallback_no_listener fallback_cached_peer fallback_peer_closed fallback_no_request fallback_refused upgrade_resets)"
  read -r up rs rr ts tr <<< "$(echo "$s" | sed 's/[a-z_]*=//g')"
  [ "$up" -ge "$min" ] || ut_fail "$what upgraded $up connections, expected at least $min"
  [ "$rs" -ge $((ts * 9)) ] && [ "$rs" -gt 0 ] || ut_fail "$what sent $rs bytes over RDMA against $ts on TCP"
  [ "$rr" -ge $((tr * 9)) ] && [ "$rr" -gt 0 ] || ut_fail "$what received $rr bytes over RDMA against $tr on TCP"
}

# ---------------------------------------------------------------- redis --
redis_server() {  # MODE: host a
  local mode=$1 pid calls t in_bytes
  # No timeout(1) wrapper: its exit status after our SIGTERM is its own
  # (143), not redis's; the guest's timeout bounds the server's life.
  preload_env "$mode" "$TH_WORK/redis-$mode.log"
  "${PRE[@]}" redis-server --port "$port" --bind "$TH_SELF" \
    --save '' --appendonly no --protected-mode no --daemonize no --logfile '' --dir "$TH_WORK" \
    > "$TH_WORK/redis-$mode.out" 2>&1 &
  pid=$!
  for ((t = 0; t < 150; t++)); do
    redis-cli -h "$TH_SELF" -p "$port" PING 2>/dev/null | grep -q PONG && break
    kill -0 "$pid" 2>/dev/null || ut_fail "redis-server ($mode) did not start"
    sleep 0.1
  done
  pair_mark "redis-$mode" "$port"
  pair_wait "redis-$mode-done" 300 > /dev/null || ut_fail "no redis-benchmark result from host b ($mode)"
  for t in set get; do
    calls=$(redis-cli -h "$TH_SELF" -p "$port" INFO commandstats | tr -d '\r' |
      sed -n "s/^cmdstat_$t:calls=\([0-9]*\),.*/\1/p")
    [ "${calls:-0}" = "$requests" ] || ut_fail "redis-server ($mode) counted ${calls:-no} $t calls, expected $requests"
  done
  in_bytes=$(redis-cli -h "$TH_SELF" -p "$port" INFO stats | tr -d '\r' | sed -n 's/^total_net_input_bytes:\(.*\)$/\1/p')
  th_log "redis-server ($mode) counted $requests SET and $requests GET calls, $in_bytes bytes in"
  th_kill_wait "$pid" TERM 15 || ut_fail "redis-server ($mode) exited with status $?"
  [ "$mode" = libvsock ] && expect_rdma "$TH_WORK/redis-$mode.log" "redis-server" $((2 * clients))
  return 0
}

redis_client() {  # MODE: host b
  local mode=$1 out line t
  port=$(pair_wait "redis-$mode" 60) || ut_fail "host a's redis-server did not start ($mode)"
  out=$TH_WORK/bench-$mode.csv
  preload_env "$mode" "$TH_WORK/bench-$mode.log"
  "${PRE[@]}" timeout 300 redis-benchmark -h "$TH_PEER" -p "$port" \
    -n "$requests" -c "$clients" -t set,get --csv > "$out" || ut_fail "redis-benchmark ($mode) failed"
  for t in SET GET; do
    line=$(tr -d '"' < "$out" | awk -F, -v t="$t" '$1 == t { print $2 " requests/s, p50 " $5 " ms" }')
    [ -n "$line" ] || ut_fail "redis-benchmark ($mode) printed no $t result"
    echo "MEASURED: redis $t across hosts ($mode): $line"
  done
  pair_mark "redis-$mode-done"
  [ "$mode" = libvsock ] && expect_rdma "$TH_WORK/bench-$mode.log" "redis-benchmark" $((2 * clients))
  return 0
}

# --------------------------------------------------------------- iperf3 --
iperf_server() {  # MODE RUN: host a, one client run
  local mode=$1 run=$2 pid
  preload_env "$mode" "$TH_WORK/iperf-server-$mode.log"
  "${PRE[@]}" timeout 120 iperf3 -s -1 -B "$TH_SELF" -p "$port" \
    > "$TH_WORK/iperf-server-$mode-$run.out" 2>&1 &
  pid=$!
  # Listening, not just started: under the library, opening the device
  # comes first (a fixed 1 s wait here once let the client's connect be
  # refused in CI). A probe would be its one client (-1): ss looks instead.
  local t
  for ((t = 0; t < 300; t++)); do
    [ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ] && break
    kill -0 "$pid" 2>/dev/null || ut_fail "iperf3 -s ($mode) did not start"
    sleep 0.1
  done
  [ "$t" -lt 300 ] || ut_fail "iperf3 -s ($mode) does not listen on port $port after 30 s"
  pair_mark "iperf-$mode-$run" "$port"
  ut_wait_pid "$pid" 120 || ut_fail "iperf3 -s ($mode, $run) exited with status $?"
}

iperf_client() {  # MODE RUN [-R]: host b
  local mode=$1 run=$2 out rate
  shift 2
  port=$(pair_wait "iperf-$mode-$run" 60) || ut_fail "host a's iperf3 -s did not start ($mode)"
  out=$TH_WORK/iperf-client-$mode-$run.out
  preload_env "$mode" "$TH_WORK/iperf-client-$mode.log"
  "${PRE[@]}" timeout 120 iperf3 -c "$TH_PEER" -p "$port" -t 5 "$@" \
    > "$out" 2>&1 || { cat "$out"; ut_fail "iperf3 -c ($mode, $run) failed"; }
  rate=$(awk '/receiver$/ { print $(NF-2), $(NF-1) }' "$out" | tail -n 1)
  [ -n "$rate" ] || { cat "$out"; ut_fail "iperf3 -c ($mode, $run) printed no receiver line"; }
  echo "MEASURED: iperf3 $run across hosts ($mode): $rate"
}

case $program in
  redis)
    command -v redis-server > /dev/null || { echo "SKIPPED: redis-server not installed"; exit 77; }
    for mode in kernel libvsock; do
      pkts=$(th_device_packets) segs=$(th_tcp_segments)
      if [ "$TH_ROLE" = a ]; then redis_server "$mode"; else redis_client "$mode"; fi
      th_evidence "redis ($mode, host $TH_ROLE)" "$pkts" "$segs"
    done
    ;;
  iperf3)
    command -v iperf3 > /dev/null || { echo "SKIPPED: iperf3 not installed"; exit 77; }
    for mode in kernel libvsock; do
      pkts=$(th_device_packets) segs=$(th_tcp_segments)
      for run in forward reverse; do
        flag=()
        [ "$run" = reverse ] && flag=(-R)
        if [ "$TH_ROLE" = a ]; then iperf_server "$mode" "$run"; else iperf_client "$mode" "$run" "${flag[@]}"; fi
      done
      th_evidence "iperf3 ($mode, host $TH_ROLE)" "$pkts" "$segs"
      if [ "$mode" = libvsock ]; then
        # Per run: the control connection and the data stream.
        if [ "$TH_ROLE" = a ]; then expect_rdma "$TH_WORK/iperf-server-$mode.log" "iperf3 -s" 2
        else expect_rdma "$TH_WORK/iperf-client-$mode.log" "iperf3 -c" 2; fi
      fi
    done
    ;;
  *) ut_fail "unknown program $program" ;;
esac
[ "$TH_DEVICE_DELTA" -ge 1000 ] || ut_fail "host $TH_ROLE: rxe0 counted only $TH_DEVICE_DELTA packets under the library"
echo "PASS: two hosts, $program (host $TH_ROLE)"
