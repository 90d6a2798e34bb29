#!/bin/bash
# run_epoll_quiet.sh PRELOAD IDLE_EPOLL
#
# An epoll server's idle upgraded connections go quiet (src/sock/wait/
# epoll_quiet.hpp: looks leave them out until their completion channel
# fires in the view's wake set, or the sweep about every second) and lose
# nothing by it. vsock_idle_epoll's echo server (one thread, one epoll set,
# level-triggered) and its client: 100 idle connections and 4 active ones,
# each with one echo first; all held idle for 3 s (past the sweep's second
# and the idle peer probe); 300 round trips on the active ones; then one
# echo on every idle connection, each of which must come back whole. Run
# first without the library (the expected result), then with both ends
# preloaded (VSOCK_UPGRADE_TIMEOUT_MS=2000 as the other device tests): the
# same result line, every connection upgraded, and the server's
# epoll_quiet_wakes at least the 100 idle connections that were woken
# (each had been quiet). The preloaded server runs without the sweep
# (VSOCK_EPOLL_SWEEP_MS=0): every wake-up must come from an event, so one
# that only the sweep would have made is a hang, which the client's 5 s
# timeouts turn into a failure instead of a late answer.
source "$(dirname "$0")/upgrade_test_lib.sh"
[ $# -ge 2 ] || { echo "usage: $0 PRELOAD IDLE_EPOLL"; exit 2; }
preload=$(ut_abs "$1")
prog=$(ut_abs "$2")
addr=$(ut_address)
idle=100 active=4
ut_work_dir epoll-quiet

# run MODE: one server and one client; the client's result line on stdout.
run() {
  local mode=$1 envs=() server_envs=()
  [ "$mode" = libvsock ] && envs=(LD_PRELOAD="$preload" VSOCK_STATS=1 VSOCK_UPGRADE_TIMEOUT_MS=2000) &&
    server_envs=(VSOCK_EPOLL_SWEEP_MS=0)
  env "${envs[@]}" "${server_envs[@]}" VSOCK_LOG_FILE="$work/$mode-server.log" \
    "$prog" server --addr "$addr" --port 0 >"$work/$mode-server.out" 2>&1 &
  server_pid=$!
  local port
  port=$(ut_wait_line "$work/$mode-server.out" '^READY ' 20 "$server_pid") || ut_fail "the $mode server did not start"
  env "${envs[@]}" VSOCK_LOG_FILE="$work/$mode-client.log" \
    timeout 300 "$prog" client --addr "$addr" --port "$port" --idle $idle --active $active --rounds 300 --warmup 20 \
    --hold 3 --check-every 1 --seconds 120 >"$work/$mode-client.out" 2>&1
  local rc=$?
  kill -TERM "$server_pid"
  ut_wait_pid "$server_pid" 30 >/dev/null
  server_pid=""
  [ $rc = 0 ] || { cat "$work/$mode-client.out" >&2; ut_fail "the $mode client failed (exit $rc)"; }
  grep '^result' "$work/$mode-client.out"
}

# The fields that must match the kernel's: what was opened, sent and echoed.
outcome() { grep -o 'idle=[0-9]* active=[0-9]*\|failed_opens=[0-9]* rounds=[0-9]* wrong=[0-9]*\|idle_checked=[0-9]* idle_alive=[0-9]*' <<<"$1" | tr '\n' ' '; }

kernel=$(run kernel)
echo "kernel:   $kernel"
with=$(run libvsock)
echo "libvsock: $with"
expected="idle=$idle active=$active failed_opens=0 rounds=300 wrong=0 idle_checked=$idle idle_alive=$idle "
[ "$(outcome "$kernel")" = "$expected" ] || ut_fail "the kernel's run is not the expected one: $(outcome "$kernel")"
[ "$(outcome "$with")" = "$(outcome "$kernel")" ] || ut_fail "libvsock: $(outcome "$with"), the kernel: $(outcome "$kernel")"
echo "client: $(ut_stats "$work/libvsock-client.log" upgrades_done rdma_bytes_sent tcp_bytes_sent)"
echo "server: $(ut_stats "$work/libvsock-server.log" upgrades_done epoll_quiet_wakes wait_sleeps)"
[ "$(ut_stat "$work/libvsock-client.log" upgrades_done)" = $((idle + active)) ] ||
  ut_fail "not every connection was upgraded"
wakes=$(ut_stat "$work/libvsock-server.log" epoll_quiet_wakes)
[ "${wakes:-0}" -ge $idle ] || ut_fail "the server's quiet entries were woken ${wakes:-0} times (at least $idle expected)"
echo "PASS"
