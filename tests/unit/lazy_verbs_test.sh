#!/bin/bash
# libvsock.so loads libibverbs and librdmacm at the device probe, not at
# start (src/rdma/verbs_loader.hpp): neither is in its NEEDED list, and a
# preloaded process that makes no socket maps neither (nor libnl-3, which
# they bring). A verbs or rdma_cm call added to the library without its
# definition in verbs_lazy.cpp brings the NEEDED entry back: this fails.
set -uo pipefail
library=$1 preload=$2
needed=$(readelf -d "$library" | grep NEEDED) || { echo "FAIL: readelf -d $library"; exit 1; }
echo "$needed"
if grep -qE 'libibverbs|librdmacm' <<<"$needed"; then
  echo "FAIL: libvsock.so links libibverbs or librdmacm (a call missing from src/rdma/verbs_lazy.cpp?)"
  exit 1
fi
maps=$(env LD_PRELOAD="$preload" /bin/cat /proc/self/maps) || { echo "FAIL: the preloaded cat failed"; exit 1; }
grep -q 'libvsock' <<<"$maps" || { echo "FAIL: libvsock.so is not mapped into the preloaded cat"; exit 1; }
if grep -E 'libibverbs|librdmacm|libnl-' <<<"$maps"; then
  echo "FAIL: a process that made no socket mapped the verbs libraries"
  exit 1
fi
echo "ok: neither libibverbs nor librdmacm linked or mapped at start"
