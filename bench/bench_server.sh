# bench_server.sh - sourced by the bench scripts that start a fresh
# server for each run (profiles.sh, setup_time.sh, app_cpu.sh,
# callgrind.sh, callgrind_epoll.sh).
#
#   bench_start_server OUT CMD...  starts CMD (e.g. `env ... vsock_bench
#                                  server ...`) in the background, its output
#                                  to OUT, and waits (BENCH_SERVER_WAIT_S, 20 s
#                                  by default) for its "READY <port>" line:
#                                  sets server_pid and server_port; returns 1
#                                  if none came.
#   bench_stop_server              SIGTERM, 5 s, then SIGKILL; reaps it.
server_pid=""
server_port=""

bench_start_server() {
  local out=$1 i
  shift
  : >"$out"  # before the server starts: never read the last one's port
  "$@" >"$out" 2>&1 </dev/null &
  server_pid=$!
  server_port=""
  for ((i = 0; i < ${BENCH_SERVER_WAIT_S:-20} * 10; i++)); do
    server_port=$(sed -n 's/^READY \([0-9][0-9]*\)$/\1/p' "$out")
    [ -n "$server_port" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  return 1
}

bench_stop_server() {
  [ -n "$server_pid" ] || return 0
  local i
  kill -TERM "$server_pid" 2>/dev/null
  for ((i = 0; i < 50; i++)); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  server_pid=""
}
