#!/bin/bash
# udp_echo.sh UDP_PAIR PRELOAD
# UDP over UD between the two hosts of the two-host bed
# (tests/rxe/two-hosts.sh): udp_pair's echo server on host a (waiting in
# epoll), its client on host b sending VSOCK_TH_DATAGRAMS datagrams (default
# 600) of 0 B to 8,000 B, each echo compared byte for byte. First both
# without the library (the kernel's time), then both under it: every echo
# right, none lost, at least 90% of each host's datagrams sent over UD (the
# first go through the kernel while the destination resolves), and each
# host's rxe0 counted the packets.
source "$(dirname "$0")/twohost_lib.sh"
[ $# -eq 2 ] || { echo "usage: $0 UDP_PAIR PRELOAD"; exit 2; }
pair=$(ut_abs "$1") preload=$(ut_abs "$2")
th_leave_share
count=${VSOCK_TH_DATAGRAMS:-600}

for mode in kernel libvsock; do
  envs=()
  [ "$mode" = libvsock ] && envs=(LD_PRELOAD="$preload" VSOCK_STATS=1 VSOCK_LOG_LEVEL=info VSOCK_LOG_FILE="$TH_WORK/$mode.log")
  : > "$TH_WORK/$mode.log"
  pkts=$(th_device_packets) segs=$(th_tcp_segments)
  if [ "$TH_ROLE" = a ]; then
    env "${envs[@]}" timeout 300 "$pair" server "$TH_SELF" epoll > "$TH_WORK/$mode.out" 2> "$TH_WORK/$mode.err" &
    pid=$!
    port=$(ut_wait_line "$TH_WORK/$mode.out" '^READY [0-9]+' 30 "$pid") || ut_fail "udp_pair server ($mode) did not start"
    pair_mark "udp-$mode" "$port"
    ut_wait_pid "$pid" 300 || ut_fail "udp_pair server ($mode) exited with status $?"
  else
    port=$(pair_wait "udp-$mode" 60) || ut_fail "host a's udp_pair server did not start ($mode)"
    # The last datagram, QUIT, ends the server.
    env "${envs[@]}" timeout 300 "$pair" client "$TH_PEER" "$port" "$count" epoll 8000 \
      > "$TH_WORK/$mode.out" 2> "$TH_WORK/$mode.err" || ut_fail "udp_pair client ($mode) failed"
    echo "MEASURED: udp echo across hosts ($mode): $(grep '^echoed' "$TH_WORK/$mode.out")"
  fi
  th_evidence "udp ($mode, host $TH_ROLE)" "$pkts" "$segs"
  if [ "$mode" = libvsock ]; then
    s=$(ut_stats "$TH_WORK/$mode.log" udp_ud_sends udp_kernel_sends udp_ud_receives udp_resolutions)
    th_log "udp ($TH_ROLE): $s"
    read -r ud kernel received _ <<< "$(echo "$s" | sed 's/[a-z_]*=//g')"
    [ "$received" -gt 0 ] || ut_fail "host $TH_ROLE received nothing over UD"
    [ "$ud" -ge $(((ud + kernel) * 9 / 10)) ] || ut_fail "host $TH_ROLE sent $ud datagrams over UD and $kernel through the kernel"
    [ "$TH_DEVICE_DELTA" -ge "$count" ] || ut_fail "host $TH_ROLE: rxe0 counted only $TH_DEVICE_DELTA packets"
  fi
done
echo "PASS: two hosts, UDP echo (host $TH_ROLE)"
