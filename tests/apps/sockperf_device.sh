#!/usr/bin/env bash
# sockperf TCP over the verbs device, both ends under libvsock: a server,
# then `ping-pong --tcp` at 64, 1024 and 16384 bytes and `throughput --tcp`
# at 64 and 16384 bytes, each for VSOCK_APP_SECONDS (default 2) seconds on
# the device's address. ctest runs it in the Soft-RoCE VM through
# tests/rxe/with-device.sh and tests/upgrade/on_device_address.sh.
#
# Passes when every client reports its result (latency and replies for
# ping-pong, messages sent for throughput), each client process upgraded its
# connection and sent (and for ping-pong received) at least 90% of its
# messages' bytes over RDMA, and the server stops cleanly on SIGINT having
# upgraded every connection and received over RDMA at least 90% of what the
# clients sent.
#
# A second server runs without the library; each client run is followed by
# the same run against it without the library (interleaved: this test bed's
# speed wanders), and both figures (latency p50/p99/avg, message rate) are
# printed as MEASURED lines. The servers and the ping-pong clients run on CPU
# VSOCK_APP_LAT_CPU (default 0; empty: anywhere): under TCG a wake-up across
# vCPUs costs 0.2-3 ms at random (see docs/performance.md), which would
# drown both columns.
source "$(dirname "$0")/app_test_lib.sh"
app_require sockperf
lat_cpu=${VSOCK_APP_LAT_CPU-0}
pin=()
[ -n "$lat_cpu" ] && app_require taskset && pin=(taskset -c "$lat_cpu")
app_init sockperf-device
app_device_init
secs=${VSOCK_APP_SECONDS:-2}
pingpong_sizes=(64 1024 16384)
throughput_sizes=(64 16384)
declare -A FIG=() PORT=() SERVER=()
CLIENT_BYTES=0

lib_of() { if [ "$1" = libvsock ]; then echo on; else echo off; fi; }

# field FILE SED_EXPR: the first match of a sockperf output line.
field() { sed -n "$2" "$1" | head -n1; }

