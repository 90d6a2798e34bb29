#!/usr/bin/env bash
# iperf3 one-off server (-1) + a 2-second client, both under libvsock.
# Usage: iperf3.sh tcp|udp. Passes when the client reports a non-zero
# transfer and the server exits 0 after its one test.
source "$(dirname "$0")/app_test_lib.sh"
proto=${1:-tcp}
case "$proto" in tcp | udp) ;; *) app_fail "usage: $0 tcp|udp" ;; esac
app_require iperf3 "$APP_PYTHON"
app_init "iperf3-$proto"

app_start_server iperf3-server tcp iperf3 --server --one-off --bind "$APP_ADDR" --port @PORT@
port=$APP_PORT
server=$APP_PID

udp_args=()
[ "$proto" = udp ] && udp_args=(--udp --bitrate 200M --length 1400)
app_preloaded "$APP_WORK/client.log" iperf3 --client "$APP_ADDR" --port "$port" --time 2 --json "${udp_args[@]}" \
  >"$APP_WORK/client.json" || app_fail "iperf3 client failed"

# Bytes the receiving side counted (TCP) or the datagram summary (UDP).
bytes=$("$APP_PYTHON" - "$APP_WORK/client.json" "$proto" <<'EOF'
import json, sys
end = json.load(open(sys.argv[1]))["end"]
summary = end["sum_received"] if sys.argv[2] == "tcp" else end["sum"]
print(int(summary["bytes"]))
EOF
) || app_fail "cannot read the iperf3 JSON result"
app_log "iperf3 $proto client reports $bytes bytes received"
[ "$bytes" -gt 0 ] || app_fail "iperf3 $proto transferred nothing"

app_wait_exit "$server" 15 || app_fail "iperf3 --one-off server did not exit after the test"
[ "$APP_STOP_STATUS" -eq 0 ] || app_fail "iperf3 server exited with status $APP_STOP_STATUS"

for log in iperf3-server client; do
  app_expect_loaded "$APP_WORK/$log.log" "iperf3 $log" tcp_sockets  # the control connection
  [ "$proto" = udp ] && app_expect_loaded "$APP_WORK/$log.log" "iperf3 $log" udp_sockets
done
echo "PASS: iperf3 $proto"
