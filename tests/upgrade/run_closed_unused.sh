#!/bin/bash
# run_closed_unused.sh PRELOAD
#
# Accepted sockets closed before any use (closed_unused.py): VSOCK_CLOSED_CONNS
# (default 10) clients connect and wait in the server's backlog; the server
# then accepts and closes every one with no read, write or poll. Kernel,
# then both ends preloaded twice:
#   alone   the listener is the server's alone: the library answers each
#           request from the backlog (an early upgrade) and accept() claims
#           the socket and sends Bound, so each close comes right after a
#           Bound and waits for the client's Switch (protocol.md §4: the
#           close the engine finishes); at least one must complete over the
#           ring (the server's upgrades_done)
#   forked  the server forked once after listen() (its listener shared): no
#           early upgrade; the first connection's upgrade times out and
#           the client's failure memory keeps the rest on TCP
# Every client must read the end of the stream, as on the kernel.
source "$(dirname "$0")/upgrade_test_lib.sh"
[ $# -ge 1 ] || { echo "usage: $0 PRELOAD"; exit 2; }
preload=$(ut_abs "$1")
script=$(ut_abs "$(dirname "$0")/closed_unused.py")
addr=$(ut_address)
conns=${VSOCK_CLOSED_CONNS:-10}
work=$(mktemp -d "${TMPDIR:-/tmp}/vsock-closed-unused.XXXXXX") || exit 2
cd /tmp
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null
  if [ "${VSOCK_TEST_KEEP:-0}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# pair LABEL PRELOADED [--forked]: one server and one client; the client's MEASURED line.
pair() {
  local label=$1 lib=""
  [ "$2" = 1 ] && lib=$preload
  env -u LD_PRELOAD ${lib:+LD_PRELOAD=$lib} VSOCK_STATS=1 VSOCK_LOG_FILE="$work/$label.server.log" \
    python3 "$script" server "$addr" "$work/$label.port" "$work/$label.go" "$conns" ${3:-} >"$work/$label.server.out" 2>&1 &
  server_pid=$!
  timeout 120 env -u LD_PRELOAD ${lib:+LD_PRELOAD=$lib} VSOCK_STATS=1 VSOCK_LOG_FILE="$work/$label.client.log" \
    python3 "$script" client "$addr" "$work/$label.port" "$work/$label.go" "$conns" >"$work/$label.client.out" 2>&1
  local rc=$?
  ut_wait_pid "$server_pid" 30 >/dev/null
  server_pid=""
  echo "MEASURED path=$label $(grep '^MEASURED' "$work/$label.client.out" | cut -d' ' -f2-)"
  if [ $rc != 0 ]; then
    tail -n 20 "$work/$label.client.out" "$work/$label.server.out"
    ut_fail "$label: a client did not read the end of the stream (exit $rc)"
  fi
}

echo "closed unused on $addr: $conns connections"
pair kernel 0
for label in alone forked; do
  if [ "$label" = forked ]; then pair "$label" 1 --forked; else pair "$label" 1; fi
  echo "  server: $(ut_stats "$work/$label.server.log" upgrades_done)"
  echo "  client: $(ut_stats "$work/$label.client.log" upgrade_attempts upgrades_done fallback_timeout fallback_cached_peer tcp_bytes_sent)"
done
done_=$(ut_stat "$work/alone.server.log" upgrades_done)
[ -n "$done_" ] || ut_fail "the preloaded server printed no stats"
[ "$done_" -ge 1 ] || ut_fail "alone: no close completed over the ring (server upgrades_done=0)"
echo "PASS: every client read the end of the stream; $done_ of $conns closes waited for the client's Switch and went over the ring"
