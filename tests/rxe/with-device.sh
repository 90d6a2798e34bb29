#!/usr/bin/env bash
# with-device.sh - run a command that needs a verbs device, wherever one can
# be had; CTest's rdma tests run through it (${VSOCK_WITH_DEVICE}).
#
#   tests/rxe/with-device.sh CMD ARGS...
#
# 1. An ACTIVE verbs port exists here (real NIC, or we are already inside the
#    Soft-RoCE VM: RXE_VM=1): run CMD directly.
# 2. Else, as root with QEMU available (or installable): run CMD inside the
#    Soft-RoCE VM (rxe-vm.sh). Its failures are failures: 124 timeout, 125
#    VM setup, anything else CMD's own status.
# 3. Else print "SKIPPED: no verbs device (why)" on stderr and exit 77, the
#    skip code CTest is told about. With VSOCK_REQUIRE_DEVICE=1 (CI that must
#    test RDMA) that is an error instead: exit 1.
# VSOCK_RXE_VM=0 forbids booting the VM (case 2 becomes case 3).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
me=with-device.sh
[ $# -gt 0 ] || { echo "usage: $me CMD ARGS..." >&2; exit 2; }

active_port() {
  [ "${RXE_VM:-0}" = 1 ] && return 0
  local state
  for state in /sys/class/infiniband/*/ports/*/state; do
    [ -r "$state" ] && grep -q ACTIVE "$state" && return 0
  done
  return 1
}

no_device() {
  if [ "${VSOCK_REQUIRE_DEVICE:-0}" = 1 ]; then
    echo "$me: FAILED: no verbs device ($1) and VSOCK_REQUIRE_DEVICE=1" >&2
    exit 1
  fi
  echo "SKIPPED: no verbs device ($1)" >&2
  exit 77
}

if active_port; then exec "$@"; fi
if [ "${VSOCK_RXE_VM:-1}" = 0 ]; then no_device "none here, and VSOCK_RXE_VM=0 forbids the Soft-RoCE VM"; fi
if [ "$(id -u)" != 0 ]; then no_device "none here, and the Soft-RoCE VM needs root"; fi
if ! command -v qemu-system-x86_64 > /dev/null && ! command -v apt-get > /dev/null; then
  no_device "none here, no qemu-system-x86_64 and no apt-get to install it"
fi
exec "$here/rxe-vm.sh" -- "$@"
