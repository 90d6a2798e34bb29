#!/bin/bash
# Every setting the library knows is documented in docs/configuration.md and
# every VSOCK_ variable the docs mention is one the library knows.
set -euo pipefail
src=$1
names=$(sed -n '/kSettingNames\[\] = {/,/};/p' "$src/src/core/settings.cpp" | grep -o '"[a-z_]*"' | tr -d '"')
[ -n "$names" ] || { echo "could not read setting names from settings.cpp"; exit 1; }
rc=0
for n in $names; do
  grep -q "^| \`$n\` |" "$src/docs/configuration.md" || { echo "setting $n is not documented"; rc=1; }
done
for v in $(grep -o 'VSOCK_[A-Z_]*' "$src/docs/configuration.md" | sort -u); do
  case $v in VSOCK_|VSOCK_CONFIG) continue;; esac
  n=$(echo "${v#VSOCK_}" | tr 'A-Z' 'a-z')
  grep -qx "$n" <<<"$names" || { echo "docs mention $v, which the library does not know"; rc=1; }
done
[ $rc = 0 ] && echo "$(echo "$names" | wc -w) settings, all documented"
exit $rc
