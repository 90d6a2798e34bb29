#!/bin/bash
# Without a verbs device the library says so in one info line and every
# socket stays on the kernel, counted as kernel_no_device.
set -uo pipefail
preload=$1
for state in /sys/class/infiniband/*/ports/*/state; do
  [ -r "$state" ] && grep -q ACTIVE "$state" && { echo "SKIPPED: this machine has a verbs device"; exit 77; }
done
err=$(env LD_PRELOAD="$preload" VSOCK_LOG_LEVEL=info VSOCK_STATS=1 /usr/bin/python3 -c '
import socket
a = socket.socket(); b = socket.socket(type=socket.SOCK_DGRAM); c = socket.socket(socket.AF_UNIX)' 2>&1)
echo "$err"
[ "$(grep -c 'no usable verbs device' <<<"$err")" = 1 ] || { echo "FAIL: expected exactly one no-device line"; exit 1; }
[ "$(grep -c 'info:' <<<"$err")" = 2 ] || { echo "FAIL: expected only the loaded and no-device info lines"; exit 1; }
grep -q 'stats: tcp_sockets=1 udp_sockets=1 other_sockets=1 kernel_by_rule=0 kernel_no_device=2 device_opened=0' <<<"$err" ||
  { echo "FAIL: counters"; exit 1; }
err=$(env LD_PRELOAD="$preload" VSOCK_STATS=1 VSOCK_UDP=kernel /usr/bin/python3 -c '
import socket
a = socket.socket(); b = socket.socket(type=socket.SOCK_DGRAM)' 2>&1)
grep -q 'kernel_by_rule=1 kernel_no_device=1' <<<"$err" || { echo "FAIL: VSOCK_UDP=kernel not counted: $err"; exit 1; }
echo "no device: one info line, kernel path, counted"
