#!/bin/bash
# run_mcast_answers.sh VSOCK_BENCH PRELOAD: unicast answers to a multicast
# sender (a request/response feed: one sender, two receiver processes that
# answer each datagram to its sender). vsock_bench mcast-echo --receivers 2
# against vsock_bench client --test mcast-lat, which counts a datagram as
# answered only when both receivers' answers came within 1 s.
#
#   1. the kernel alone: every datagram answered by both — the expected
#      behaviour;
#   2. all three preloaded with the group offloaded: the same, and the
#      answers came over UD (the receivers learnt the way back from the
#      multicast datagram: at least 90% of the sender's receives);
#   3. all preloaded, the group not offloaded: every datagram answered,
#      through the kernel. (Plain receivers with a sender that offloads the
#      group get nothing, as documented: an offloaded group is sent over UD
#      only, compatibility.md; not run.)
# Prints MEASURED lines and exits 0 when all held.
source "$(dirname "$0")/../upgrade/upgrade_test_lib.sh"
[ $# -eq 2 ] || { echo "usage: $0 VSOCK_BENCH PRELOAD"; exit 2; }
bench=$(ut_abs "$1") preload=$(ut_abs "$2")
addr=$(ut_address)
group=239.1.7.9 rounds=${VSOCK_MCAST_ANSWER_ROUNDS:-300}
work=$(mktemp -d /tmp/mcast_answers.XXXXXX)
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
cd /tmp || exit 1
server=

# answers NAME SERVER_ENV CLIENT_ENV: the client's result line in LINE.
answers() {
  local name=$1 server_env=$2 client_env=$3 port
  env $server_env VSOCK_STATS=1 "$bench" mcast-echo --group "$group" --addr "$addr" --receivers 2 \
    >"$work/$name.server" 2>"$work/$name.server.err" &
  server=$!
  port=$(ut_wait_line "$work/$name.server" '^READY ' 30 "$server") ||
    ut_fail "$name: receivers did not start: $(cat "$work/$name.server.err")"
  timeout 120 env $client_env VSOCK_STATS=1 "$bench" client --test mcast-lat --group "$group" --addr "$addr" \
    --port "$port" --receivers 2 --iters "$rounds" --warmup 20 --seconds 30 \
    >"$work/$name.client" 2>"$work/$name.client.err"
  local status=$?
  kill -TERM "$server" 2>/dev/null
  ut_wait_pid "$server" 30 >/dev/null
  LINE=$(grep '^result ' "$work/$name.client")
  echo "$name: ${LINE:-no result: $(tail -1 "$work/$name.client.err")} | sender $(ut_stats "$work/$name.client.err" \
    udp_ud_receives udp_kernel_receives udp_mcast_sends udp_kernel_sends) | receivers $(ut_stats "$work/$name.server.err" \
    udp_ud_sends udp_kernel_sends udp_mcast_receives)"
  [ $status -eq 0 ] && [ -n "$LINE" ] || ut_fail "$name: the sender failed"
}
field() { echo "$LINE" | sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }

answers kernel "LD_PRELOAD=" "LD_PRELOAD="
[ "$(field lost)" = 0 ] || ut_fail "kernel: $(field lost) datagrams not answered by both receivers"
echo "MEASURED multicast with unicast answers (kernel): p50 $(field p50_us) µs"

offloaded="LD_PRELOAD=$preload VSOCK_UDP_MCAST_OFFLOAD=$group"
answers both "$offloaded" "$offloaded"
[ "$(field lost)" = 0 ] || ut_fail "both: $(field lost) datagrams not answered by both receivers (the kernel: none)"
iters=$(field iters)
ud=$(ut_stat "$work/both.client.err" udp_ud_receives)
[ "${ud:-0}" -ge $((iters * 2 * 9 / 10)) ] ||
  ut_fail "both: only ${ud:-0} answers came over UD for $iters measured datagrams (2 answers each)"
echo "MEASURED multicast with unicast answers (all preloaded, group offloaded): p50 $(field p50_us) µs, ${ud} answers over UD"

answers not-offloaded "LD_PRELOAD=$preload" "LD_PRELOAD=$preload"
[ "$(field lost)" = 0 ] || ut_fail "not-offloaded: $(field lost) datagrams not answered by both receivers"
echo "PASS: unicast answers to a multicast sender, with and without the library"
