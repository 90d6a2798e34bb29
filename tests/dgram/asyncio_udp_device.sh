#!/usr/bin/env bash
# A Python asyncio DatagramProtocol echo server over UD (DESIGN decision 5)
# with many clients: asyncio_udp_echo.py's server on the device's address,
# and one client process running VSOCK_ASYNCIO_SOCKETS (default 50) sockets
# at once, each sending VSOCK_ASYNCIO_COUNT (default 20) datagrams of 1 B to
# 60,000 B (up to 61 fragments over UD) and checking each echo byte for
# byte. First without the library, then both preloaded.
#
# Passes when every echo comes back right in both runs (a datagram lost on
# the way is sent again after 3 s, at most 3 tries, as a UDP application
# would: the retries are printed), and with the library the client sent and
# received at least 9 in 10 of its datagrams over UD, and so did the
# server; the device carried them (at least one packet per fragment).
# Prints MEASURED lines (time, retries, datagrams over UD / kernel, rxe
# packets).
source "$(dirname "$0")/dgram_app_lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
app_require "$APP_PYTHON"
app_init asyncio-udp
dg_device_init
sockets=${VSOCK_ASYNCIO_SOCKETS:-50}
count=${VSOCK_ASYNCIO_COUNT:-20}
total=$((sockets * count))

declare -A secs=() tx=() out=() echoed=()
for lib in off on; do
  app_library "$lib"
  app_start_server "server-$lib" udp "$APP_PYTHON" "$here/asyncio_udp_echo.py" server "$APP_ADDR" @PORT@
  server=$APP_PID
  read -r r0 _ <<<"$(dg_rxe)"
  t0=$(dg_now)
  out[$lib]=$(app_preloaded "$APP_WORK/client-$lib.log" "$APP_PYTHON" "$here/asyncio_udp_echo.py" client \
    "$APP_ADDR" "$APP_PORT" "$sockets" "$count") ||
    app_fail "asyncio ($lib): the client failed: ${out[$lib]:-} $(tail -2 "$APP_WORK/client-$lib.log")"
  secs[$lib]=$(dg_secs "$t0" "$(dg_now)")
  read -r r1 _ <<<"$(dg_rxe)"
  tx[$lib]=$((r1 - r0))
  app_stop_pid "$server" TERM 15
  [ "$APP_STOP_STATUS" -eq 0 ] || app_fail "asyncio server ($lib) exited with status $APP_STOP_STATUS"
  echoed[$lib]=$(sed -n 's/^echoed \([0-9]*\) datagrams$/\1/p' "$APP_WORK/server-$lib.log")
  app_log "asyncio (library $lib): ${out[$lib]}; server echoed ${echoed[$lib]:-?}; device sent ${tx[$lib]} packets"
  [ "${echoed[$lib]:-0}" -ge "$total" ] || app_fail "asyncio ($lib): the server echoed ${echoed[$lib]:-no} datagrams of $total"
done

dg_expect_ud "$APP_WORK/client-on.log" "client" $((total * 9 / 10)) $((total * 9 / 10))
c_ud=$UD_SENDS c_k=$K_SENDS c_udr=$UD_RECVS c_kr=$K_RECVS
dg_expect_ud "$APP_WORK/server-on.log" "server" $((total * 9 / 10)) $((total * 9 / 10))
[ "${tx[on]}" -ge $((total * 2)) ] || app_fail "the device sent ${tx[on]} packets for $total echoes"
echo "MEASURED asyncio echo ($sockets sockets x $count datagrams, 1..60000 B): kernel ${secs[off]} s (${out[off]}), rxe ${tx[off]} pkts |" \
  "libvsock ${secs[on]} s (${out[on]}); client UD $c_ud / kernel $c_k sends, UD $c_udr / kernel $c_kr receives;" \
  "server UD $UD_SENDS / kernel $K_SENDS sends, UD $UD_RECVS / kernel $K_RECVS receives; rxe ${tx[on]} pkts"
echo "PASS: asyncio echo with $sockets client sockets, every echo right, with and without the library"
