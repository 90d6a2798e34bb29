#!/usr/bin/env bash
# redis-server + redis-benchmark over the verbs device, both ends under
# libvsock, while the device's port goes down for 3 s and up again in the
# middle of the run (docs/protocol.md §5.1): 20 clients SET pipelined
# (-P 16), VSOCK_APP_REQUESTS (default 200000) requests. The connections
# were on RDMA when the port went down; they go on over TCP.
#
# Passes when the benchmark prints its SET result, the server counted
# exactly the SET calls sent (INFO commandstats: not one lost or doubled),
# both processes upgraded every connection, resumed them on TCP
# (stream_resumes) and reset none, and the server exits 0 on SIGTERM.
source "$(dirname "$0")/app_test_lib.sh"
app_require redis-server redis-cli redis-benchmark rdma ip
app_init redis-link-flap-device
app_device_init
requests=${VSOCK_APP_REQUESTS:-200000}
clients=20
read -r dev netdev <<<"$(rdma link show | sed -n 's/^link \([^/]*\)\/[0-9]* .* netdev \([^ ]*\).*/\1 \2/p' | head -n1)"
[ -n "$netdev" ] || app_fail "no rdma link: $(rdma link show)"
# The port comes back up whatever happens (app_on_exit stops the servers).
trap 'status=$?; ip link set "$netdev" up 2>/dev/null; (exit $status); app_on_exit' EXIT
counter=/sys/class/infiniband/$dev/ports/1/hw_counters/rcvd_pkts

info() {  # info PORT SECTION FIELD, without the library
  env -u LD_PRELOAD timeout 30 redis-cli -h "$APP_ADDR" -p "$1" INFO "$2" | tr -d '\r' |
    sed -n "s/^$3:\(.*\)$/\1/p"
}

app_library on
app_start_redis redis-libvsock
port=$APP_PORT server=$APP_PID
before=$(cat "$counter")
out=$APP_WORK/bench.csv
VSOCK_APP_CLIENT_TIMEOUT=400 app_preloaded "$APP_WORK/bench.log" redis-benchmark -h "$APP_ADDR" -p "$port" \
  -n "$requests" -c "$clients" -P 16 -t set --csv >"$out" &
bench=$!
for ((i = 0; i < 600; i++)); do
  [ $(($(cat "$counter") - before)) -ge 5000 ] && break
  app_is_running "$bench" || break
  sleep 0.1
done
app_is_running "$bench" || app_fail "redis-benchmark ended before the port could go down"
app_log "$(($(cat "$counter") - before)) packets over $dev: $netdev down for 3 s"
ip link set "$netdev" down
sleep 3
ip link set "$netdev" up
app_log "$netdev up again"
wait "$bench" || app_fail "redis-benchmark failed (status $?)"
line=$(tr -d '"' <"$out" | awk -F, '$1 == "SET" { print $2, $5 }')
[ -n "$line" ] || app_fail "redis-benchmark printed no SET result"
app_log "SET: $requests requests, rps p50_ms = $line"
calls=$(info "$port" commandstats cmdstat_set | sed -n 's/^calls=\([0-9]*\),.*/\1/p')
[ "${calls:-0}" -eq "$requests" ] || app_fail "redis counted ${calls:-no} SET calls, expected $requests"
app_log "redis counted $requests SET calls: none lost or doubled"
app_stop_pid "$server" TERM 15
[ "$APP_STOP_STATUS" -eq 0 ] || app_fail "redis-server exited with status $APP_STOP_STATUS"
for side in "redis-libvsock:redis-server" "bench:redis-benchmark"; do
  log=$APP_WORK/${side%%:*}.log what=${side#*:}
  app_stats "$log" || app_fail "$what: no stats line"
  app_log "$what: upgrades_done=${APP_STATS[upgrades_done]:-0} stream_resumes=${APP_STATS[stream_resumes]:-0}" \
    "upgrade_resets=${APP_STATS[upgrade_resets]:-0} rdma_bytes_received=${APP_STATS[rdma_bytes_received]:-0}" \
    "tcp_bytes_received=${APP_STATS[tcp_bytes_received]:-0}"
  [ "${APP_STATS[upgrades_done]:-0}" -ge "$clients" ] || app_fail "$what: not every connection upgraded"
  [ "${APP_STATS[stream_resumes]:-0}" -ge 1 ] || app_fail "$what: no connection resumed on TCP"
  [ "${APP_STATS[upgrade_resets]:-0}" -eq 0 ] || app_fail "$what: a connection was reset"
done
app_log "PASS: redis over a port that went down and up"
