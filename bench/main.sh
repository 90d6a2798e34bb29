#!/bin/bash
# The main job (README, first command): installs what is missing, builds, and
# runs an unmodified program pair (bench/vsock_bench server + client) without
# and with libvsock, side by side, printing the kernel-vs-libvsock table.
# It runs where a verbs device is (the Soft-RoCE VM of tests/rxe/ on a
# machine without RDMA), on the device's address; with no way to get a
# device it says so and measures on loopback.
#   bench/main.sh [--host]     (--host: skip the VM, measure on loopback here)
set -uo pipefail
cd "$(dirname "$0")/.."
export TMPDIR=/tmp
bash tools/install-deps.sh || exit 1
cmake --preset default >/dev/null && cmake --build --preset default -j"$(nproc)" >/tmp/libvsock-build-main.log 2>&1 ||
  { tail -40 /tmp/libvsock-build-main.log; echo "main: build failed" >&2; exit 1; }

if [ "${1:-}" = --host ]; then
  echo "== kernel vs libvsock on loopback (no verbs device used)"
  exec bash bench/run.sh build/default
fi

# Inside the VM: fewer rounds, the guest is emulated (TCG) and slow.
inner='export VSOCK_BENCH_ADDR=$RXE_VM_IPADDR VSOCK_BENCH_REPEAT=${VSOCK_BENCH_REPEAT:-5} \
  VSOCK_BENCH_TPUT_REPEAT=${VSOCK_BENCH_TPUT_REPEAT:-3}
echo "== kernel vs libvsock on $(cat /sys/class/infiniband/*/ports/1/../../node_desc 2>/dev/null | head -1 || echo rxe) at $VSOCK_BENCH_ADDR"
bash bench/run.sh build/default'
bash tests/rxe/with-device.sh bash -c "$inner"
rc=$?
if [ $rc = 77 ]; then
  echo "main: no verbs device could be had (see above); measuring on loopback instead" >&2
  exec bash bench/run.sh build/default
fi
exit $rc
