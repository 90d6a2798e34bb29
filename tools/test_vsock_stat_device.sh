#!/bin/bash
# vsock-stat where a verbs device exists (run through tests/rxe/with-device.sh
# and tests/upgrade/on_device_address.sh, so in the Soft-RoCE guest on a
# machine without one): a preloaded echo server under load from a preloaded
# client (tools/vsock_stat_pair.py, 4 connections of 4 KiB round trips, until
# the test has looked) shows
# its upgraded connections with RDMA counters that grow both ways between two looks;
# once the load is over, the totals vsock-stat reads equal the ones the
# server prints at exit with VSOCK_STATS=1 (nothing moves in between), and
# the segment is gone after the exit.
# Usage: test_vsock_stat_device.sh VSOCK_STAT PRELOAD
set -u
stat=$1
preload=$2
here=$(cd "$(dirname "$0")" && pwd)
pair=$here/vsock_stat_pair.py
looks=$here/vsock_stat_looks.py  # the looks through vsock-stat, shared with tests/apps
addr=${VSOCK_TEST_ADDR:-${RXE_VM_IPADDR:-}}
[ -n "$addr" ] || { echo "SKIPPED: no device address (VSOCK_TEST_ADDR or RXE_VM_IPADDR)"; exit 77; }
ulimit -l unlimited 2>/dev/null
work=$(mktemp -d /tmp/vsock-stat-device.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
unset $(env | grep -o '^VSOCK_[A-Z_]*')
export XDG_RUNTIME_DIR=$work/run  # the guest's own, never the host's (the VM shares the environment)
mkdir -m 700 "$XDG_RUNTIME_DIR"
# Under emulation an upgrade takes longer than the default bound (as in
# tests/apps/app_test_lib.sh); a first one timed out would leave the peer
# cached and every later connection on TCP.
export VSOCK_UPGRADE_TIMEOUT_MS=${VSOCK_TEST_UPGRADE_TIMEOUT_MS:-10000}
python=/usr/bin/python3  # not a wrapper (pyenv shims fork and exec under the preload)
failures=0
check() {
  if [ "$2" -eq 0 ]; then echo "ok: $1"; else echo "FAIL: $1"; failures=$((failures + 1)); fi
}
# The load ends when the test has seen it (client-stop), or after this many
# seconds of the guest's clock, which jumps when the emulator is starved.
seconds=${VSOCK_STAT_LOAD_SECONDS:-300}

env LD_PRELOAD="$preload" VSOCK_STATS=1 VSOCK_LOG_FILE="$work/server.log" \
  timeout -k 5 600 "$python" -u "$pair" server "$addr" "$work/stop" >"$work/server.out" 2>&1 &
server=$!
pids+=("$server")
port=""
for ((i = 0; i < 600; i++)); do
  port=$(sed -n 's/^READY //p' "$work/server.out")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "FAIL: the server did not start: $(cat "$work/server.out")"; exit 1; }
# The server's pid is python's (timeout forks it): the segment names it.
spid=""
for ((i = 0; i < 300; i++)); do
  spid=$(ls "$XDG_RUNTIME_DIR/libvsock" 2>/dev/null | sed -n 's/^\([0-9]*\)\.stat$/\1/p' | head -1)
  [ -n "$spid" ] && break
  sleep 0.1
done
[ -n "$spid" ]; check "the server published a segment (pid $spid)" $?
echo "server $addr:$port, pid $spid"

env LD_PRELOAD="$preload" VSOCK_STATS=1 VSOCK_LOG_FILE="$work/client.log" \
  timeout -k 5 400 "$python" -u "$pair" client "$addr" "$port" 4 "$seconds" "$work/client-stop" >"$work/client.out" 2>&1 &
client=$!
pids+=("$client")
# Connecting and upgrading take seconds under emulation: the timed load
# starts once every connection has carried a message.
for ((i = 0; i < 1200; i++)); do
  grep -q '^CONNECTED' "$work/client.out" && break
  kill -0 "$client" 2>/dev/null || break
  sleep 0.1
done
grep -q '^CONNECTED' "$work/client.out"; check "the client connected ($(tr '\n' ' ' <"$work/client.out"))" $?

# Live: two looks at the same upgraded connections, the second with more
# RDMA bytes both ways (at most 60 looks, 0.5 s apart).
"$python" "$looks" live "$stat" "$spid" 4 "$work/first.json" "$client"
check "4 accepted connections on rdma, each one's RDMA bytes growing between two looks" $?
"$python" "$looks" rows "$work/first.json" "$addr" "$port" 4
check "live rows: their 4-tuples, RDMA bytes both ways, the listener" $?

touch "$work/client-stop"
wait "$client"
status=$?
[ $status = 0 ] && grep -q '^ECHOED [1-9]' "$work/client.out"
check "the client echoed until told to stop ($(tr '\n' ' ' <"$work/client.out"))" $?

# Settled: two looks in a row with the same counters (at most 40, 0.25 s apart).
"$python" "$looks" settle "$stat" "$spid" "$work/final.json" 40
check "the server's counters settle once the load is over" $?

touch "$work/stop"
for ((i = 0; i < 300; i++)); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
wait "$server"
status=$?
[ $status = 0 ]; check "the server exits 0 (got $status)" $?
# The server's own line (timeout(1), preloaded too, prints one of its own).
"$python" "$looks" at-exit "$work/final.json" "$work/server.log" "$spid" 4
check "vsock-stat's totals equal the server's VSOCK_STATS=1 line at exit" $?
[ ! -e "$XDG_RUNTIME_DIR/libvsock/$spid.stat" ]; check "the server's segment is gone after its exit" $?

[ $failures = 0 ] && echo "PASS: vsock-stat with a device" && exit 0
echo "$failures check(s) failed"
exit 1
