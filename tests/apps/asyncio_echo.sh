#!/usr/bin/env bash
# A Python asyncio echo server and client (asyncio_echo.py) under libvsock:
# 1000 TCP messages over 4 concurrent connections plus 100 UDP datagrams,
# every echo compared byte for byte.
source "$(dirname "$0")/app_test_lib.sh"
app_require "$APP_PYTHON"
app_init asyncio
script="$(cd "$(dirname "$0")" && pwd)/asyncio_echo.py"
messages=1000

# The server picks its own port and prints "READY <port>".
log="$APP_WORK/asyncio-server.log"
timeout -k 5 "${VSOCK_APP_SERVER_TIMEOUT:-300}" \
  env LD_PRELOAD="$VSOCK_PRELOAD" VSOCK_STATS=1 VSOCK_LOG_LEVEL=info \
  "$APP_PYTHON" -u "$script" server "$APP_ADDR" >"$log" 2>&1 </dev/null &
server=$!
APP_SERVER_PIDS+=("$server")
port=""
for ((i = 0; i < 150; i++)); do
  port=$(sed -n 's/^READY \([0-9][0-9]*\)$/\1/p' "$log")
  [ -n "$port" ] && break
  app_is_running "$server" || break
  sleep 0.1
done
[ -n "$port" ] || app_fail "asyncio server did not print READY within 15 s"
app_log "asyncio server ready on $APP_ADDR:$port"

app_preloaded "$APP_WORK/asyncio-client.log" "$APP_PYTHON" "$script" client "$APP_ADDR" "$port" "$messages" ||
  app_fail "asyncio client failed"

# The server stops its loop on SIGTERM and exits 0.
app_stop_pid "$server" TERM 10
[ "$APP_STOP_STATUS" -eq 0 ] || app_fail "asyncio server exited with status $APP_STOP_STATUS"

for side in server client; do
  app_expect_loaded "$APP_WORK/asyncio-$side.log" "asyncio $side" tcp_sockets
  app_expect_loaded "$APP_WORK/asyncio-$side.log" "asyncio $side" udp_sockets
done
echo "PASS: asyncio echo"
