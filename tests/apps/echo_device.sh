#!/usr/bin/env bash
# echo_device.sh asyncio|node|forking: an echo server and client over the
# verbs device, both ends under libvsock: Python asyncio (asyncio_echo.py)
# or Node.js `net` on libuv (node_echo.js), both waiting in epoll, or
# Python's socketserver.ForkingTCPServer (forking_echo.py: the parent
# accepts, a forked child serves each connection; the client is asyncio's).
# VSOCK_APP_REQUESTS (default 1000) messages of 1 B-20 KiB over
# VSOCK_APP_CONNECTIONS (default 50) concurrent TCP connections, one round
# trip at a time on each, every echo compared byte for byte (asyncio then
# also echoes a tenth as many UDP datagrams, checked the same way; they go
# over UD once the client's side band has resolved the server's port). ctest runs it in the Soft-RoCE VM through
# tests/rxe/with-device.sh and tests/upgrade/on_device_address.sh.
#
# Passes when the client matched every echo, the server exits 0 on SIGTERM,
# and both upgraded every TCP connection and moved at least 90% of the
# echoed bytes over RDMA, both ways. Then the same without the library; both
# figures (echo time, MB/s) are printed as MEASURED lines.
source "$(dirname "$0")/app_test_lib.sh"
here="$(cd "$(dirname "$0")" && pwd)"
case ${1:-} in
  asyncio) app_require "$APP_PYTHON"; prog=("$APP_PYTHON" -u "$here/asyncio_echo.py") ;;
  node) app_require node; prog=(node "$here/node_echo.js") ;;
  forking) app_require "$APP_PYTHON"; prog=("$APP_PYTHON" -u "$here/forking_echo.py")
    client=("$APP_PYTHON" -u "$here/asyncio_echo.py") ;;
  *) app_fail "usage: echo_device.sh asyncio|node|forking" ;;
esac
[ -n "${client+set}" ] || client=("${prog[@]}")
kind=$1
app_init "$kind-device"
app_device_init
messages=${VSOCK_APP_REQUESTS:-1000}
connections=${VSOCK_APP_CONNECTIONS:-50}
# A forking server starts a process per connection, whose library opens the
# device and its rendezvous listener before it can upgrade (~0.1-0.2 s
# under TCG): 10 longer connections, so that most bytes come after that.
[ "$kind" = forking ] && connections=${VSOCK_APP_CONNECTIONS:-10}
declare -A FIG=()

# echo_run MODE: one server and one client; FIG[MODE] = "seconds MB/s";
# BYTES = the TCP bytes echoed.
echo_run() {
  local mode=$1 log server port i out secs
  log=$APP_WORK/server-$mode.log out=$APP_WORK/client-$mode.out
  # The server picks its own port and prints "READY <port>".
  timeout -k 5 "${VSOCK_APP_SERVER_TIMEOUT:-300}" "${APP_ENV[@]}" \
    "${prog[@]}" server "$APP_ADDR" >"$log" 2>&1 </dev/null &
  server=$!
  APP_SERVER_PIDS+=("$server")
  port=""
  for ((i = 0; i < 300; i++)); do
    port=$(sed -n 's/^READY \([0-9][0-9]*\)$/\1/p' "$log")
    [ -n "$port" ] && break
    app_is_running "$server" || break
    sleep 0.1
  done
  [ -n "$port" ] || app_fail "$kind server ($mode) did not print READY within 30 s"
  app_log "$kind server ($mode) ready on $APP_ADDR:$port"
  app_preloaded "$APP_WORK/client-$mode.log" "${client[@]}" client "$APP_ADDR" "$port" "$messages" \
    "$connections" >"$out" || app_fail "$kind client ($mode) failed: $(tr '\n' ' ' <"$out")"
  grep -qx "tcp messages echoed: $messages/$messages over $connections connections" "$out" ||
    app_fail "$kind client ($mode): $(tr '\n' ' ' <"$out")"
  # "tcp bytes echoed: N in S s"
  read -r BYTES secs <<<"$(sed -n 's/^tcp bytes echoed: \([0-9]*\) in \([0-9.]*\) s$/\1 \2/p' "$out")"
  [ "${BYTES:-0}" -gt 0 ] || app_fail "$kind client ($mode): no byte count"
  FIG[$mode]="$secs $(awk -v b="$BYTES" -v s="$secs" 'BEGIN { printf "%.2f", (s > 0 ? b / s / 1e6 : 0) }')"
  app_log "$kind client ($mode): $(tr '\n' ';' <"$out")"
  # The server stops its loop on SIGTERM and exits 0.
  app_stop_pid "$server" TERM 15
  [ "$APP_STOP_STATUS" -eq 0 ] || app_fail "$kind server ($mode) exited with status $APP_STOP_STATUS"
}

app_library on
echo_run libvsock
sides=(server client)
# ForkingTCPServer's children leave with os._exit(): no stats line from
# them. The client's counters suffice: it switches only with a server that
# switched too, and counts what it sent and received over the ring.
[ "$kind" = forking ] && sides=(client)
for side in "${sides[@]}"; do
  app_expect_rdma "$APP_WORK/$side-libvsock.log" "$kind $side" "$connections" sent $((BYTES / 10 * 9))
  app_expect_rdma "$APP_WORK/$side-libvsock.log" "$kind $side" "$connections" received $((BYTES / 10 * 9))
done
app_library off
echo_run kernel

read -r ksecs kmb <<<"${FIG[kernel]}"
read -r lsecs lmb <<<"${FIG[libvsock]}"
echo "MEASURED $kind echo, $messages messages (1 B-20 KiB, $BYTES bytes each way) over $connections connections:" \
  "kernel $ksecs s ($kmb MB/s), libvsock $lsecs s ($lmb MB/s) on $APP_ADDR"
echo "PASS: $kind echo over the device"
