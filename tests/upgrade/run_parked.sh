#!/bin/bash
# run_parked.sh PRELOAD
#
# Parked channels (docs/protocol.md §1.2, issue 10 item 3): one client
# process (parked_peer.py) against an echo server, connections of 64 KiB
# checked byte for byte, one after the other:
#   warm     VSOCK_PARKED_CONNS (default 40) connections: all upgraded, and
#            at least 80 % of them on the previous connection's parked
#            channel (the client's upgrade_attached; the first has none);
#   restart  the server is killed (SIGKILL: its side of every parked channel
#            goes with its process) and a new one listens on the same port;
#            then 10 connections from the same client process: every one
#            byte-exact and none slower than 5 s, whether the client still
#            held a channel to the dead server (its Attach is not answered
#            or the channel is gone: attach_failed, then rdma_cm) or had
#            dropped it (its DISCONNECTED); they upgrade, and once the new
#            server's channels are parked they attach again.
# Then the same client run with VSOCK_PARK_CHANNELS=0 on both sides (nothing
# parked, nothing attached, every connection upgraded with rdma_cm), and the
# kernel's run (no library) for the output and the time per connection: the
# client's PHASE lines must be the kernel's but for max_ms.
# Prints MEASURED lines: the time per connection of each run.
source "$(dirname "$0")/upgrade_test_lib.sh"
[ $# -ge 1 ] || { echo "usage: $0 PRELOAD"; exit 2; }
preload=$(ut_abs "$1")
here=$(cd "$(dirname "$0")" && pwd)
prog="$here/parked_peer.py"
addr=$(ut_address)
conns=${VSOCK_PARKED_CONNS:-40}
bytes=65536
export VSOCK_UPGRADE_TIMEOUT_MS=${VSOCK_UPGRADE_TIMEOUT_MS:-3000}
work=$(mktemp -d "${TMPDIR:-/tmp}/vsock-parked.XXXXXX") || exit 2
cd /tmp
server_pid="" client_pid=""
cleanup() {
  [ -n "$client_pid" ] && kill -KILL "$client_pid" 2>/dev/null
  [ -n "$server_pid" ] && kill -KILL "$server_pid" 2>/dev/null
  exec 3>&- 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
problems=()

# A free port: the restarted server must get the same one.
port=$(ut_free_port "$addr")

# start_server NAME ENV...: an echo server on $port.
start_server() {
  local name=$1
  shift
  env "$@" python3 "$prog" server "$addr" "$port" >"$work/$name.out" 2>&1 &
  server_pid=$!
  ut_wait_line "$work/$name.out" '^READY' 30 "$server_pid" >/dev/null || {
    cat "$work/$name.out"
    ut_fail "server $name did not start"
  }
}

stop_server() {
  kill -"${1:-TERM}" "$server_pid" 2>/dev/null
  ut_wait_pid "$server_pid" 20 >/dev/null 2>&1
  server_pid=""
}

# run COLUMN ENV...: the client's two phases with a server restart between
# them; the client's output in $work/COLUMN.client.out.
run() {
  local column=$1
  shift
  start_server "$column.server1" "$@" VSOCK_LOG_FILE="$work/$column.server1.log"
  rm -f "$work/go"
  mkfifo "$work/go"
  env "$@" VSOCK_LOG_FILE="$work/$column.client.log" timeout -k 5 600 \
    python3 "$prog" client "$addr" "$port" "$bytes" warm="$conns" restart=10 \
    <"$work/go" >"$work/$column.client.out" 2>"$work/$column.client.err" &
  client_pid=$!
  exec 3>"$work/go"
  ut_wait_line "$work/$column.client.out" '^PHASE warm ' 600 "$client_pid" >/dev/null ||
    problems+=("$column: the warm phase did not finish")
  stop_server KILL
  start_server "$column.server2" "$@" VSOCK_LOG_FILE="$work/$column.server2.log"
  echo go >&3
  exec 3>&-
  ut_wait_pid "$client_pid" 600 >/dev/null 2>&1 || problems+=("$column: client exit $?")
  client_pid=""
  stop_server TERM
  sed "s/^/MEASURED path=$column /" "$work/$column.client.out"
}

lib_env=(LD_PRELOAD="$preload" VSOCK_STATS=1)
run kernel LD_PRELOAD=
run libvsock "${lib_env[@]}"
run unparked "${lib_env[@]}" VSOCK_PARK_CHANNELS=0

# Each run's output is the kernel's, but for the times.
strip() { sed 's/ max_ms=.*//' "$1"; }
for column in libvsock unparked; do
  diff <(strip "$work/kernel.client.out") <(strip "$work/$column.client.out") >/dev/null ||
    problems+=("$column: the client's output differs from the kernel's")
  while read -r _ phase _ _ _ max; do
    ms=${max#max_ms=}
    awk -v m="$ms" 'BEGIN { exit !(m > 5000) }' && problems+=("$column: a connection of phase $phase took $ms ms")
  done <"$work/$column.client.out"
done

names="upgrade_attempts upgrades_done upgrade_attached attach_failed attach_refused channels_parked rdma_bytes_sent tcp_bytes_sent stream_violations upgrade_resets"
for column in libvsock unparked; do
  echo "MEASURED $column client: $(ut_stats "$work/$column.client.log" $names)"
  echo "MEASURED $column server (both): $(cat "$work/$column.server1.log" "$work/$column.server2.log" | ut_stats /dev/stdin $names)"
done
total=$((conns + 10))
done_=$(ut_stat "$work/libvsock.client.log" upgrades_done)
attached=$(ut_stat "$work/libvsock.client.log" upgrade_attached)
sent=$(ut_stat "$work/libvsock.client.log" rdma_bytes_sent)
[ "${done_:-0}" -ge $((total - 2)) ] || problems+=("libvsock: ${done_:-0} of $total connections upgraded")
[ $((${attached:-0} * 100)) -ge $((conns * 80)) ] ||
  problems+=("libvsock: ${attached:-0} connections on a parked channel (at least 80 % of $conns expected)")
[ "${sent:-0}" -ge $((bytes * (total - 2))) ] || problems+=("libvsock: ${sent:-0} bytes over RDMA")
for name in stream_violations upgrade_resets; do
  v=$(cat "$work/libvsock.client.log" "$work/libvsock.server1.log" "$work/libvsock.server2.log" | ut_stat /dev/stdin $name)
  [ "${v:-0}" = 0 ] || problems+=("libvsock: $name=$v")
done
u_done=$(ut_stat "$work/unparked.client.log" upgrades_done)
u_att=$(ut_stat "$work/unparked.client.log" upgrade_attached)
u_parked=$(ut_stat "$work/unparked.client.log" channels_parked)
[ "${u_done:-0}" -ge $((total - 2)) ] || problems+=("unparked: ${u_done:-0} of $total connections upgraded")
[ "${u_att:-0}" = 0 ] && [ "${u_parked:-0}" = 0 ] ||
  problems+=("unparked: park_channels=0, yet $u_parked parked and $u_att attached")

if [ ${#problems[@]} -gt 0 ]; then
  for f in "$work"/*.err "$work"/*.log; do ut_show_log "$f" 15; done
  printf 'FAIL: %s\n' "${problems[@]}"
  exit 1
fi
echo "PASS: connections on parked channels, byte-exact; a restarted server costs no connection"
