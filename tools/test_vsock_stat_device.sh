#!/bin/bash
# vsock-stat where a verbs device exists (run through tests/rxe/with-device.sh
# and tests/upgrade/on_device_address.sh, so in the Soft-RoCE guest on a
# machine without one): a preloaded echo server under load from a preloaded
# client (tools/vsock_stat_pair.py, 4 connections of 4 KiB round trips, until
# the test has looked) shows
# its upgraded connections with RDMA counters that grow between two looks;
# once the load is over, the totals vsock-stat reads equal the ones the
# server prints at exit with VSOCK_STATS=1 (nothing moves in between), and
# the segment is gone after the exit.
# Usage: test_vsock_stat_device.sh VSOCK_STAT PRELOAD
set -u
stat=$1
preload=$2
here=$(cd "$(dirname "$0")" && pwd)
pair=$here/vsock_stat_pair.py
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
# RDMA bytes (at most 60 looks, 0.5 s apart).
live=1
first=""
for ((i = 0; i < 60; i++)); do
  "$stat" --once --json -p "$spid" >"$work/look.json" 2>/dev/null || { sleep 0.5; continue; }
  now=$(python3 - "$work/look.json" <<'PY'
import json, sys
[p] = json.load(open(sys.argv[1]))["processes"]
rdma = [r for r in p["sockets"] if r["role"] == "accepted" and r["path"] == "rdma"]
if len(rdma) == 4 and all(r["rdma_bytes_received"] > 0 for r in rdma):
    print(" ".join(f'{r["peer"]}={r["rdma_bytes_received"]}' for r in sorted(rdma, key=lambda r: r["peer"])))
PY
)
  if [ -n "$now" ] && [ -z "$first" ]; then
    first=$now
    cp "$work/look.json" "$work/first.json"
  elif [ -n "$now" ]; then
    python3 - "$first" "$now" <<'PY' && { live=0; break; }
import sys
a = dict(x.split("=") for x in sys.argv[1].split())
b = dict(x.split("=") for x in sys.argv[2].split())
sys.exit(0 if a.keys() == b.keys() and all(int(b[k]) > int(a[k]) for k in a) else 1)
PY
  fi
  kill -0 "$client" 2>/dev/null || break
  sleep 0.5
done
[ -n "$first" ] || python3 -c 'import json,sys; [print("  last look:", r["role"], r["path"], r["kernel_reason"], r["rdma_bytes_received"]) for r in json.load(open(sys.argv[1]))["processes"][0]["sockets"]]' "$work/look.json" 2>/dev/null
echo "  first look: $first"
echo "  later look: ${now:-}"
[ $live = 0 ]; check "4 accepted connections on rdma, each one's rdma_bytes_received growing between two looks" $?
python3 - "$work/first.json" "$addr" "$port" <<'PY'; check "live rows: their 4-tuples, RDMA bytes both ways, the listener" $?
import json, sys
[p] = json.load(open(sys.argv[1]))["processes"]
addr, port = sys.argv[2], sys.argv[3]
rows = [r for r in p["sockets"] if r["role"] == "accepted" and r["path"] == "rdma"]
for r in rows:
    assert r["local"] == f"{addr}:{port}" and r["peer"].startswith(addr + ":"), r
    assert r["rdma_bytes_sent"] > 0 and r["kernel_reason"] == "", r
assert p["totals"]["upgrades_done"] >= 4, p["totals"]
assert [r for r in p["sockets"] if r["role"] == "listener" and r["path"] == "listening"], p["sockets"]
print("  e.g.", rows[0])
PY

touch "$work/client-stop"
wait "$client"
status=$?
[ $status = 0 ] && grep -q '^ECHOED [1-9]' "$work/client.out"
check "the client echoed until told to stop ($(tr '\n' ' ' <"$work/client.out"))" $?

# Settled: two looks in a row with the same totals (at most 40, 0.25 s apart).
settled=1
previous=""
for ((i = 0; i < 40; i++)); do
  "$stat" --once --json -p "$spid" >"$work/final.json" 2>/dev/null || break
  totals=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["processes"][0]["counters"])' "$work/final.json")
  [ "$totals" = "$previous" ] && { settled=0; break; }
  previous=$totals
  sleep 0.25
done
[ $settled = 0 ]; check "the server's counters settle once the load is over" $?

touch "$work/stop"
for ((i = 0; i < 300; i++)); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
wait "$server"
status=$?
[ $status = 0 ]; check "the server exits 0 (got $status)" $?
python3 - "$work/final.json" "$work/server.log" "$spid" <<'PY'; check "vsock-stat's totals equal the server's VSOCK_STATS=1 line at exit" $?
import json, re, sys
[p] = json.load(open(sys.argv[1]))["processes"]
# The server's own line (timeout(1), preloaded too, prints one of its own).
line = [l for l in open(sys.argv[2]) if l.startswith(f"libvsock[{sys.argv[3]}]: stats: ")][-1]
at_exit = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}
keys = ["rdma_bytes_sent", "rdma_bytes_received", "rdma_sends", "rdma_receives", "tcp_bytes_sent",
        "tcp_bytes_received", "upgrades_done", "upgrade_attempts", "tcp_sockets"]
for k in keys:
    print(f"  {k}: vsock-stat {p['counters'][k]}, at exit {at_exit[k]}")
assert all(p["counters"][k] == at_exit[k] for k in keys)
assert at_exit["rdma_bytes_received"] > 0 and at_exit["upgrades_done"] >= 4
PY
[ ! -e "$XDG_RUNTIME_DIR/libvsock/$spid.stat" ]; check "the server's segment is gone after its exit" $?

[ $failures = 0 ] && echo "PASS: vsock-stat with a device" && exit 0
echo "$failures check(s) failed"
exit 1
