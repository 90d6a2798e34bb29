#!/bin/bash
# run_udp_flood.sh UDP_FLOOD PRELOAD: nothing lost below the receive budget
# (issue 11). A receiver with a large SO_RCVBUF (set after bind) makes no
# socket call while a sender floods it, then counts what it got. The kernel
# keeps every datagram that budget holds; so must libvsock, whose UD queue
# pair drops what comes while no receive buffer is posted — its receive
# progress thread (receive_progress.hpp) keeps them posted.
#
#   1. the kernel alone (both plain): every datagram arrives — the
#      expected behaviour, and a check that the budget holds the burst;
#   2. both preloaded, 200-byte and 3000-byte datagrams (fragmented below a
#      4096-byte MTU): every datagram arrives, each once and intact, most
#      of them over UD;
#   3. both preloaded without the thread (VSOCK_UDP_PROGRESS_US=0, and a
#      pool of 512 buffers): datagrams are lost — the control that shows
#      the test sees what it tests;
#   4. mixed (a plain sender, then a plain receiver): every datagram
#      arrives, through the kernel.
# Prints MEASURED lines and exits 0 when all held.
source "$(dirname "$0")/../upgrade/upgrade_test_lib.sh"
[ $# -eq 2 ] || { echo "usage: $0 UDP_FLOOD PRELOAD"; exit 2; }
flood=$(ut_abs "$1") preload=$(ut_abs "$2")
addr=$(ut_address)
rcvbuf=$((8 << 20))
work=$(mktemp -d /tmp/udp_flood.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd /tmp || exit 1

# flood NAME RECEIVER_PRELOAD SENDER_PRELOAD COUNT SIZE [ENV...]: the
# receiver's status in STATUS, its last line in LINE.
flood() {
  local name=$1 receiver_lib=$2 sender_lib=$3 count=$4 size=$5 receiver port
  shift 5
  env ${receiver_lib:+LD_PRELOAD=$receiver_lib} VSOCK_STATS=1 "$@" \
    "$flood" recv "$addr" "$count" "$size" "$rcvbuf" "$work/$name.go" \
    >"$work/$name.receiver" 2>"$work/$name.receiver.err" &
  receiver=$!
  port=$(ut_wait_line "$work/$name.receiver" '^READY ' 30 "$receiver") ||
    ut_fail "$name: receiver did not start: $(cat "$work/$name.receiver.err")"
  timeout 120 env ${sender_lib:+LD_PRELOAD=$sender_lib} VSOCK_STATS=1 \
    "$flood" send "$addr" "$port" "$count" "$size" >"$work/$name.sender" 2>"$work/$name.sender.err" ||
    ut_fail "$name: the sender failed: $(cat "$work/$name.sender.err")"
  sleep 0.5  # what is on the wire lands
  touch "$work/$name.go"
  ut_wait_pid "$receiver" 60 >/dev/null
  STATUS=$?
  LINE=$(tail -1 "$work/$name.receiver")
  echo "$name: $(head -1 "$work/$name.receiver") | $(grep "^missing" "$work/$name.receiver") $LINE | receiver $(ut_stats "$work/$name.receiver.err" \
    udp_ud_receives udp_kernel_receives udp_drops_budget udp_drops_reassembly) | sender $(ut_stats \
    "$work/$name.sender.err" udp_ud_sends udp_kernel_sends udp_send_errors udp_ud_posts)"
}

for case in 200:4000 3000:1000; do
  size=${case%:*} count=${case#*:}
  flood "kernel-$size" "" "" "$count" "$size"
  [ "$STATUS" -eq 0 ] || ut_fail "kernel-$size: the kernel itself lost datagrams ($LINE): the budget is too small for the test"
  flood "both-$size" "$preload" "$preload" "$count" "$size"
  [ "$STATUS" -eq 0 ] || ut_fail "both-$size: $LINE (the kernel got all $count)"
  ud=$(ut_stat "$work/both-$size.receiver.err" udp_ud_receives)
  [ "${ud:-0}" -ge $((count / 2)) ] || ut_fail "both-$size: only ${ud:-0} of $count datagrams came over UD"
  echo "MEASURED udp flood into a receiver that does not read ($size B): all $count kept, ${ud} over UD"
done

# 512 buffers: fewer than the ~4,000 datagrams that come over UD
flood "no-thread" "$preload" "$preload" 4000 200 VSOCK_UDP_PROGRESS_US=0 VSOCK_UDP_RECEIVE_BUFFERS=512
lost=$(echo "$LINE" | sed -n 's|^received \([0-9]*\)/\([0-9]*\).*|\2 - \1|p')
echo "MEASURED without the receive progress thread: $((${lost:-0})) of 4000 lost"
[ "$STATUS" -ne 0 ] || ut_fail "no-thread: nothing was lost without the thread: the test does not see what it tests"

flood "mixed" "$preload" "" 4000 200
[ "$STATUS" -eq 0 ] || ut_fail "mixed: $LINE"
flood "mixed-plain-receiver" "" "$preload" 4000 200
[ "$STATUS" -eq 0 ] || ut_fail "mixed-plain-receiver: $LINE"
echo "PASS: nothing lost below the receive budget, with and without the library"
