#!/usr/bin/env bash
# How much of a redis-benchmark run still goes on TCP (issue 10: the first
# requests of a connection must not wait on TCP for the upgrade):
# redis-server and `redis-benchmark -c 20 -n VSOCK_APP_REQUESTS (default
# 20000) -t set,get`, both under libvsock on the verbs device, then both
# without it. The TCP segments are the guest's own count (Tcp OutSegs in
# /proc/net/snmp: both ends run here) over each benchmark run; with the
# library what is left is each connection's handshake, its upgrade token
# and its close.
#
# Passes when every request was answered (the server counted every SET
# and GET), every connection upgraded, and the TCP segments of the libvsock
# run are at most 1% of the kernel run's. MEASURED line: segments and
# requests per second, both runs.
source "$(dirname "$0")/app_test_lib.sh"
app_require redis-server redis-cli redis-benchmark
app_init redis-segments-device
app_device_init
requests=${VSOCK_APP_REQUESTS:-20000}
clients=20
declare -A SEGS=() RPS=()

out_segments() { awk '$1 == "Tcp:" && $2 ~ /^[0-9]+$/ { print $12 }' /proc/net/snmp; }
[ "$(awk '$1 == "Tcp:" { print $12; exit }' /proc/net/snmp)" = OutSegs ] ||
  app_fail "/proc/net/snmp has no Tcp OutSegs in the 12th column"

for mode in libvsock kernel; do
  if [ "$mode" = libvsock ]; then app_library on; else app_library off; fi
  app_start_redis "redis-$mode"
  port=$APP_PORT server=$APP_PID
  out=$APP_WORK/bench-$mode.csv
  s0=$(out_segments)
  app_preloaded "$APP_WORK/bench-$mode.log" redis-benchmark -h "$APP_ADDR" -p "$port" -n "$requests" -c "$clients" \
    -t set,get --csv >"$out" || app_fail "redis-benchmark ($mode) failed"
  SEGS[$mode]=$(($(out_segments) - s0))
  RPS[$mode]=$(tr -d '"' <"$out" | awk -F, '$1 == "SET" || $1 == "GET" { printf "%s%s %s", sep, $1, $2; sep = ", " }')
  for t in set get; do
    calls=$(env -u LD_PRELOAD timeout 30 redis-cli -h "$APP_ADDR" -p "$port" INFO commandstats | tr -d '\r' |
      sed -n "s/^cmdstat_$t:calls=\([0-9]*\),.*/\1/p")
    [ "${calls:-0}" -eq "$requests" ] || app_fail "redis ($mode) counted ${calls:-no} $t calls, expected $requests"
  done
  app_log "redis-benchmark ($mode): ${RPS[$mode]} requests/s; ${SEGS[$mode]} TCP segments sent in the guest"
  app_stop_pid "$server" TERM 15
  [ "$APP_STOP_STATUS" -eq 0 ] || app_fail "redis-server ($mode) exited with status $APP_STOP_STATUS"
done

# Two tests (SET, GET) of $clients connections each.
app_stats "$APP_WORK/bench-libvsock.log" || app_fail "redis-benchmark: no stats line"
upgraded=${APP_STATS[upgrades_done]:-0}
app_log "redis-benchmark: upgrades_done=$upgraded tcp_bytes_sent=${APP_STATS[tcp_bytes_sent]:-0}" \
  "rdma_bytes_sent=${APP_STATS[rdma_bytes_sent]:-0}"
[ "$upgraded" -ge $((2 * clients)) ] || app_fail "redis-benchmark upgraded $upgraded of $((2 * clients)) connections"
permille=$((SEGS[libvsock] * 1000 / (SEGS[kernel] > 0 ? SEGS[kernel] : 1)))
echo "MEASURED redis-benchmark -c $clients -n $requests -t set,get: TCP segments kernel ${SEGS[kernel]}," \
  "libvsock ${SEGS[libvsock]} ($permille per mille, $((SEGS[libvsock] / (2 * clients))) per connection);" \
  "requests/s kernel ${RPS[kernel]}, libvsock ${RPS[libvsock]} on $APP_ADDR"
[ $((SEGS[libvsock] * 100)) -le "${SEGS[kernel]}" ] ||
  app_fail "${SEGS[libvsock]} TCP segments with the library: more than 1% of the kernel run's ${SEGS[kernel]}"
echo "PASS: redis-benchmark's requests go over RDMA from the first"
