#!/bin/bash
# on_device_address.sh CMD...: runs CMD with VSOCK_TEST_ADDR set to the
# address the upgrade tests use (the Soft-RoCE VM's RXE_VM_IPADDR inside the
# VM; see upgrade_test_lib.sh), from /tmp (not the VM's 9p share).
source "$(dirname "$0")/upgrade_test_lib.sh"
VSOCK_TEST_ADDR=$(ut_address)
export VSOCK_TEST_ADDR
echo "VSOCK_TEST_ADDR=$VSOCK_TEST_ADDR"
cd /tmp || exit 1
exec "$@"
