#!/bin/bash
# vsock-info where a verbs device exists (run through tests/rxe/with-device.sh,
# so in the Soft-RoCE guest on a machine without one): exit 0, the device
# listed with an ACTIVE port and its GIDs, and rdma_cm resolving the
# device's address. Usage: test_vsock_info_device.sh VSOCK_INFO
set -u
info=$1
out=$(mktemp /tmp/vsock-info-device.XXXXXX)
trap 'rm -f "$out"' EXIT
failures=0
check() {
  if [ "$2" -eq 0 ]; then echo "ok: $1"; else echo "FAIL: $1"; failures=$((failures + 1)); fi
}
unset $(env | grep -o '^VSOCK_[A-Z_]*')
"$info" >"$out" 2>&1; status=$?
cat "$out"
[ $status = 0 ]; check "exit 0 with a device (got $status)" $?
device=${RXE_VM_DEV:-$(sed -n 's/^  \([^ ]*\) port [0-9]*: ACTIVE.*/\1/p' "$out" | head -1)}
grep -Eq "^  $device port 1: ACTIVE, (Ethernet|InfiniBand), active MTU [0-9]+" "$out"; check "$device port 1 listed ACTIVE with its MTU" $?
grep -q '<- used' "$out"; check "the GID the library uses is marked" $?
# In the guest, $RXE_VM_IPADDR; on a machine with its own device, the used GID's IPv4 address.
addr=${RXE_VM_IPADDR:-$(awk '/<- used/ && $(NF-2) ~ /^[0-9.]+$/ { print $(NF-2); exit }' "$out")}
[ -n "$addr" ] || { echo "FAIL: no IPv4 address to check"; exit 1; }
grep -Eq "gid +[0-9]+ .*RoCE v2 +$addr +<- used" "$out" || [ "$device" != rxe0 ]
check "the used GID is RoCE v2 holding $addr" $?
"$info" --check "$addr:1234" --timeout 3000 >"$out" 2>&1; status=$?
cat "$out"
[ $status = 0 ]; check "--check $addr:1234 exit 0 (got $status)" $?
grep -Eq "^  resolved in [0-9]+ ms: device $device port 1, source address" "$out"; check "--check resolved the address and route" $?
"$info" --check 10.255.255.1:1234 --timeout 1000 >"$out" 2>&1; status=$?
tail -1 "$out"
[ $status = 1 ] && grep -q 'vsock-info: offload not possible: rdma_cm cannot reach 10.255.255.1:1234' "$out"
check "--check of an unroutable address: exit 1 and why" $?
[ $failures = 0 ] && echo "PASS: vsock-info with a device" && exit 0
echo "$failures check(s) failed"
exit 1
