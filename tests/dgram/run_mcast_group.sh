#!/bin/bash
# run_mcast_group.sh MCAST_GROUP_PY PRELOAD: IPv4 multicast over UD (issue
# 11 item 8) with an unmodified Python sender and two receiver processes on
# the same group and port (SO_REUSEADDR), all on the device's address.
#
# Every tenth datagram is 3000 bytes: fragments over UD.
#   1. the kernel alone, IP_MULTICAST_LOOP on and off: what each receiver
#      gets (every datagram / none: the sender is on the same host);
#   2. all three preloaded with the group in VSOCK_UDP_MCAST_OFFLOAD: each
#      receiver's set of (payload, source) is exactly the kernel's, and it
#      went over UD: the sender's udp_mcast_sends = COUNT and no kernel
#      send, each receiver's udp_mcast_receives = COUNT and no kernel
#      receive, rxe's sent_pkts grew by COUNT; with loop off the receivers
#      got nothing and dropped what came (udp_mcast_drops_loop);
#   3. the sender a member of the group too (loop on): it gets its own
#      datagrams, the same set as with the kernel, delivered in software;
#   4. a sender whose IP_MULTICAST_IF is lo: the kernel's (nothing over UD);
#   5. mixed: a plain sender, preloaded receivers: everything, through the
#      kernel;
#   6. baseline: rdmacm-utils' mckey joins and sends on this bed.
# Prints MEASURED lines and exits 0 when all held.
source "$(dirname "$0")/../upgrade/upgrade_test_lib.sh"
[ $# -eq 2 ] || { echo "usage: $0 MCAST_GROUP_PY PRELOAD"; exit 2; }
prog=$(ut_abs "$1") preload=$(ut_abs "$2")
addr=$(ut_address)
group=239.1.2.3 port=47123 count=${VSOCK_MCAST_COUNT:-100}
offload=239.1.0.0/16
work=$(mktemp -d /tmp/mcast_group.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd /tmp || exit 1
counters=/sys/class/infiniband/${RXE_VM_DEVICE:-rxe0}/ports/1/hw_counters
counter() { cat "$counters/$1" 2>/dev/null || echo 0; }

# run NAME LOOP SENDER_LIB RECEIVER_LIB EXPECT [self]: two receivers and a
# sender; with "self" the sender is a member too and receives its own
# datagrams (loop on), its set kept as NAME.self.set.
run() {
  local name=$1 loop=$2 sender_lib=$3 receiver_lib=$4 expect=$5 self=${6:-} idle r pids=() sent_before
  idle=2
  rm -f "$work/done"
  for r in a b; do
    env ${receiver_lib:+LD_PRELOAD=$receiver_lib VSOCK_UDP_MCAST_OFFLOAD=$offload} VSOCK_STATS=1 \
      timeout 120 python3 "$prog" recv "$group" "$port" "$addr" "$count" "$idle" "$work/done" \
      >"$work/$name.$r" 2>"$work/$name.$r.err" &
    pids+=($!)
    ut_wait_line "$work/$name.$r" '^READY ' 30 "${pids[-1]}" >/dev/null ||
      ut_fail "$name: receiver $r did not start: $(cat "$work/$name.$r.err")"
  done
  sent_before=$(counter sent_pkts)
  local start=$(date +%s.%N)
  local mode=(send "$group" "$port" "${SENDER_IF:-$addr}" "$count" "$loop")
  [ -n "$self" ] && mode=(sendrecv "$group" "$port" "$addr" "$count" 3)
  env ${sender_lib:+LD_PRELOAD=$sender_lib VSOCK_UDP_MCAST_OFFLOAD=$offload} VSOCK_STATS=1 \
    timeout 120 python3 "$prog" "${mode[@]}" \
    >"$work/$name.sender" 2>"$work/$name.sender.err" || ut_fail "$name: sender failed: $(cat "$work/$name.sender.err")"
  touch "$work/done"
  for pid in "${pids[@]}"; do ut_wait_pid "$pid" 60 >/dev/null; done
  local end=$(date +%s.%N)
  SENT_PKTS=$(($(counter sent_pkts) - sent_before))
  for r in a b; do
    grep '^GOT ' "$work/$name.$r" | sort >"$work/$name.$r.set"
    ! grep -q CORRUPT "$work/$name.$r.set" || ut_fail "$name: receiver $r got a corrupt datagram"
    local got
    got=$(sed -n 's/^COUNT //p' "$work/$name.$r")
    echo "$name: receiver $r got ${got:-?} of $count | $(ut_stats "$work/$name.$r.err" udp_mcast_joins udp_mcast_receives udp_mcast_drops_loop udp_ud_receives udp_kernel_receives udp_drops_reassembly)"
    [ "$got" = "$expect" ] || ut_fail "$name: receiver $r got ${got:-nothing} datagrams, expected $expect: $(tail -3 "$work/$name.$r.err") / sender: $(tail -3 "$work/$name.sender.err")"
  done
  if [ -n "$self" ]; then
    grep '^GOT ' "$work/$name.sender" | sort >"$work/$name.self.set"
    local own
    own=$(sed -n 's/^COUNT //p' "$work/$name.sender")
    echo "$name: the sender got ${own:-?} of its own $count"
    [ "$own" = "$count" ] || ut_fail "$name: the sender got ${own:-nothing} of its own datagrams, expected $count"
  fi
  echo "$name: sender | $(ut_stats "$work/$name.sender.err" udp_mcast_joins udp_mcast_sends udp_mcast_receives udp_mcast_drops_loop udp_ud_sends udp_kernel_sends udp_kernel_receives) | rxe sent_pkts +$SENT_PKTS"
  echo "MEASURED multicast $name: $count datagrams to 2 receivers in $(echo "$end - $start" | bc) s"
}

# same_sets A B: the receivers of run A got exactly what those of run B got.
same_sets() {
  for r in a b; do
    cmp -s "$work/$1.$r.set" "$work/$2.$r.set" ||
      ut_fail "$1 receiver $r got another set than $2: $(diff "$work/$2.$r.set" "$work/$1.$r.set" | head -5)"
  done
}

stat_is() {  # stat_is FILE NAME VALUE WHAT
  local v
  v=$(ut_stat "$1" "$2")
  [ "${v:-0}" -eq "$3" ] || ut_fail "$4: $2 is ${v:-0}, expected $3"
}

run kernel-loop1 1 "" "" "$count"
run kernel-loop0 0 "" "" 0

run ud-loop1 1 "$preload" "$preload" "$count"
same_sets ud-loop1 kernel-loop1
stat_is "$work/ud-loop1.sender.err" udp_mcast_sends "$count" "ud-loop1 sender"
stat_is "$work/ud-loop1.sender.err" udp_kernel_sends 0 "ud-loop1 sender"
for r in a b; do
  stat_is "$work/ud-loop1.$r.err" udp_mcast_receives "$count" "ud-loop1 receiver $r"
  stat_is "$work/ud-loop1.$r.err" udp_kernel_receives 0 "ud-loop1 receiver $r"
  stat_is "$work/ud-loop1.$r.err" udp_mcast_joins 1 "ud-loop1 receiver $r"
done
[ "$SENT_PKTS" -ge "$count" ] || ut_fail "ud-loop1: rxe sent only $SENT_PKTS packets"

run ud-loop0 0 "$preload" "$preload" 0
stat_is "$work/ud-loop0.sender.err" udp_mcast_sends "$count" "ud-loop0 sender"
stat_is "$work/ud-loop0.sender.err" udp_kernel_sends 0 "ud-loop0 sender"
[ "$SENT_PKTS" -ge "$count" ] || ut_fail "ud-loop0: rxe sent only $SENT_PKTS packets"
for r in a b; do
  dropped=$(ut_stat "$work/ud-loop0.$r.err" udp_mcast_drops_loop)
  [ "${dropped:-0}" -gt 0 ] || ut_fail "ud-loop0 receiver $r: nothing came over UD to drop"
done

# The sender a member too: it gets its own datagrams (loop on) as from the
# kernel, in software at send; what rxe loops back to its own queue pair is
# dropped (udp_mcast_drops_loop on the sender tells whether rxe does).
run kernel-self 1 "" "" "$count" self
run ud-self 1 "$preload" "$preload" "$count" self
same_sets ud-self kernel-self
cmp -s "$work/ud-self.self.set" "$work/kernel-self.self.set" ||
  ut_fail "ud-self: the sender got another set of its own datagrams than with the kernel"
stat_is "$work/ud-self.sender.err" udp_mcast_sends "$count" "ud-self sender"
stat_is "$work/ud-self.sender.err" udp_kernel_sends 0 "ud-self sender"
stat_is "$work/ud-self.sender.err" udp_mcast_receives "$count" "ud-self sender"
stat_is "$work/ud-self.sender.err" udp_kernel_receives 0 "ud-self sender"
echo "ud-self: rxe looped $(ut_stat "$work/ud-self.sender.err" udp_mcast_drops_loop) of the sender's $count datagrams back to its own queue pair (dropped)"

# IP_MULTICAST_IF naming another interface than the device's (lo): the
# kernel's, with or without the library (the receivers, members on the
# device's interface, get nothing either way: lo is no member).
SENDER_IF=127.0.0.1 run kernel-if-lo 1 "" "" 0
SENDER_IF=127.0.0.1 run ud-if-lo 1 "$preload" "$preload" 0
stat_is "$work/ud-if-lo.sender.err" udp_kernel_sends "$count" "ud-if-lo sender"
stat_is "$work/ud-if-lo.sender.err" udp_mcast_sends 0 "ud-if-lo sender"

run plain-sender 1 "" "$preload" "$count"
same_sets plain-sender kernel-loop1
for r in a b; do stat_is "$work/plain-sender.$r.err" udp_kernel_receives "$count" "plain-sender receiver $r"; done
# 6. mckey as the bed's baseline (last: it joins the same group): a receiver and a sender of 5 messages.
if command -v mckey >/dev/null; then
  timeout 30 mckey -m "$group" -b "$addr" -C 5 >"$work/mckey.recv" 2>&1 &
  mckey_recv=$!
  sleep 1
  timeout 30 mckey -m "$group" -b "$addr" -s -C 5 >"$work/mckey.send" 2>&1
  send_status=$?
  wait $mckey_recv
  recv_status=$?
  echo "mckey: sender status $send_status, receiver status $recv_status ($(grep -h 'joined dgid' "$work/mckey.recv" | head -1))"
  [ $send_status -eq 0 ] && [ $recv_status -eq 0 ] || ut_fail "mckey does not work on this bed: $(cat "$work"/mckey.*)"
else
  echo "mckey: not installed (rdmacm-utils), baseline skipped"
fi

echo "PASS"
