#!/bin/bash
# vsock-stat on the host, no device needed (loopback TCP stays on the
# kernel): a preloaded process is seen by `vsock-stat --once --json -p PID`
# with its TCP counters and its sockets; its segment is owner-only and holds
# no fd of the application; a fork child publishes its own; the segment
# goes at exit; a killed process's segment and one whose pid belongs to
# another process are removed by the next vsock-stat; VSOCK_STATS_SHM=0
# publishes nothing; /dev/shm is the fallback without XDG_RUNTIME_DIR.
# Usage: test_vsock_stat.sh VSOCK_STAT PRELOAD
set -u
stat=$1
preload=$2
here=$(cd "$(dirname "$0")" && pwd)
pair=$here/vsock_stat_pair.py
work=$(mktemp -d /tmp/vsock-stat-test.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$work" "/dev/shm/libvsock-$(id -u)/$$.stat"
}
trap cleanup EXIT
unset $(env | grep -o '^VSOCK_[A-Z_]*')
export XDG_RUNTIME_DIR=$work/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
dir=$XDG_RUNTIME_DIR/libvsock
failures=0
check() {
  if [ "$2" -eq 0 ]; then echo "ok: $1"; else echo "FAIL: $1"; failures=$((failures + 1)); fi
}
# wait_for CMD...: true once CMD succeeds, checked every 0.1 s for 30 s at most.
wait_for() {
  local i
  for ((i = 0; i < 300; i++)); do "$@" && return 0; sleep 0.1; done
  return 1
}
# start NAME [ENV...] -- ARGS: a preloaded pair; PID and PORT of it.
start_pair() {
  local name=$1
  shift
  rm -f "$work/stop-$name"
  env LD_PRELOAD="$preload" "$@" /usr/bin/python3 -u "$pair" pair "$work/stop-$name" ${MODE:-plain} >"$work/$name.out" 2>&1 &
  PID=$!
  pids+=("$PID")
  wait_for grep -q '^READY' "$work/$name.out" || { echo "FAIL: $name did not start: $(cat "$work/$name.out")"; exit 1; }
  PORT=$(sed -n 's/^READY //p' "$work/$name.out")
}
stop_pair() {
  touch "$work/stop-$1"
  wait_for bash -c "! kill -0 $2 2>/dev/null"
}

# --- a process and what vsock-stat sees of it ---------------------------
MODE=fork start_pair main
child=$(sed -n 's/^CHILD //p' "$work/main.out")
seg=$dir/$PID.stat
wait_for test -e "$seg"; check "segment $seg created" $?
[ "$(stat -c %a "$seg")" = 600 ]; check "segment mode 0600 (got $(stat -c %a "$seg"))" $?
[ "$(stat -c %a "$dir")" = 700 ]; check "directory mode 0700" $?
! ls -l "/proc/$PID/fd" | grep -q 'libvsock'; check "no fd of the segment left open in the application" $?
"$stat" --once --json -p "$PID" >"$work/one.json" 2>"$work/one.err"; status=$?
[ $status = 0 ]; check "vsock-stat --once --json -p PID exit 0 (got $status: $(cat "$work/one.err"))" $?
python3 - "$work/one.json" "$PID" "$PORT" <<'PY'; check "JSON: counters, totals and the three sockets with their TCP bytes" $?
import json, sys
doc = json.load(open(sys.argv[1]))
pid, port = int(sys.argv[2]), int(sys.argv[3])
assert doc["format"] == 1, doc
[p] = doc["processes"]
assert p["pid"] == pid and p["program"].startswith("python3") and p["fresh"] is True, p
c, t = p["counters"], p["totals"]
assert c["tcp_bytes_sent"] == 105000 and c["tcp_bytes_received"] == 105000, c
assert c["tcp_sockets"] >= 3 and c["kernel_no_device"] >= 3, c
assert t["kernel_bytes_sent"] == 105000 and t["rdma_bytes_sent"] == 0, t
assert t["kernel_reasons"]["no_device"] == c["kernel_no_device"], t
rows = {r["role"]: r for r in p["sockets"] if r["protocol"] == "tcp"}
assert rows["listener"]["path"] == "listening" and rows["listener"]["local"] == f"127.0.0.1:{port}", rows
cl, ac = rows["client"], rows["accepted"]
assert cl["peer"] == f"127.0.0.1:{port}" and ac["local"] == f"127.0.0.1:{port}", rows
assert cl["path"] == "kernel" and cl["kernel_reason"] == "no_device", cl
assert cl["tcp_bytes_sent"] == 100000 and cl["tcp_bytes_received"] == 5000, cl
assert ac["tcp_bytes_sent"] == 5000 and ac["tcp_bytes_received"] == 100000, ac
assert p["sockets_seen"] == len(p["sockets"]) == 3, p
print("  seen:", {k: (v["path"], v["tcp_bytes_sent"], v["tcp_bytes_received"]) for k, v in rows.items()})
PY
"$stat" --once --json -p "$PID" >"$work/two.json"
python3 -c 'import json,sys; a,b=(json.load(open(f))["processes"][0]["publish_count"] for f in sys.argv[1:]); sys.exit(0 if b > a else 1)' \
  "$work/one.json" "$work/two.json"
