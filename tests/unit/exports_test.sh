#!/bin/bash
# libvsock.so must export exactly the symbols listed in preload/libvsock.map:
# every interposed call and the vsock_* API, nothing else.
set -euo pipefail
lib=$1 map=$2
expected=$(perl -0pe 's#/\*.*?\*/##gs' "$map" | tr ' ;' '\n\n' | grep -E '^[A-Za-z_][A-Za-z0-9_]*$' |
           grep -vx -e global -e local | sort -u)
actual=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u)
if [ "$expected" != "$actual" ]; then
  echo "exported symbols differ from $map:"
  diff <(echo "$expected") <(echo "$actual") || true
  exit 1
fi
echo "libvsock.so exports $(echo "$actual" | wc -l) symbols, as listed in $(basename "$map")"
for required in socket accept4 recvmmsg epoll_pwait2 __recvfrom_chk __ppoll_chk sendfile64 vfork daemon; do
  grep -qx "$required" <<<"$actual" || { echo "missing required symbol $required"; exit 1; }
done