# pingpong MODE SIZE: one ping-pong client; FIG[MODE:pp:SIZE] = "p50 p99 avg".
pingpong() {
  local mode=$1 size=$2 out log avg p50 p99 sent received
  out=$APP_WORK/pp-$size-$mode.out log=$APP_WORK/pp-$size-$mode.log
  app_library "$(lib_of "$mode")"
  app_preloaded "$log" "${pin[@]}" sockperf ping-pong --tcp -i "$APP_ADDR" -p "${PORT[$mode]}" -t "$secs" \
    --msg-size "$size" \
    >"$out" || app_fail "sockperf ping-pong --msg-size $size ($mode) failed"
  avg=$(field "$out" 's/.*Summary: Latency is \([0-9.]*\) usec.*/\1/p')
  p50=$(field "$out" 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p')
  p99=$(field "$out" 's/.*percentile 99.000 = *\([0-9.]*\).*/\1/p')
  sent=$(field "$out" 's/.*\[Total Run\].*SentMessages=\([0-9]*\).*/\1/p')
  received=$(field "$out" 's/.*\[Total Run\].*ReceivedMessages=\([0-9]*\).*/\1/p')
  [ -n "$avg" ] && [ -n "$p50" ] && [ -n "$p99" ] || app_fail "ping-pong $size ($mode): no latency summary"
  [ "${received:-0}" -gt 0 ] || app_fail "ping-pong $size ($mode): no replies"
  app_log "ping-pong $size B ($mode): $received replies, latency avg $avg p50 $p50 p99 $p99 usec"
  FIG[$mode:pp:$size]="$p50 $p99 $avg"
  if [ "$mode" = libvsock ]; then
    app_expect_rdma "$log" "ping-pong $size client" 1 sent $((sent * size / 10 * 9))
    app_expect_rdma "$log" "ping-pong $size client" 1 received $((received * size / 10 * 9))
    CLIENT_BYTES=$((CLIENT_BYTES + APP_STATS[rdma_bytes_sent]))
  fi
}

# throughput MODE SIZE: one throughput client; FIG[MODE:tp:SIZE] = "msg/s MBps".
throughput() {
  local mode=$1 size=$2 out log rate mbps sent
  out=$APP_WORK/tp-$size-$mode.out log=$APP_WORK/tp-$size-$mode.log
  app_library "$(lib_of "$mode")"
  app_preloaded "$log" sockperf throughput --tcp -i "$APP_ADDR" -p "${PORT[$mode]}" -t "$secs" --msg-size "$size" \
    >"$out" || app_fail "sockperf throughput --msg-size $size ($mode) failed"
  rate=$(field "$out" 's/.*Summary: Message Rate is \([0-9.]*\) \[msg\/sec\].*/\1/p')
  mbps=$(field "$out" 's/.*Summary: BandWidth is \([0-9.]*\) MBps.*/\1/p')
  sent=$(field "$out" 's/.*Total of \([0-9]*\) messages sent.*/\1/p')
  [ -n "$rate" ] && [ -n "$mbps" ] || app_fail "throughput $size ($mode): no summary"
  [ "${sent:-0}" -gt 0 ] || app_fail "throughput $size ($mode): no message sent"
  app_log "throughput $size B ($mode): $sent messages, $rate msg/s, $mbps MBps"
  FIG[$mode:tp:$size]="$rate $mbps"
  if [ "$mode" = libvsock ]; then
    app_expect_rdma "$log" "throughput $size client" 1 sent $((sent * size / 10 * 9))
    CLIENT_BYTES=$((CLIENT_BYTES + APP_STATS[rdma_bytes_sent]))
  fi
}

for mode in libvsock kernel; do
  app_library "$(lib_of "$mode")"
  app_start_server "server-$mode" tcp "${pin[@]}" sockperf server --tcp -i "$APP_ADDR" -p @PORT@
  PORT[$mode]=$APP_PORT SERVER[$mode]=$APP_PID
done
for size in "${pingpong_sizes[@]}"; do
  for mode in libvsock kernel; do pingpong "$mode" "$size"; done
done
for size in "${throughput_sizes[@]}"; do
  for mode in libvsock kernel; do throughput "$mode" "$size"; done
done
for mode in libvsock kernel; do
  # sockperf's server ends its loop cleanly on SIGINT.
  app_stop_pid "${SERVER[$mode]}" INT 15
  [ "$APP_STOP_STATUS" -eq 0 ] || app_fail "sockperf server ($mode) exited with status $APP_STOP_STATUS"
  total=$(sed -n 's/.*Total \([0-9]*\) messages received and handled.*/\1/p' "$APP_WORK/server-$mode.log")
  [ "${total:-0}" -gt 0 ] || app_fail "sockperf server ($mode): no messages handled"
  app_log "sockperf server ($mode): $total messages received and handled"
done
app_expect_rdma "$APP_WORK/server-libvsock.log" "sockperf server" \
  $((${#pingpong_sizes[@]} + ${#throughput_sizes[@]})) received $((CLIENT_BYTES / 10 * 9))

pinned=""
[ -n "$lat_cpu" ] && pinned=", both ends on CPU $lat_cpu"
for size in "${pingpong_sizes[@]}"; do
  read -r k50 k99 kavg <<<"${FIG[kernel:pp:$size]}"
  read -r l50 l99 lavg <<<"${FIG[libvsock:pp:$size]}"
  echo "MEASURED sockperf ping-pong --tcp --msg-size $size (${secs} s$pinned): latency usec p50/p99/avg" \
    "kernel $k50/$k99/$kavg, libvsock $l50/$l99/$lavg on $APP_ADDR"
done
for size in "${throughput_sizes[@]}"; do
  read -r krate kmb <<<"${FIG[kernel:tp:$size]}"
  read -r lrate lmb <<<"${FIG[libvsock:tp:$size]}"
  echo "MEASURED sockperf throughput --tcp --msg-size $size (${secs} s${lat_cpu:+, server on CPU $lat_cpu}): kernel $krate msg/s $kmb MBps," \
    "libvsock $lrate msg/s $lmb MBps on $APP_ADDR"
done
echo "PASS: sockperf tcp over the device"
