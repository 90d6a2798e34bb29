#!/bin/bash
# run_closed_unused.sh PRELOAD
#
# Accepted sockets closed before any use (closed_unused.py): VSOCK_CLOSED_CONNS
# (default 10) clients connect and wait in the server's backlog, where the
# library answers their upgrades early (a connected queue pair each); the
# server then accepts and closes every one with no read, write or poll.
# Kernel, then both ends preloaded: every client must read the end of the
# stream, as on the kernel, and the server's close must end each early
# upgrade at once (early_closed_unused), not leave its queue pair to the
# expiry (upgrade_timeout_ms).
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

# pair LABEL PRELOADED: one server and one client; the client's MEASURED line.
pair() {
  local label=$1 lib=""
  [ "$2" = 1 ] && lib=$preload
  env -u LD_PRELOAD ${lib:+LD_PRELOAD=$lib} VSOCK_STATS=1 VSOCK_LOG_FILE="$work/$label.server.log" \
    python3 "$script" server "$addr" "$work/$label.port" "$work/$label.go" "$conns" >"$work/$label.server.out" 2>&1 &
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
pair libvsock 1
echo "  server: $(ut_stats "$work/libvsock.server.log" early_closed_unused upgrades_done tcp_sockets)"
echo "  client: $(ut_stats "$work/libvsock.client.log" upgrade_attempts upgrades_done fallback_peer_closed fallback_transport_error tcp_bytes_sent)"
ended=$(ut_stat "$work/libvsock.server.log" early_closed_unused)
[ -n "$ended" ] || ut_fail "the preloaded server printed no stats"
[ "$ended" = "$conns" ] || ut_fail "the server's close ended $ended of $conns early upgrades"
echo "PASS: every client read the end of the stream; every early upgrade ended with its socket's close"
