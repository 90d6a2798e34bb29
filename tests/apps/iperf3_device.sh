#!/usr/bin/env bash
# iperf3 TCP over the verbs device, both ends under libvsock: one stream,
# two parallel streams (-P 2) and reverse (-R), each a one-off server (-1)
# and a client for VSOCK_APP_SECONDS (default 3) seconds on the device's
# address. ctest runs it in the Soft-RoCE VM through tests/rxe/with-device.sh
# and tests/upgrade/on_device_address.sh.
#
# Passes when, for every case, the client reports bytes received with the
# number of streams asked for, the server exits 0 after its one test, both
# processes print stats with every connection upgraded (control + data), and
# the sending process's rdma_bytes_sent and the receiving one's
# rdma_bytes_received cover at least 90% of what iperf3 counted. Then runs
# each case without the library and prints both figures as MEASURED lines.
source "$(dirname "$0")/app_test_lib.sh"
app_require iperf3 "$APP_PYTHON"
app_init iperf3-device
app_device_init
secs=${VSOCK_APP_SECONDS:-3}

# iperf3_case LABEL STREAMS CLIENT_ARGS...: one server + one client, with or
# without the library (app_library). Leaves the client's JSON in
# $APP_WORK/LABEL.json and its figures in SENT, RECEIVED (bytes), BPS
# (receiver's bits per second) and STREAMS.
iperf3_case() {
  local label=$1 streams=$2 server figures
  shift 2
  app_start_server "$label-server" tcp iperf3 --server --one-off --bind "$APP_ADDR" --port @PORT@
  server=$APP_PID
  app_preloaded "$APP_WORK/$label-client.log" iperf3 --client "$APP_ADDR" --port "$APP_PORT" --time "$secs" \
    --json "$@" >"$APP_WORK/$label.json" || app_fail "$label: iperf3 client failed"
  # No process substitution: the VM has no /dev/fd.
  figures=$("$APP_PYTHON" - "$APP_WORK/$label.json" <<'EOF'
import json, sys
end = json.load(open(sys.argv[1]))["end"]
print(int(end["sum_sent"]["bytes"]), int(end["sum_received"]["bytes"]),
      int(end["sum_received"]["bits_per_second"]), len(end["streams"]))
EOF
) || app_fail "$label: cannot read the iperf3 JSON result"
  read -r SENT RECEIVED BPS STREAMS <<<"$figures"
  app_log "$label: sent $SENT bytes, received $RECEIVED bytes over $STREAMS stream(s), $BPS bit/s"
  [ "$RECEIVED" -gt 0 ] || app_fail "$label: iperf3 transferred nothing"
  [ "$STREAMS" -eq "$streams" ] || app_fail "$label: $STREAMS streams, expected $streams"
  app_wait_exit "$server" 30 || app_fail "$label: iperf3 --one-off server did not exit after the test"
  [ "$APP_STOP_STATUS" -eq 0 ] || app_fail "$label: iperf3 server exited with status $APP_STOP_STATUS"
}

gbits() { awk -v b="$1" 'BEGIN { printf "%.3f Gbit/s", b / 1e9 }'; }

# LABEL STREAMS DIRECTION(forward: client sends, reverse: server sends) ARGS...
run() {
  local label=$1 streams=$2 direction=$3 sender receiver lib_bps
  shift 3
  app_library on
  iperf3_case "$label" "$streams" "$@"
  sender=$APP_WORK/$label-client.log receiver=$APP_WORK/$label-server.log
  [ "$direction" = reverse ] && sender=$APP_WORK/$label-server.log receiver=$APP_WORK/$label-client.log
  # Each process upgrades the control connection and every data stream.
  app_expect_rdma "$sender" "$label sender" $((streams + 1)) sent $((SENT / 10 * 9))
  app_expect_rdma "$receiver" "$label receiver" $((streams + 1)) received $((RECEIVED / 10 * 9))
  lib_bps=$BPS

  app_library off
  iperf3_case "$label-kernel" "$streams" "$@"
  echo "MEASURED iperf3 tcp $label (${secs} s, $streams stream(s), $direction): kernel $(gbits "$BPS")," \
    "libvsock $(gbits "$lib_bps") on $APP_ADDR"
}

run one 1 forward
run parallel2 2 forward --parallel 2
run reverse 1 reverse --reverse
echo "PASS: iperf3 tcp over the device"
