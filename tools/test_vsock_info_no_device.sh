#!/bin/bash
# vsock-info on a machine without a verbs device: exit 1 and one line saying
# why; the configuration with each value's origin; the rules that apply.
# Usage: test_vsock_info_no_device.sh VSOCK_INFO
set -u
info=$1
for state in /sys/class/infiniband/*/ports/*/state; do
  [ -r "$state" ] && grep -q ACTIVE "$state" && { echo "SKIPPED: this machine has a verbs device"; exit 77; }
done
failures=0
check() {  # description, status of the check
  if [ "$2" -eq 0 ]; then echo "ok: $1"; else echo "FAIL: $1"; failures=$((failures + 1)); fi
}
dir=$(mktemp -d /tmp/vsock-info-test.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/rules.conf" <<'CONF'
# test rules
profile latency
set spin_us 77
tcp kernel port=22
tcp offload program=redis-server role=server port=6379
tcp kernel program=redis-server port=6379-6380
udp kernel addr=10.0.0.0/8
set bogus 1
CONF
unset $(env | grep -o '^VSOCK_[A-Z_]*')
export VSOCK_CONFIG=$dir/rules.conf VSOCK_INLINE_SIZE=99

"$info" --rules /usr/bin/redis-server 6379 >"$dir/out" 2>"$dir/err"
status=$?
cat "$dir/out" "$dir/err"
[ $status = 1 ]; check "exit status 1 without a device (got $status)" $?
[ "$(wc -l <"$dir/err")" = 1 ] && grep -q '^vsock-info: offload not possible: no verbs device' "$dir/err"
check "one line on stderr says why" $?
grep -q '^devices:' "$dir/out" && grep -q '^  none: no verbs device' "$dir/out"; check "device section says none" $?
grep -q '^memlock:' "$dir/out" && grep -q 'one connection pins about' "$dir/out" && grep -q 'RLIMIT_MEMLOCK' "$dir/out"
check "memlock section" $?
grep -Eq "^  profile +latency +$dir/rules.conf:2\$" "$dir/out"; check "profile from the file's line 2" $?
grep -Eq "^  spin_us +77 +$dir/rules.conf:3\$" "$dir/out"; check "spin_us from the file's line 3" $?
grep -Eq '^  inline_size +99 +env VSOCK_INLINE_SIZE$' "$dir/out"; check "inline_size from the environment" $?
grep -Eq '^  ring_size +1048576 +profile latency$' "$dir/out"; check "ring_size from the latency profile" $?
grep -Eq '^  upgrade_timeout_ms +200 +default$' "$dir/out"; check "upgrade_timeout_ms is the default" $?
grep -q "problem: $dir/rules.conf:8: unknown setting 'bogus'" "$dir/out"; check "bad line reported as file:line" $?
grep -q "^  tcp: $dir/rules.conf:5  tcp offload program=redis-server role=server port=6379   (only sockets" "$dir/out" &&
  grep -q "^  tcp: $dir/rules.conf:6  tcp kernel program=redis-server port=6379-6380\$" "$dir/out" &&
  ! grep -q "rules.conf:4" "$dir/out"
check "--rules: the conditional rule, then the one that decides; not the port 22 rule" $?
grep -q '^  udp: otherwise: offload (setting udp, default)$' "$dir/out"; check "--rules: udp falls to the setting" $?

VSOCK_RING_SIZE=1073741824 "$info" >"$dir/out" 2>&1
grep -q 'one connection pins about 2048' "$dir/out" || grep -q 'one connection pins about 2.0' "$dir/out"
check "memlock need follows ring_size (1 GiB ring: about 2 GiB)" $?

"$info" 2>&1 | grep -q "^  up to [0-9.]* MiB when the peer's ring is the largest accepted" &&
  ! VSOCK_PROFILE=throughput VSOCK_CONFIG= "$info" 2>&1 | grep -q "^  up to "
check "memlock: the worst case when a peer may declare a larger ring (not with the largest profile ring)" $?

VSOCK_CONFIG=$dir/missing.conf "$info" >"$dir/out" 2>&1
grep -q "^configuration (rules file: none (VSOCK_CONFIG=$dir/missing.conf cannot be read)):" "$dir/out" &&
  grep -q "problem: VSOCK_CONFIG=$dir/missing.conf: cannot read the file; using defaults" "$dir/out"
check "an unreadable VSOCK_CONFIG is named, as the library reports it" $?

"$info" --check 192.0.2.7:6379 >"$dir/out" 2>"$dir/err"; status=$?
[ $status = 1 ] && grep -q 'no verbs device' "$dir/err"; check "--check without a device: still exit 1, same reason" $?
"$info" --check 192.0.2.7 >/dev/null 2>"$dir/err"; status=$?
[ $status = 2 ] && grep -q 'needs ADDR:PORT' "$dir/err"; check "--check without a port is a usage error ($status)" $?
"$info" --rules redis >/dev/null 2>&1; [ $? = 2 ]; check "--rules without a port is a usage error" $?
"$info" --help | grep -q 'Exit status: 0 offload possible'; check "--help describes the exit status" $?

[ $failures = 0 ] && echo "PASS: vsock-info without a device" && exit 0
echo "$failures check(s) failed"
exit 1
