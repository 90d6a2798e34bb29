#!/usr/bin/env bash
# vsock-stat on redis-server (Debian's, unmodified) under redis-benchmark
# load over the verbs device, both preloaded. ctest runs it in the
# Soft-RoCE VM through tests/rxe/with-device.sh and
# tests/upgrade/on_device_address.sh (77 without a device).
#
# Passes when `vsock-stat --once --json -p <redis pid>` shows, while
# redis-benchmark (SET, VSOCK_STAT_CLIENTS connections, default 20) runs,
# every one of its connections on rdma with RDMA bytes growing both ways
# between two looks; once the load is stopped, the server's counters settle
# with no connection left, and equal the ones redis-server prints at exit
# (VSOCK_STATS=1, SIGTERM: exit 0); its segment is gone after the exit.
# redis-benchmark has no orderly stop: SIGTERM ends the load, so the
# server's connections end as a killed peer's do (upgrade_resets, one each).
# The looks are tools/vsock_stat_looks.py, shared with rdma_vsock_stat.
# Usage: redis_vsock_stat_device.sh VSOCK_STAT
source "$(dirname "$0")/app_test_lib.sh"
stat=${1:-}
looks=$(cd "$(dirname "$0")/../../tools" && pwd)/vsock_stat_looks.py
app_require redis-server redis-benchmark
[ -x "$stat" ] || app_fail "vsock-stat '$stat' is not an executable (usage: $0 VSOCK_STAT)"
# Without a device (and outside the VM) there is nothing to look at.
device=0
[ "${RXE_VM:-0}" = 1 ] && device=1
for state in /sys/class/infiniband/*/ports/*/state; do
  [ -r "$state" ] && grep -q ACTIVE "$state" && device=1
done
[ $device = 1 ] || app_skip "no active verbs port (run through tests/rxe/with-device.sh)"
app_init redis-vsock-stat
app_device_init
clients=${VSOCK_STAT_CLIENTS:-20}
# The segments in a directory of this test's own (the guest shares the
# host's environment): vsock-stat sees only these processes.
export XDG_RUNTIME_DIR=$APP_WORK/run
mkdir -m 700 "$XDG_RUNTIME_DIR" || app_fail "mkdir $XDG_RUNTIME_DIR"
segments=$XDG_RUNTIME_DIR/libvsock

# child_of PID: the program a timeout(1) wrapper runs (env execs it).
child_of() { head -n1 "/proc/$1/task/$1/children" 2>/dev/null | awk '{ print $1 }'; }
# segment_of NAME PID: waits up to 30 s for PID's segment (published ~1 s
# after its first socket).
segment_of() {
  local i
  for ((i = 0; i < 300; i++)); do
    [ -e "$segments/$2.stat" ] && { app_log "$1 (pid $2) published $segments/$2.stat"; return 0; }
    sleep 0.1
  done
  app_fail "$1 (pid $2) published no segment in $segments: $(ls "$segments" 2>&1 | tr '\n' ' ')"
}

app_library on
app_start_redis redis
port=$APP_PORT server=$APP_PID
rpid=$(child_of "$server")
[ -n "$rpid" ] && [ "$(cat "/proc/$rpid/comm" 2>/dev/null)" = redis-server ] ||
  app_fail "no redis-server under timeout (pid $server): child '${rpid:-none}'"
segment_of redis-server "$rpid"

# The load: SET without end, stopped once the test has looked (a bounded
# count could end before the looks: the guest's clock and speed jump when
# the emulator is starved). timeout(1) bounds it all the same.
timeout -k 5 "${VSOCK_APP_CLIENT_TIMEOUT:-300}" "${APP_ENV[@]}" redis-benchmark -h "$APP_ADDR" -p "$port" \
  -c "$clients" -n 100000000 -d 100 -t set -q >"$APP_WORK/bench.out" 2>>"$APP_WORK/bench.log" </dev/null &
bench=$!
APP_SERVER_PIDS+=("$bench")
bpid=""
for ((i = 0; i < 100; i++)); do
  bpid=$(child_of "$bench")
  [ "$(cat "/proc/${bpid:-0}/comm" 2>/dev/null)" = redis-benchmark ] && break
  bpid=""
  sleep 0.1
done
[ -n "$bpid" ] || app_fail "redis-benchmark did not start: $(cat "$APP_WORK/bench.log")"
segment_of redis-benchmark "$bpid"

# Live: at most 180 looks 0.5 s apart (connecting and upgrading 20
# connections takes seconds under emulation).
app_log "looking at redis-server (pid $rpid) with vsock-stat --once --json -p $rpid"
"$APP_PYTHON" "$looks" live "$stat" "$rpid" "$clients" "$APP_WORK/first.json" "$bench" 180 ||
  app_fail "vsock-stat did not show redis-benchmark's $clients connections on rdma with RDMA bytes growing"
"$APP_PYTHON" "$looks" rows "$APP_WORK/first.json" "$APP_ADDR" "$port" "$clients" ||
  app_fail "vsock-stat's rows of redis-server are not its $clients upgraded connections and its listener"
app_log "vsock-stat: $clients connections on rdma, RDMA bytes growing between two looks"

app_is_running "$bench" || app_fail "redis-benchmark ended before it was stopped: $(tr '\r' '\n' <"$APP_WORK/bench.out" | tail -n 3)"
app_stop_pid "$bench" TERM 15
app_log "redis-benchmark stopped (status $APP_STOP_STATUS): $(tr '\r' '\n' <"$APP_WORK/bench.out" | grep -a . | tail -n 1)"

# Settled: two looks in a row with the same counters and no connection left
# (at most 120 looks, 0.25 s apart).
"$APP_PYTHON" "$looks" settle "$stat" "$rpid" "$APP_WORK/final.json" 120 idle ||
  app_fail "redis-server's counters did not settle once the load was over"

app_stop_pid "$server" TERM 15
[ "$APP_STOP_STATUS" -eq 0 ] || app_fail "redis-server exited with status $APP_STOP_STATUS"
"$APP_PYTHON" "$looks" at-exit "$APP_WORK/final.json" "$APP_WORK/redis.log" "$rpid" "$clients" ||
  app_fail "vsock-stat's totals of redis-server differ from its VSOCK_STATS=1 line at exit"
app_log "vsock-stat's totals equal redis-server's VSOCK_STATS=1 line at exit"
[ ! -e "$segments/$rpid.stat" ] || app_fail "redis-server's segment $segments/$rpid.stat is still there after its exit"
app_log "redis-server's segment is gone after its exit"
echo "PASS: vsock-stat on redis-server under redis-benchmark"
