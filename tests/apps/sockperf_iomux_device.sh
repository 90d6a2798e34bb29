#!/usr/bin/env bash
# sockperf's TCP server waiting in each of select(), poll() and epoll_wait()
# (-F s, -F p, -F e; sockperf takes -F only with a feed file, -f) over the
# verbs device, both ends under libvsock: for each, a server and a
# `ping-pong --tcp` client of 64-byte messages for VSOCK_APP_SECONDS
# (default 2) seconds on the device's address. ctest runs it in the
# Soft-RoCE VM through tests/rxe/with-device.sh and
# tests/upgrade/on_device_address.sh.
#
# Passes when every client reports its latency and replies, upgraded its
# connection and sent and received at least 90% of its messages' bytes over
# RDMA, and every server says it used the wait call asked for, stops cleanly
# on SIGINT, upgraded its connection and received over RDMA at least 90% of
# what its client sent. Each client run is followed by the same against a
# server without the library; both latencies are printed as MEASURED lines.
# Servers and clients run on CPU VSOCK_APP_LAT_CPU (default 0; empty:
# anywhere), as in sockperf_device.sh: a wake-up across vCPUs under TCG costs
# 0.2-3 ms at random.
source "$(dirname "$0")/app_test_lib.sh"
app_require sockperf
lat_cpu=${VSOCK_APP_LAT_CPU-0}
pin=()
[ -n "$lat_cpu" ] && app_require taskset && pin=(taskset -c "$lat_cpu")
app_init sockperf-iomux-device
app_device_init
secs=${VSOCK_APP_SECONDS:-2}
size=64
declare -A FIG=() CALL=([s]="select()" [p]="poll()" [e]="epoll()")

lib_of() { if [ "$1" = libvsock ]; then echo on; else echo off; fi; }

# field FILE SED_EXPR: the first match of a sockperf output line.
field() { sed -n "$2" "$1" | head -n1; }

# server IOMUX MODE: starts a server waiting with IOMUX; sets APP_PORT, APP_PID.
server() {
  local iomux=$1 mode=$2
  app_library "$(lib_of "$mode")"
  # The feed file names the port, which app_start_server picks: bash writes
  # it, then becomes the server.
  app_start_server "server-$iomux-$mode" tcp "${pin[@]}" bash -c 'echo "T:$1:$2" >"$3" && exec sockperf server -f "$3" -F "$4"' \
    feed "$APP_ADDR" @PORT@ "$APP_WORK/feed-$iomux-$mode" "$iomux"
}

# pingpong IOMUX MODE PORT: one client; FIG[IOMUX:MODE] = "p50 p99 avg".
pingpong() {
  local iomux=$1 mode=$2 port=$3 out log avg p50 p99 sent received
  out=$APP_WORK/pp-$iomux-$mode.out log=$APP_WORK/pp-$iomux-$mode.log
  app_library "$(lib_of "$mode")"
  app_preloaded "$log" "${pin[@]}" sockperf ping-pong --tcp -i "$APP_ADDR" -p "$port" -t "$secs" --msg-size "$size" \
    >"$out" || app_fail "sockperf ping-pong against -F $iomux ($mode) failed"
  avg=$(field "$out" 's/.*Summary: Latency is \([0-9.]*\) usec.*/\1/p')
  p50=$(field "$out" 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p')
  p99=$(field "$out" 's/.*percentile 99.000 = *\([0-9.]*\).*/\1/p')
  sent=$(field "$out" 's/.*\[Total Run\].*SentMessages=\([0-9]*\).*/\1/p')
  received=$(field "$out" 's/.*\[Total Run\].*ReceivedMessages=\([0-9]*\).*/\1/p')
  [ -n "$avg" ] && [ -n "$p50" ] && [ -n "$p99" ] || app_fail "ping-pong against -F $iomux ($mode): no latency summary"
  [ "${received:-0}" -gt 0 ] || app_fail "ping-pong against -F $iomux ($mode): no replies"
  app_log "ping-pong against -F $iomux ($mode): $received replies, latency avg $avg p50 $p50 p99 $p99 usec"
  FIG[$iomux:$mode]="$p50 $p99 $avg"
  if [ "$mode" = libvsock ]; then
    app_expect_rdma "$log" "ping-pong client (-F $iomux)" 1 sent $((sent * size / 10 * 9))
    app_expect_rdma "$log" "ping-pong client (-F $iomux)" 1 received $((received * size / 10 * 9))
    CLIENT_BYTES=${APP_STATS[rdma_bytes_sent]}
  fi
}

# stop IOMUX MODE PID: sockperf's server ends its loop cleanly on SIGINT.
stop() {
  local iomux=$1 mode=$2 pid=$3 log=$APP_WORK/server-$1-$2.log total
  app_stop_pid "$pid" INT 15
  [ "$APP_STOP_STATUS" -eq 0 ] || app_fail "sockperf server -F $iomux ($mode) exited with status $APP_STOP_STATUS"
  grep -q "using ${CALL[$iomux]} to block" "$log" || app_fail "sockperf server -F $iomux ($mode) did not use ${CALL[$iomux]}"
  total=$(sed -n 's/.*Total \([0-9]*\) messages received and handled.*/\1/p' "$log")
  [ "${total:-0}" -gt 0 ] || app_fail "sockperf server -F $iomux ($mode): no messages handled"
  app_log "sockperf server -F $iomux ($mode): ${CALL[$iomux]}, $total messages received and handled"
}

for iomux in s p e; do
  for mode in libvsock kernel; do
    server "$iomux" "$mode"
    port=$APP_PORT pid=$APP_PID
    pingpong "$iomux" "$mode" "$port"
    stop "$iomux" "$mode" "$pid"
    if [ "$mode" = libvsock ]; then
      app_expect_rdma "$APP_WORK/server-$iomux-$mode.log" "sockperf server -F $iomux" 1 received \
        $((CLIENT_BYTES / 10 * 9))
    fi
  done
done

pinned=""
[ -n "$lat_cpu" ] && pinned=", both ends on CPU $lat_cpu"
for iomux in s p e; do
  read -r k50 k99 kavg <<<"${FIG[$iomux:kernel]}"
  read -r l50 l99 lavg <<<"${FIG[$iomux:libvsock]}"
  echo "MEASURED sockperf ping-pong --tcp --msg-size $size against server -F $iomux (${CALL[$iomux]}, ${secs} s$pinned):" \
    "latency usec p50/p99/avg kernel $k50/$k99/$kavg, libvsock $l50/$l99/$lavg on $APP_ADDR"
done
echo "PASS: sockperf server in select, poll and epoll over the device"