check "each vsock-stat gets a fresh publication (publish_count grows)" $?
"$stat" --once -p "$PID" >"$work/text.out"; status=$?
[ $status = 0 ] && grep -q "^pid $PID  python3" "$work/text.out" && grep -q "kernel  *no_device" "$work/text.out"
check "text output: the process and its rows" $?
"$stat" -n 2 -i 0.2 --json -p "$PID" >"$work/two-docs.json"
[ "$(python3 -c 'import json,sys; print(sum(1 for l in open(sys.argv[1]) if json.loads(l)["processes"]))' "$work/two-docs.json")" = 2 ]
check "-n 2 -i 0.2: two JSON documents" $?

# --- the fork child --------------------------------------------------------
wait_for test -e "$dir/$child.stat"; check "the fork child ($child) has its own segment" $?
"$stat" --once --json >"$work/all.json"
python3 - "$work/all.json" "$PID" "$child" <<'PY'; check "both processes listed, each segment naming its own pid" $?
import json, sys
doc = json.load(open(sys.argv[1]))
pids = sorted(p["pid"] for p in doc["processes"])
assert pids == sorted([int(sys.argv[2]), int(sys.argv[3])]), [(p["pid"], p["program"], p.get("segment")) for p in doc["processes"]]
for p in doc["processes"]:
    assert p["segment"].endswith(f"/{p['pid']}.stat"), p
PY

# --- a segment whose pid is another (live) process's -------------------------
# A process started now, seconds after PID: their start times (in clock
# ticks) differ. (This shell's own pid would not do: it may have started in
# the same tick as PID.)
sleep 60 &
other=$!
pids+=("$other")
cp "$seg" "$dir/$other.stat"
"$stat" --once --json -p "$PID" >"$work/reuse.json"
[ ! -e "$dir/$other.stat" ] && python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["removed_stale"] >= 1 else 1)' "$work/reuse.json"
check "a segment for a live pid with another start time is removed" $?
kill "$other" 2>/dev/null

stop_pair main "$PID"
wait_for bash -c "[ ! -e '$seg' ] && [ ! -e '$dir/$child.stat' ]"; check "segments removed at exit (parent and child)" $?
"$stat" --once -p "$PID" >/dev/null 2>"$work/gone.err"; status=$?
[ $status = 1 ] && grep -q "no stats segment for pid $PID" "$work/gone.err"
check "vsock-stat -p of a finished process: exit 1 and why (got $status)" $?

# --- a killed process ----------------------------------------------------------
start_pair killed
wait_for test -e "$dir/$PID.stat"
kill -9 "$PID"
wait "$PID" 2>/dev/null
wait_for bash -c "! kill -0 $PID 2>/dev/null"
[ -e "$dir/$PID.stat" ]; check "a killed process leaves its segment" $?
"$stat" --once --json >"$work/stale.json"; status=$?
[ $status = 1 ] && [ ! -e "$dir/$PID.stat" ] &&
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["removed_stale"] >= 1 and not d["processes"] else 1)' "$work/stale.json"
check "vsock-stat removes it (removed_stale, exit 1 with nothing listed)" $?

# --- VSOCK_STATS_SHM=0 -----------------------------------------------------------
start_pair off VSOCK_STATS_SHM=0
sleep 1
[ -z "$(ls -A "$dir")" ]; check "VSOCK_STATS_SHM=0: no segment ($(ls -A "$dir" | tr '\n' ' '))" $?
"$stat" --once -p "$PID" >/dev/null 2>&1; status=$?
[ $status = 1 ]; check "VSOCK_STATS_SHM=0: vsock-stat -p PID exit 1 (got $status)" $?
threads=$(ls "/proc/$PID/task" | wc -l)
[ "$threads" = 1 ]; check "VSOCK_STATS_SHM=0: no publisher thread ($threads threads)" $?
stop_pair off "$PID"

# --- no usable XDG_RUNTIME_DIR: /dev/shm/libvsock-UID ---------------------------------
XDG_RUNTIME_DIR=$work/missing start_pair shm
shm=/dev/shm/libvsock-$(id -u)
wait_for test -e "$shm/$PID.stat"; check "fallback segment $shm/$PID.stat" $?
XDG_RUNTIME_DIR= "$stat" --once --json -p "$PID" >"$work/shm.json"; status=$?
[ $status = 0 ]; check "vsock-stat finds it without XDG_RUNTIME_DIR (got $status)" $?
stop_pair shm "$PID"
wait_for bash -c "[ ! -e '$shm/$PID.stat' ]"; check "fallback segment removed at exit" $?

"$stat" --bogus >/dev/null 2>&1; status=$?
[ $status = 2 ]; check "an unknown option: exit 2 (got $status)" $?

[ $failures = 0 ] && echo "PASS: vsock-stat on the host" && exit 0
echo "$failures check(s) failed"
exit 1
