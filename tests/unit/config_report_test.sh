#!/bin/bash
# Under LD_PRELOAD, a bad setting is reported exactly once on stderr (by the
# first socket call of each process that uses sockets), naming
# the variable or file:line, and the program still runs and exits as usual.
set -uo pipefail
preload=$1
tmp=$(mktemp -d /tmp/vsock-config-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "--- stderr:"; cat "$tmp/err"; exit 1; }

# A program that opens sockets (so the library is exercised) and exits 3.
prog=(/usr/bin/python3 -c 'import socket,sys
for _ in range(5): socket.socket().close()
sys.exit(3)')

env LD_PRELOAD="$preload" VSOCK_SPIN_US=fast "${prog[@]}" 2>"$tmp/err"
[ $? = 3 ] || fail "exit status changed"
[ "$(grep -c 'VSOCK_SPIN_US=fast: expected a number' "$tmp/err")" = 1 ] || fail "VSOCK_SPIN_US not reported exactly once"

printf 'set ring_size 3000000\ntcp offload port=99999\n' > "$tmp/bad.conf"
env LD_PRELOAD="$preload" VSOCK_CONFIG="$tmp/bad.conf" "${prog[@]}" 2>"$tmp/err"
[ $? = 3 ] || fail "exit status changed (rules file)"
[ "$(grep -c "$tmp/bad.conf:1: ring_size 3000000: must be a power of two" "$tmp/err")" = 1 ] || fail "file:1 not reported once"
[ "$(grep -c "$tmp/bad.conf:2: bad port" "$tmp/err")" = 1 ] || fail "file:2 not reported once"

env LD_PRELOAD="$preload" VSOCK_LOG_LEVEL=info VSOCK_PROFILE=latency "${prog[@]}" 2>"$tmp/err"
grep -q 'info: libvsock .* loaded, profile latency' "$tmp/err" || fail "profile not applied or not logged"
[ "$(grep -c configuration "$tmp/err")" = 0 ] || fail "good settings reported as bad"
# Reported by the processes that use sockets: a shell running children that
# do not is silent, the one child that does reports once.
env LD_PRELOAD="$preload" VSOCK_SPIN_US=fast /bin/sh -c '/bin/true; /bin/true; "$@"; /bin/true' sh "${prog[@]}" 2>"$tmp/err"
[ "$(grep -c 'VSOCK_SPIN_US=fast' "$tmp/err")" = 1 ] || fail "not reported exactly once in a process tree"
# VSOCK_LOG_FILE: log lines and stats go to the file, not to stderr.
env LD_PRELOAD="$preload" VSOCK_LOG_LEVEL=info VSOCK_STATS=1 VSOCK_LOG_FILE="$tmp/log" "${prog[@]}" 2>"$tmp/err"
grep -q 'info: libvsock .* loaded' "$tmp/log" || fail "VSOCK_LOG_FILE did not receive the log"
grep -q 'stats: tcp_sockets=5' "$tmp/log" || fail "VSOCK_LOG_FILE did not receive the stats"
[ ! -s "$tmp/err" ] || fail "log lines still on stderr with VSOCK_LOG_FILE"
env LD_PRELOAD="$preload" VSOCK_LOG_FILE=/nonexistent/dir/log "${prog[@]}" 2>"$tmp/err"
[ $? = 3 ] || fail "exit status changed (bad log file)"
[ "$(grep -c 'VSOCK_LOG_FILE=/nonexistent/dir/log: cannot open' "$tmp/err")" = 1 ] || fail "bad log file not reported once"
echo "configuration errors are reported once and never stop the program"
