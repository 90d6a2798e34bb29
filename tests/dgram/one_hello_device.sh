#!/usr/bin/env bash
# The path back to a socket that sent one datagram through the kernel while
# its destination was being resolved, and then only receives (iperf3
# --bidir's receiving stream; docs/protocol.md §6, ANNOUNCE): one_hello.py's
# client sends one "hello" from a never-bound socket, which goes through the
# kernel (its first datagram starts the resolution), and the server answers
# with VSOCK_HELLO_COUNT (default 500) datagrams, one every 2 ms. The
# client's ephemeral port answers no resolution, so without the ANNOUNCE
# the server's answers would all stay on the kernel (its resolution of
# that port fails). First without the library, then both preloaded.
#
# Passes when the client gets at least 9 in 10 answers in both runs and,
# with the library, sent its one datagram through the kernel and none over
# UD, announced itself (udp_announces_sent >= 1), the server learnt from it
# (udp_announces_received >= 1), and at least half of the answers came over
# UD (udp_ud_receives of the client). Prints a MEASURED line.
source "$(dirname "$0")/dgram_app_lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
app_require "$APP_PYTHON"
app_init one-hello
dg_device_init
count=${VSOCK_HELLO_COUNT:-500}

declare -A got=()
for lib in off on; do
  app_library "$lib"
  app_start_server "server-$lib" udp "$APP_PYTHON" "$here/one_hello.py" server "$APP_ADDR" @PORT@ "$count"
  server=$APP_PID
  out=$(app_preloaded "$APP_WORK/client-$lib.log" "$APP_PYTHON" "$here/one_hello.py" client "$APP_ADDR" \
    "$APP_PORT") || app_fail "one hello ($lib): the client failed: $out $(tail -2 "$APP_WORK/client-$lib.log")"
  app_wait_exit "$server" 30 || app_fail "one hello ($lib): the server did not exit after its answers"
  [ "$APP_STOP_STATUS" -eq 0 ] || app_fail "one hello ($lib): the server exited with status $APP_STOP_STATUS"
  got[$lib]=$(sed -n 's/^received \([0-9]*\)$/\1/p' <<<"$out")
  app_log "one hello (library $lib): the client received ${got[$lib]:-?} of $count answers"
  [ "${got[$lib]:-0}" -ge $((count * 9 / 10)) ] ||
    app_fail "one hello ($lib): the client received ${got[$lib]:-no} answers of $count"
done

dg_udp "$APP_WORK/client-on.log" "client"
c_ud=$UD_SENDS c_k=$K_SENDS c_udr=$UD_RECVS c_kr=$K_RECVS c_ann=${APP_STATS[udp_announces_sent]:-0}
dg_udp "$APP_WORK/server-on.log" "server"
s_ann=${APP_STATS[udp_announces_received]:-0}
[ "$c_k" -eq 1 ] && [ "$c_ud" -eq 0 ] ||
  app_fail "client: udp_kernel_sends=$c_k udp_ud_sends=$c_ud; expected its one hello through the kernel"
[ "$c_ann" -ge 1 ] || app_fail "client: udp_announces_sent=$c_ann: it never announced itself"
[ "$s_ann" -ge 1 ] || app_fail "server: udp_announces_received=$s_ann"
[ "$c_udr" -ge $((count / 2)) ] ||
  app_fail "client: udp_ud_receives=$c_udr, udp_kernel_receives=$c_kr: the server's answers stayed on the kernel"
echo "MEASURED one hello ($count answers, one every 2 ms): kernel: ${got[off]} received |" \
  "libvsock: ${got[on]} received, $c_udr over UD / $c_kr through the kernel; client announced $c_ann," \
  "server learnt from $s_ann"
echo "PASS: a socket that sent once through the kernel during its resolution gets its answers over UD"
