#!/bin/bash
# run_udp_link_flap.sh UDP_PAIR PRELOAD
#
# The UD path survives its port going down (docs/protocol.md §6, "When
# the queue pair fails"): an echo pair under the library (udp_pair, both
# ends preloaded, datagrams of 0-2,000 B one at a time) runs over UD; once
# the echoes flow over the device, the device's netdev goes down for 3 s
# and up again. A UD send fails then and takes the process's queue pair
# out of RTS; its datagrams go through the kernel until it is restarted.
# Passes when no echo came back wrong, at most a few were lost (UDP may
# lose what was in flight on the port that went down), a process whose
# queue pair failed restarted it (udp_ud_restarts) and its last word on UD
# is "restarted", and the pair went on over UD after it. Needs the device
# and root (run through tests/rxe/with-device.sh).
set -u
[ $# -ge 2 ] || { echo "usage: $0 UDP_PAIR PRELOAD"; exit 2; }
bin=$(realpath "$1") preload=$(realpath "$2")
addr=${RXE_VM_IPADDR:-${VSOCK_TEST_ADDR:-}}
[ -n "$addr" ] || { echo "FAIL: no device address (run through tests/rxe/with-device.sh)"; exit 1; }
# 20,000: the port goes down about 5,000 echoes in and the queue pairs restart
# within 6 s, long before the last echo; 80,000 took 390 s on a loaded host.
count=${VSOCK_FLAP_ECHOES:-20000}
work=$(mktemp -d /tmp/vsock-udflap.XXXXXX) || exit 2
netdev=""
cleanup() {
  [ -n "$netdev" ] && ip link set "$netdev" up 2>/dev/null
  [ -n "${spid:-}" ] && kill "$spid" 2>/dev/null
  [ -n "${cpid:-}" ] && kill "$cpid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$work"/*; do echo "---- $(basename "$f") ----"; grep -v ' stats: ' "$f" | tail -n 12; done
  exit 1
}
stat_of() { grep ' stats: ' "$1" | tail -n1 | tr ' ' '\n' | sed -n "s/^$2=//p"; }
cd /tmp
read -r dev netdev <<<"$(rdma link show | sed -n 's/^link \([^/]*\)\/[0-9]* .* netdev \([^ ]*\).*/\1 \2/p' | head -n1)"
[ -n "$netdev" ] || fail "no rdma link: $(rdma link show)"
counter=/sys/class/infiniband/$dev/ports/1/hw_counters/rcvd_pkts
run() {  # run NAME ARGS...: in the background under the library; sets PID
  local name=$1
  shift
  # 3 s for the destination's resolution (SIDR; default 200 ms): one that
  # runs out on a loaded host leaves every datagram on the kernel, and the
  # port would go down under a client that never used UD.
  env LD_PRELOAD="$preload" VSOCK_STATS=1 VSOCK_LOG_LEVEL=info VSOCK_LOG_FILE="$work/$name.log" \
    VSOCK_UPGRADE_TIMEOUT_MS="${VSOCK_UPGRADE_TIMEOUT_MS:-3000}" "$bin" "$@" >"$work/$name.out" 2>&1 &
  PID=$!
}
run server server "$addr" block
spid=$PID
for ((i = 0; i < 100; i++)); do grep -q '^READY' "$work/server.out" && break; sleep 0.2; done
port=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$work/server.out")
[ -n "$port" ] || fail "the server did not start"
before=$(cat "$counter")
run client client "$addr" "$port" "$count" block 2000
cpid=$PID
for ((i = 0; i < 600; i++)); do
  [ $(($(cat "$counter") - before)) -ge 10000 ] && break
  kill -0 "$cpid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$cpid" 2>/dev/null || fail "the client ended before the port could go down"
echo "$(($(cat "$counter") - before)) packets over $dev; $netdev down for 3 s"
# Time to outcome, on this script's clock (0.1 s steps): when each side's
# log said its UD queue pair failed (its datagrams go through the kernel
# from then on) and when it said it restarted (over UD again).
t0=${EPOCHREALTIME/./}  # microseconds
since() { local us=$((${EPOCHREALTIME/./} - t0)); printf '%d.%d' $((us / 1000000)) $((us % 1000000 / 100000)); }
declare -A failed_at restarted_at
look() {
  local name now
  now=$(since)
  for name in client server; do
    [ -z "${failed_at[$name]:-}" ] && grep -q 'UD QP .* failed' "$work/$name.log" 2>/dev/null && failed_at[$name]=$now
    [ -z "${restarted_at[$name]:-}" ] && grep -q 'UD QP .* restarted' "$work/$name.log" 2>/dev/null &&
      restarted_at[$name]=$now
  done
}
ip link set "$netdev" down
while [ $((${EPOCHREALTIME/./} - t0)) -lt 3000000 ]; do look; sleep 0.1; done
ip link set "$netdev" up
for ((i = 0; i < 600; i++)); do
  look
  done_looking=1
  for name in client server; do
    [ -n "${failed_at[$name]:-}" ] && [ -z "${restarted_at[$name]:-}" ] && done_looking=0
  done
  [ $done_looking = 1 ] && break
  sleep 0.1
done
for name in client server; do
  echo "MEASURED udp flap $name: UD queue pair failed ${failed_at[$name]:-never} s, restarted ${restarted_at[$name]:-never} s after the port went down (up again at 3 s)"
done
for ((i = 0; i < 1800; i++)); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$cpid" 2>/dev/null && fail "the client did not finish within 180 s of the flap"
wait "$cpid"
printf QUIT >"/dev/udp/$addr/$port" 2>/dev/null
for ((i = 0; i < 100; i++)); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$spid" 2>/dev/null && kill "$spid"
wait "$spid" 2>/dev/null
spid="" cpid=""
line=$(grep '^echoed' "$work/client.out")
echo "client: $line"
read -r echoed lost wrong <<<"$(echo "$line" | sed -n 's/^echoed \([0-9]*\)\/[0-9]* lost \([0-9]*\) wrong \([0-9]*\).*/\1 \2 \3/p')"
[ -n "$wrong" ] || fail "no result line from the client"
[ "$wrong" = 0 ] || fail "$wrong echoes came back wrong"
[ "$lost" -le 64 ] || fail "$lost echoes lost (at most 64 may be, in flight when the port went down)"
restarted=0
for name in client server; do
  log=$work/$name.log
  echo "  $name: udp_ud_sends=$(stat_of "$log" udp_ud_sends) udp_kernel_sends=$(stat_of "$log" udp_kernel_sends)" \
    "udp_ud_restarts=$(stat_of "$log" udp_ud_restarts)"
  grep -q 'UD QP .* failed' "$log" || continue
  [ "$(stat_of "$log" udp_ud_restarts)" -ge 1 ] || fail "$name: its UD queue pair failed and was never restarted"
  grep -E 'UD QP .* (failed|restarted)' "$log" | tail -n1 | grep -q restarted ||
    fail "$name: its UD queue pair failed last and stayed so"
  restarted=1
done
[ $restarted = 1 ] || fail "no UD queue pair failed: the port going down did not reach the UD path"
echo "PASS: UD over a port that went down and up ($echoed echoed, $lost lost)"
