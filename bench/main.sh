#!/bin/bash
# The main job (README, first command): installs what is missing, builds, and
# runs an unmodified program pair (bench/vsock_bench server + client) over
# kernel TCP, with libvsock and with rsocket's librspreload.so, next to raw
# verbs (perftest), side by side, printing one table.
# It runs where a verbs device is (the Soft-RoCE VM of tests/rxe/ on a
# machine without RDMA), on the device's address; with no way to get a
# device it says so and measures on loopback.
#   bench/main.sh [--host]     (--host: skip the VM, measure kernel vs libvsock on
#                               loopback here)
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

# Inside the VM: the four columns side by side on rxe0 -- kernel TCP,
# libvsock, rsocket (librspreload.so) and raw verbs (perftest) -- TCP
# ping-pong and streaming at 64 B .. 1 MiB; few rounds, the guest is emulated
# (TCG) and slow (about 6 minutes). Every VSOCK_BENCH_* knob can be overridden.
inner='ulimit -l unlimited 2>/dev/null
export VSOCK_BENCH_ADDR=$RXE_VM_IPADDR \
  VSOCK_BENCH_COLUMNS=${VSOCK_BENCH_COLUMNS:-kernel libvsock rsocket verbs} \
  VSOCK_BENCH_RATIOS=${VSOCK_BENCH_RATIOS:-libvsock/kernel libvsock/verbs libvsock/rsocket rsocket/verbs} \
  VSOCK_BENCH_TESTS=${VSOCK_BENCH_TESTS:-tcp-lat tcp-tput} \
  VSOCK_BENCH_LAT_SIZES=${VSOCK_BENCH_LAT_SIZES:-64 4096 65536 1048576} \
  VSOCK_BENCH_TPUT_SIZES=${VSOCK_BENCH_TPUT_SIZES:-64 4096 65536 1048576} \
  VSOCK_BENCH_REPEAT=${VSOCK_BENCH_REPEAT:-3} VSOCK_BENCH_TPUT_REPEAT=${VSOCK_BENCH_TPUT_REPEAT:-3} \
  VSOCK_BENCH_ITERS=${VSOCK_BENCH_ITERS:-300} VSOCK_BENCH_SECONDS=${VSOCK_BENCH_SECONDS:-2} \
  VSOCK_BENCH_TPUT_SECONDS=${VSOCK_BENCH_TPUT_SECONDS:-1}
src=$PWD
cd /tmp || exit 1
echo "== ${VSOCK_BENCH_COLUMNS// / vs } on ${RXE_VM_DEV:-rxe0} (GID index ${RXE_VM_GID_INDEX:-?}) at $VSOCK_BENCH_ADDR"
bash "$src/bench/run.sh" "$src/build/default"'
export VSOCK_RXE_TIMEOUT=${VSOCK_RXE_TIMEOUT:-900}
bash tests/rxe/with-device.sh bash -c "$inner"
rc=$?
if [ $rc = 77 ]; then
  echo "main: no verbs device could be had (see above); measuring on loopback instead" >&2
  exec bash bench/run.sh build/default
fi
exit $rc
