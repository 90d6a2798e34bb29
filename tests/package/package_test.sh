#!/bin/bash
# The Debian package end to end: build it from a copy of the tree with
# dpkg-buildpackage (build/ is not touched), lintian (no errors; warnings are
# printed), dpkg -i, a preloaded TCP pair run from the installed files only,
# the man pages rendered, vsock-stat on the running pair, vsock-info's verdict, then dpkg --purge and a check
# that nothing is left. Usage: package_test.sh SOURCE_DIR
set -uo pipefail
src=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
t0=$SECONDS
[ "$(id -u)" = 0 ] || { echo "SKIPPED: installs a package: needs root"; exit 77; }
for tool in dpkg-buildpackage dh lintian fakeroot man; do
  command -v $tool >/dev/null || { echo "FAIL: $tool missing (bash tools/install-deps.sh)"; exit 1; }
done
for pkg in libvsock libvsock-dev; do
  if dpkg-query -W -f='${Status}' $pkg 2>/dev/null | grep -q 'ok installed'; then
    echo "SKIPPED: $pkg is already installed on this machine; not touching it"
    exit 77
  fi
done
failures=0
check() {  # description, status
  if [ "$2" -eq 0 ]; then echo "ok: $1"; else echo "FAIL: $1"; failures=$((failures + 1)); fi
}
work=$(mktemp -d /tmp/libvsock-package.XXXXXX)
installed=0
cleanup() {
  [ $installed = 1 ] && dpkg --purge libvsock-dev libvsock >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT  # a ctest timeout still purges the package

# 1. Build from a copy: the tree without build outputs and VCS data.
version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
tree=$work/libvsock-${version%-*}
mkdir -p "$tree"
tar -C "$src" --exclude=./build --exclude=./.git --exclude='./obj-*' --exclude=./debian/.debhelper \
  --exclude=./debian/libvsock --exclude=./debian/libvsock-dev --exclude=./debian/tmp -cf - . | tar -C "$tree" -xf -
echo "=== dpkg-buildpackage -us -uc -b (nocheck: the unit tests run in the default preset)"
(cd "$tree" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1
status=$?
[ $status = 0 ] || tail -40 "$work/build.log"
check "dpkg-buildpackage -us -uc -b (exit $status, $((SECONDS - t0)) s)" $status
[ $status = 0 ] || exit 1
arch=$(dpkg --print-architecture)
deb=$work/libvsock_${version}_$arch.deb dev=$work/libvsock-dev_${version}_$arch.deb
changes=$work/libvsock_${version}_$arch.changes
[ -f "$deb" ] && [ -f "$dev" ]; check "built $(cd "$work" && ls ./*.deb | tr '\n' ' ')" $?

# 2. lintian: no errors. Warnings and info are listed, not fatal.
# (Overridden tags, with their reasons, are in debian/*.lintian-overrides.)
lintian --fail-on error --display-level '>=warning' "$changes" >"$work/lintian.log" 2>&1
status=$?
echo "--- lintian (exit $status):"; grep -v '^running with root' "$work/lintian.log"
[ $status = 0 ] && ! grep -q '^E: ' "$work/lintian.log"
check "lintian: no errors ($(grep -c '^W: ' "$work/lintian.log") warnings)" $?

# 3. The files, where Debian wants them.
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
contents=$(dpkg-deb -c "$deb")
for path in ./usr/lib/$multiarch/libvsock.so ./usr/bin/vsock-run ./usr/bin/vsock-info ./usr/bin/vsock-stat \
  ./etc/libvsock.conf ./usr/share/man/man1/vsock-run.1.gz ./usr/share/man/man1/vsock-info.1.gz \
  ./usr/share/man/man1/vsock-stat.1.gz ./usr/share/man/man7/libvsock.7.gz; do
  grep -q " $path\$" <<<"$contents"; check "libvsock holds $path" $?
done
dev_contents=$(dpkg-deb -c "$dev")
grep -q " ./usr/include/vsock/vsock.h\$" <<<"$dev_contents" && grep -q "pkgconfig/libvsock.pc\$" <<<"$dev_contents"
check "libvsock-dev holds vsock.h and libvsock.pc" $?
dpkg-deb -I "$deb" conffiles 2>/dev/null | grep -qx /etc/libvsock.conf; check "/etc/libvsock.conf is a conffile" $?

# 4. Install for real.
dpkg -i "$deb" "$dev" >"$work/install.log" 2>&1
status=$?
[ $status = 0 ] && installed=1
[ $status = 0 ] || cat "$work/install.log"
check "dpkg -i (exit $status)" $status
cmp -s "$src/conf/libvsock.conf" /etc/libvsock.conf; check "/etc/libvsock.conf is conf/libvsock.conf" $?
[ "$(pkg-config --variable=preload libvsock)" = "/usr/lib/$multiarch/libvsock.so" ]
check "pkg-config --variable=preload libvsock" $?
# Rendered from the installed package (man's own lookup, not a path).
for page in 1/vsock-run 1/vsock-info 1/vsock-stat 7/libvsock; do
  err=$(MANWIDTH=80 man --warnings "${page%/*}" "${page#*/}" 2>&1 >"$work/man.txt")
  [ -z "$err" ] && grep -q "^NAME" "$work/man.txt"; check "man ${page#*/}(${page%/*}) renders without warnings${err:+: $err}" $?
done

# 5. A preloaded TCP pair from the installed files only: a clean
# environment, cwd /, vsock-run from /usr/bin with no VSOCK_LIBRARY.
cp "$here/echo_pair.py" "$work/echo_pair.py"
clean_env=(env -i PATH=/usr/bin:/bin HOME=/root TMPDIR=/tmp)
preload=$(cd / && "${clean_env[@]}" /usr/bin/vsock-run sh -c 'echo $LD_PRELOAD')
[ "$preload" = "/usr/lib/$multiarch/libvsock.so" ]; check "installed vsock-run preloads /usr/lib/$multiarch/libvsock.so ($preload)" $?
(cd / && exec "${clean_env[@]}" /usr/bin/vsock-run --stats -- python3 "$work/echo_pair.py" server) \
  >"$work/server.out" 2>"$work/server.err" &
server=$!
for _ in $(seq 100); do [ -s "$work/server.out" ] && break; sleep 0.1; done
port=$(head -1 "$work/server.out")
# The installed vsock-stat sees the waiting server (vsock-run execs it: same pid).
for _ in $(seq 50); do
  (cd / && "${clean_env[@]}" /usr/bin/vsock-stat --once --json -p "$server") >"$work/stat.json" 2>&1 && break
  sleep 0.1
done
python3 -c 'import json,sys; [p]=json.load(open(sys.argv[1]))["processes"]; sys.exit(0 if p["pid"] == int(sys.argv[2]) and any(r["role"] == "listener" for r in p["sockets"]) else 1)' \
  "$work/stat.json" "$server"
check "installed vsock-stat shows the server and its listener" $?
(cd / && timeout 60 "${clean_env[@]}" /usr/bin/vsock-run --stats -- python3 "$work/echo_pair.py" client "$port") \
  >"$work/client.out" 2>"$work/client.err"
status=$?
wait $server
cat "$work/client.out" "$work/client.err" "$work/server.err"
[ $status = 0 ] && grep -q '^echo ok: 1048576 bytes' "$work/client.out"; check "the pair's megabyte came back intact" $?
grep -q 'stats: tcp_sockets=1 ' "$work/client.err" && grep -q 'stats: tcp_sockets=2 ' "$work/server.err"
check "both ends ran the installed library (its counters at exit)" $?

# 6. vsock-info from /usr/bin: its verdict here.
(cd / && "${clean_env[@]}" /usr/bin/vsock-info) >"$work/info.out" 2>&1
status=$?
tail -1 "$work/info.out"
if ls /sys/class/infiniband/*/ports/*/state >/dev/null 2>&1 && grep -q ACTIVE /sys/class/infiniband/*/ports/*/state; then
  [ $status = 0 ]; check "installed vsock-info: offload possible here" $?
else
  [ $status = 1 ] && tail -1 "$work/info.out" | grep -q '^vsock-info: offload not possible: '
  check "installed vsock-info: exit 1 and why, without a device" $?
fi
grep -q "rules file: /etc/libvsock.conf" "$work/info.out"; check "installed vsock-info reads /etc/libvsock.conf" $?

# 7. Purge: nothing left behind.
dpkg --purge libvsock-dev libvsock >"$work/purge.log" 2>&1
status=$?
[ $status = 0 ] && installed=0
check "dpkg --purge (exit $status)" $status
left=""
for path in /usr/lib/$multiarch/libvsock.so /usr/bin/vsock-run /usr/bin/vsock-info /usr/bin/vsock-stat /etc/libvsock.conf \
  /usr/include/vsock /usr/lib/$multiarch/pkgconfig/libvsock.pc /usr/share/man/man7/libvsock.7.gz; do
  [ -e "$path" ] && left="$left $path"
done
[ -z "$left" ] && ! dpkg-query -W libvsock >/dev/null 2>&1; check "purged: no file and no package left${left:+ ($left)}" $?

echo "package test: $((SECONDS - t0)) s"
[ $failures = 0 ] && echo "PASS: package" && exit 0
echo "$failures check(s) failed"
exit 1
