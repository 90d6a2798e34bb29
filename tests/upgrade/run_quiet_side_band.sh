#!/bin/bash
# run_quiet_side_band.sh PRELOAD IDLE_EPOLL
#
# The library's own threads stay quiet beside an idle upgraded connection.
# A preloaded epoll echo server (vsock_idle_epoll server) and a preloaded
# client that opens one connection (one echo: upgraded), holds it idle for
# VSOCK_QUIET_HOLD_S seconds (default 8), then makes 100 round trips. Both
# ends have VSOCK_UPGRADE_TIMEOUT_MS=2000, as the other device tests: a
# loaded guest (CI runs two at a time) can take longer than the default
# 200 ms for a first upgrade. While the connection is idle (from 3 s after
# the client said HOLDING: past that upgrade deadline, which is what the
# bug needed), the CPU time of every thread of each
# process but its main one (the side-band thread and the library's others)
# is read from /proc/PID/task/TID/stat, twice, 3 s apart. Each process's
# threads must have used under 20% of one CPU in that window: a side-band
# thread that ran its rounds back to back (fixed in 91abd97: an upgrade
# deadline left standing after the switch made every poll timeout 0) used
# all of one it could get. CPU time, not a latency: the fixed library's
# threads used 0-60 ms of the 3 s here.
source "$(dirname "$0")/upgrade_test_lib.sh"
[ $# -ge 2 ] || { echo "usage: $0 PRELOAD IDLE_EPOLL"; exit 2; }
preload=$(ut_abs "$1")
prog=$(ut_abs "$2")
addr=$(ut_address)
hold=${VSOCK_QUIET_HOLD_S:-8}
work=$(mktemp -d "${TMPDIR:-/tmp}/vsock-quiet.XXXXXX") || exit 2
cd /tmp
server_pid="" client_pid=""
cleanup() {
  [ -n "$client_pid" ] && kill -KILL "$client_pid" 2>/dev/null
  [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null
  if [ "${VSOCK_TEST_KEEP:-0}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# thread_ticks PID: "TID TICKS" (utime + stime, clock ticks) for every
# thread of PID but the main one.
thread_ticks() {
  local pid=$1 task fields
  for task in /proc/"$pid"/task/*; do
    [ "${task##*/}" = "$pid" ] && continue
    # After the ")" of the command name, utime and stime are the 12th and 13th fields.
    fields=$(sed 's/.*) //' "$task/stat" 2>/dev/null) || continue
    read -r -a f <<<"$fields"
    echo "${task##*/} $((f[11] + f[12]))"
  done
}

# used BEFORE AFTER: ticks used between two thread_ticks samples by the
# threads present in both (one that ended meanwhile is not counted).
used() {
  local -A before=()
  local tid ticks total=0
  while read -r tid ticks; do [ -n "$tid" ] && before[$tid]=$ticks; done <<<"$1"
  while read -r tid ticks; do
    [ -n "$tid" ] && [ -n "${before[$tid]:-}" ] && total=$((total + ticks - before[$tid]))
  done <<<"$2"
  echo "$total"
}

env LD_PRELOAD="$preload" VSOCK_STATS=1 VSOCK_LOG_FILE="$work/server.log" VSOCK_UPGRADE_TIMEOUT_MS=2000 \
  "$prog" server --addr "$addr" --port 0 >"$work/server.out" 2>&1 &
server_pid=$!
port=$(ut_wait_line "$work/server.out" '^READY ' 20 "$server_pid") || ut_fail "the server did not start"
env LD_PRELOAD="$preload" VSOCK_STATS=1 VSOCK_LOG_FILE="$work/client.log" VSOCK_UPGRADE_TIMEOUT_MS=2000 \
  "$prog" client --addr "$addr" --port "$port" --idle 0 --active 1 --rounds 100 --warmup 0 --hold "$hold" \
  --seconds $((hold + 60)) >"$work/client.out" 2>&1 &
client_pid=$!
ut_wait_line "$work/client.out" '^HOLDING ' 60 "$client_pid" >/dev/null || { cat "$work/client.out"; ut_fail "the client did not open its connection"; }
sleep 3
hz=$(getconf CLK_TCK)
s0=$(thread_ticks "$server_pid") c0=$(thread_ticks "$client_pid")
sleep 3
s1=$(thread_ticks "$server_pid") c1=$(thread_ticks "$client_pid")
server_used=$(used "$s0" "$s1") client_used=$(used "$c0" "$c1")
ut_wait_pid "$client_pid" $((hold + 60))
rc=$?
client_pid=""
kill -TERM "$server_pid"
ut_wait_pid "$server_pid" 30 >/dev/null
server_pid=""
grep '^result' "$work/client.out"
[ $rc = 0 ] || { cat "$work/client.out"; ut_fail "the client's round trips failed (exit $rc)"; }
echo "library threads' CPU over 3 s of idle: server $((server_used * 1000 / hz)) ms, client $((client_used * 1000 / hz)) ms"
echo "client: $(ut_stats "$work/client.log" upgrades_done rdma_bytes_sent tcp_bytes_sent fallback_timeout fallback_no_listener)"
echo "server: $(ut_stats "$work/server.log" upgrades_done rdma_bytes_received)"
[ "$(ut_stat "$work/client.log" upgrades_done)" = 1 ] || ut_fail "the connection was not upgraded"
# 20% of 3 s.
limit=$((hz * 3 / 5))
[ "$server_used" -lt "$limit" ] || ut_fail "the server's library threads used $server_used ticks of $((hz * 3)) while idle"
[ "$client_used" -lt "$limit" ] || ut_fail "the client's library threads used $client_used ticks of $((hz * 3)) while idle"
echo "PASS"
