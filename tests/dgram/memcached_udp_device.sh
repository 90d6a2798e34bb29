#!/usr/bin/env bash
# memcached over its UDP protocol on UD (DESIGN decision 5): memcached -U
# (UDP only: -p 0, on the device's address, 2 threads) unmodified, and a
# small client (memcached_udp_client.py: memcached's 8-byte UDP frame
# header, the text protocol's set and get) doing VSOCK_MC_COUNT (default 150)
# sets of values from 1 B to VSOCK_MC_MAX (default 8000) B, a get of each
# (replies above 1,400 B come in several datagrams) and gets of missing keys,
# every reply checked. First without the library, then both preloaded.
#
# Passes when every reply is right in both runs, and with the library the
# client sent at least 9 in 10 of its requests and received at least 9 in
# 10 of memcached's reply datagrams over UD, memcached answered over UD
# (at least 9 in 10 of its sends) and the device carried them. Prints
# MEASURED lines (time, datagrams over UD / kernel, rxe packets).
source "$(dirname "$0")/dgram_app_lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
app_require memcached "$APP_PYTHON"
app_init memcached-udp
dg_device_init
count=${VSOCK_MC_COUNT:-150}
max=${VSOCK_MC_MAX:-8000}
user_args=()
[ "$(id -u)" -eq 0 ] && user_args=(-u root)  # memcached refuses root without -u

declare -A secs=() tx=() out=()
for lib in off on; do
  app_library "$lib"
  app_start_server "memcached-$lib" udp memcached "${user_args[@]}" -l "$APP_ADDR" -U @PORT@ -p 0 -t 2 -m 64
  server=$APP_PID
  read -r r0 _ <<<"$(dg_rxe)"
  t0=$(dg_now)
  out[$lib]=$(app_preloaded "$APP_WORK/client-$lib.log" "$APP_PYTHON" "$here/memcached_udp_client.py" \
    "$APP_ADDR" "$APP_PORT" "$count" "$max") ||
    app_fail "memcached ($lib): the client failed: $(tail -1 "$APP_WORK/client-$lib.log")"
  secs[$lib]=$(dg_secs "$t0" "$(dg_now)")
  read -r r1 _ <<<"$(dg_rxe)"
  tx[$lib]=$((r1 - r0))
  app_log "memcached (library $lib): ${out[$lib]}; ${secs[$lib]} s; device sent ${tx[$lib]} packets"
  app_stop_pid "$server" TERM 15
  [ "$APP_STOP_STATUS" -eq 0 ] || app_fail "memcached ($lib) exited with status $APP_STOP_STATUS"
done

requests=$((count * 2 + $(awk '{ print $6 }' <<<"${out[on]}")))
replies=$(awk '{ print $10 }' <<<"${out[on]}")
dg_expect_ud "$APP_WORK/client-on.log" "client" $((requests * 9 / 10)) $((replies * 9 / 10))
c_ud=$UD_SENDS c_k=$K_SENDS c_udr=$UD_RECVS c_kr=$K_RECVS
dg_expect_ud "$APP_WORK/memcached-on.log" "memcached" $((replies * 9 / 10)) $((requests * 9 / 10))
[ "${tx[on]}" -ge $((requests + replies)) ] ||
  app_fail "the device sent ${tx[on]} packets for $requests requests and $replies replies"
echo "MEASURED memcached -U ($count sets + $count gets, values 1..$max B): kernel ${secs[off]} s (${out[off]}), rxe ${tx[off]} pkts |" \
  "libvsock ${secs[on]} s (${out[on]}); client UD $c_ud / kernel $c_k sends, UD $c_udr / kernel $c_kr receives;" \
  "memcached UD $UD_SENDS / kernel $K_SENDS sends; rxe ${tx[on]} pkts"
echo "PASS: memcached over UDP, every reply right, with and without the library"
