#!/usr/bin/env bash
# Unit test of tools/vsock-run. Usage: test_vsock_run.sh VSOCK_RUN LIBVSOCK_SO [BUILD_TREE_VSOCK_RUN]
set -u
run=$1 lib=$2 built_run=${3:-}
failures=0
check() {  # description, then a condition already evaluated as $?
  if [ "$2" -eq 0 ]; then echo "ok: $1"; else echo "FAIL: $1"; failures=$((failures + 1)); fi
}
export TMPDIR=/tmp ASAN_OPTIONS=detect_leaks=0
unset LD_PRELOAD VSOCK_PROFILE VSOCK_STATS VSOCK_LOG_LEVEL
# A sanitizer build of the library needs its runtime preloaded ahead of it.
rt=$(ldd "$lib" 2>/dev/null | awk '/lib(a|t|ub)san\.so/ { print $3; exit }')
first=""
[ -n "$rt" ] && first="$rt:"

out=$("$run" --help 2>&1)
check "--help exits 0 and prints usage" $(($? != 0 || ${#out} == 0))
[[ "$out" == *"Usage: vsock-run"*"--profile"* ]]; check "--help names the options" $?

out=$(VSOCK_LIBRARY=$lib "$run" --profile bogus true 2>&1)
status=$?
check "--profile bogus fails (status $status)" $((status == 0))
[[ "$out" == *"unknown profile 'bogus'"*"latency, throughput or default"* ]]
check "--profile bogus says why: $out" $?

out=$(VSOCK_LIBRARY=$lib "$run" --frobnicate true 2>&1); status=$?
[[ $status -ne 0 && "$out" == *"unknown option '--frobnicate'"* ]]; check "unknown option rejected" $?
out=$(VSOCK_LIBRARY=$lib "$run" 2>&1); status=$?
[[ $status -ne 0 && "$out" == *"no program given"* ]]; check "missing program rejected" $?

out=$(LD_PRELOAD=$rt VSOCK_LIBRARY=$lib "$run" /bin/sh -c 'echo $LD_PRELOAD' 2>&1)
[ "$out" = "$first$lib" ]; check "LD_PRELOAD is the library ($out)" $?

other=$(ls /lib/x86_64-linux-gnu/libm.so.6 2>/dev/null || echo /lib64/libm.so.6)
out=$(LD_PRELOAD="$rt $other" VSOCK_LIBRARY=$lib "$run" /bin/sh -c 'echo $LD_PRELOAD' 2>&1)
[ "$out" = "$first$lib:$other" ]; check "library prepended to an existing LD_PRELOAD ($out)" $?

out=$(VSOCK_LIBRARY=$lib LD_PRELOAD=$rt "$run" --profile latency --stats --log-level=warn /bin/sh -c \
  'echo $VSOCK_PROFILE $VSOCK_STATS $VSOCK_LOG_LEVEL' 2>/dev/null)
[ "$out" = "latency 1 warn" ]; check "options become VSOCK_ variables ($out)" $?

# Installed layout: PREFIX/bin/vsock-run finds PREFIX/lib/libvsock.so.
prefix=$(mktemp -d /tmp/vsock-run-test.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
mkdir -p "$prefix/bin" "$prefix/lib"
cp "$run" "$prefix/bin/vsock-run"
ln -s "$lib" "$prefix/lib/libvsock.so"
out=$(env -u VSOCK_LIBRARY LD_PRELOAD=$rt "$prefix/bin/vsock-run" /bin/sh -c 'echo $LD_PRELOAD' 2>&1)
[ "$out" = "$first$(readlink -f "$lib")" ]; check "installed layout finds ../lib/libvsock.so ($out)" $?

# The build tree's copy (CMake's bin/) finds the library in lib/ beside it.
if [ -n "$built_run" ]; then
  out=$(env -u VSOCK_LIBRARY LD_PRELOAD=$rt "$built_run" /bin/sh -c 'echo $LD_PRELOAD' 2>&1)
  [ "$out" = "$first$(readlink -f "$lib")" ]; check "build tree's bin/vsock-run finds lib/libvsock.so ($out)" $?
fi

# A copy configured for an install elsewhere finds the library there.
other_prefix=$(mktemp -d /tmp/vsock-run-test.XXXXXX)
mkdir -p "$other_prefix/bin" "$other_prefix/lib/triplet"
ln -s "$lib" "$other_prefix/lib/triplet/libvsock.so"
sed "s|@VSOCK_INSTALLED_LIBRARY@|$other_prefix/lib/triplet/libvsock.so|" "$run" >"$other_prefix/bin/vsock-run"
out=$(env -u VSOCK_LIBRARY LD_PRELOAD=$rt bash "$other_prefix/bin/vsock-run" /bin/sh -c 'echo $LD_PRELOAD' 2>&1)
[ "$out" = "$first$(readlink -f "$lib")" ]; check "installed copy finds its configured library directory ($out)" $?
rm -rf "$other_prefix"

[ "$failures" -eq 0 ] && echo "PASS: vsock-run" && exit 0
echo "$failures check(s) failed"
exit 1
