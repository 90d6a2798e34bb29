#!/usr/bin/env bash
# sockperf server + a 2-second ping-pong client, both under libvsock.
# Usage: sockperf.sh tcp|udp. Passes when the client prints its latency
# summary after receiving replies, and the server stops cleanly on SIGINT.
source "$(dirname "$0")/app_test_lib.sh"
proto=${1:-tcp}
case "$proto" in tcp | udp) ;; *) app_fail "usage: $0 tcp|udp" ;; esac
app_require sockperf
app_init "sockperf-$proto"

tcp_flag=()
[ "$proto" = tcp ] && tcp_flag=(--tcp)
app_start_server sockperf-server "$proto" sockperf server "${tcp_flag[@]}" -i "$APP_ADDR" -p @PORT@
port=$APP_PORT
server=$APP_PID

app_preloaded "$APP_WORK/client.log" sockperf ping-pong "${tcp_flag[@]}" -i "$APP_ADDR" -p "$port" \
  -t 2 --msg-size 64 >"$APP_WORK/client.out" || app_fail "sockperf ping-pong failed"
grep -E 'Summary: Latency|percentile 50.000|percentile 99.000' "$APP_WORK/client.out"
grep -q 'Summary: Latency is [0-9.]* usec' "$APP_WORK/client.out" || app_fail "sockperf printed no latency summary"
received=$(sed -n 's/.*\[Valid Duration\].*ReceivedMessages=\([0-9]*\).*/\1/p' "$APP_WORK/client.out")
[ "${received:-0}" -gt 0 ] || app_fail "sockperf received no replies"
app_log "sockperf $proto: $received replies"

# sockperf's server ends its loop cleanly on SIGINT.
app_stop_pid "$server" INT 10
[ "$APP_STOP_STATUS" -eq 0 ] || app_fail "sockperf server exited with status $APP_STOP_STATUS"

counter=${proto}_sockets
app_expect_loaded "$APP_WORK/sockperf-server.log" "sockperf server" "$counter"
app_expect_loaded "$APP_WORK/client.log" "sockperf client" "$counter"
echo "PASS: sockperf $proto"
