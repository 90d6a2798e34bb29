#!/usr/bin/env bash
# two-hosts.sh - run a command on two hosts joined by a link, each with its
# own kernel and its own Soft-RoCE device: libvsock's two-host test bed.
#
#   tests/rxe/two-hosts.sh CMD ARGS...
#
# Boots two rxe-vm.sh guests at once, "a" (192.168.78.1) and "b"
# (192.168.78.2). Their rxe0 sits on a virtio NIC; the two NICs are joined
# by QEMU's dgram netdev (Ethernet frames as UDP between the two QEMUs on
# the host's loopback: nothing leaves this machine). Both guests run the
# same CMD, in this directory, and tell their role apart by
#   RXE_VM_HOST=a|b  RXE_VM_IPADDR=<own address>  RXE_VM_PEER_IPADDR=<the other's>
#   VSOCK_PAIR_DIR=<a fresh directory both see read-write: where the two
#                   halves meet (tests/rxe/pair_lib.sh)>
# Output lines are prefixed "[a] " / "[b] ". Exit status: 0 when both
# halves exit 0; 77 (SKIPPED) when a half skipped and none failed, or when
# no VM can be booted here; otherwise the failing half's status.
# VSOCK_REQUIRE_DEVICE=1 turns "no VM here" into a failure (CI), as in
# with-device.sh. VSOCK_RXE_TIMEOUT bounds each guest (default 600 s).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
me=two-hosts.sh
[ $# -gt 0 ] || { echo "usage: $me CMD ARGS..." >&2; exit 2; }

no_bed() {
  if [ "${VSOCK_REQUIRE_DEVICE:-0}" = 1 ]; then
    echo "$me: FAILED: no two-host bed ($1) and VSOCK_REQUIRE_DEVICE=1" >&2
    exit 1
  fi
  echo "SKIPPED: no two-host bed ($1)" >&2
  exit 77
}
[ "${RXE_VM:-0}" = 1 ] && no_bed "already inside a guest"
[ "${VSOCK_RXE_VM:-1}" = 0 ] && no_bed "VSOCK_RXE_VM=0 forbids the Soft-RoCE VMs"
[ "$(id -u)" = 0 ] || no_bed "the Soft-RoCE VMs need root"
if ! command -v qemu-system-x86_64 > /dev/null && ! command -v apt-get > /dev/null; then
  no_bed "no qemu-system-x86_64 and no apt-get to install it"
fi
# Both guests want the same kernel and initramfs: build them once, first.
"$here/rxe-vm.sh" --prepare > /dev/null || exit 125

# Two UDP ports on loopback that nobody holds, one per QEMU end of the link.
free_udp_ports() {
  local used port picked=()
  used=$(ss -Hulnp 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }')
  while [ ${#picked[@]} -lt 2 ]; do
    port=$((20000 + RANDOM % 30000))
    grep -qx "$port" <<< "$used" && continue
    [ ${#picked[@]} = 1 ] && [ "${picked[0]}" = "$port" ] && continue
    picked+=("$port")
  done
  echo "${picked[@]}"
}
read -r port_a port_b < <(free_udp_ports)

pair_dir=$(mktemp -d "${TMPDIR:-/tmp}/libvsock-pair.XXXXXX")
export VSOCK_PAIR_DIR=$pair_dir
pids=()
stop_all() {
  local status=$? p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done   # rxe-vm.sh stops its own guest
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  if [ "${VSOCK_RXE_KEEP:-0}" = 1 ]; then
    echo "$me: kept $pair_dir (work-a, work-b: each host's logs)" >&2
  else
    rm -rf "$pair_dir"
  fi
  exit "$status"
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start_half() {  # NAME OWN_IP PEER_IP LOCAL_PORT REMOTE_PORT CMD...
  local name=$1 ip=$2 peer=$3 lport=$4 rport=$5
  shift 5
  "$here/rxe-vm.sh" --ip "$ip/24" --rw "$pair_dir" --link "$lport:$rport:$peer:$name" -- "$@" \
    > >(sed -u "s/^/[$name] /") 2> >(sed -u "s/^/[$name] /" >&2) &
  pids+=($!)
}
start_half a 192.168.78.1 192.168.78.2 "$port_a" "$port_b" "$@"
start_half b 192.168.78.2 192.168.78.1 "$port_b" "$port_a" "$@"

wait "${pids[0]}"; status_a=$?
wait "${pids[1]}"; status_b=$?
pids=()
echo "$me: host a exited $status_a, host b exited $status_b"
for s in "$status_a" "$status_b"; do
  [ "$s" = 0 ] || [ "$s" = 77 ] && continue
  exit "$s"
done
[ "$status_a" = 77 ] || [ "$status_b" = 77 ] && exit 77
exit 0
