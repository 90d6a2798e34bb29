#!/bin/bash
# run_plain_peer.sh SERVER_SHAPES PRELOAD
#
# A plain server (no library) and preloaded client processes one after the
# other (issue 10 item 5: a connect() to a peer known not to run libvsock
# adds nothing measurable). The server is `server_shapes server threads`
# without the library; each client is `server_shapes client` under it,
# VSOCK_PLAIN_CONNS (default 5) connections of 64 KiB echoed, checked.
#   first   finds out: its first connection's upgrade ends "no listener",
#           the others are skipped (its own failure memory)
#   second  a new process: every connection skipped at connect() from the
#           host's shared memory (/dev/shm/libvsock-peers-1-<euid>),
#           no attempt, and its verbs device never opened
#   other   a new process with VSOCK_PEER_FAIL_CACHE_S=0 (no memory at
#           all): tries every connection again, as before
# Then a preloaded server on another port and a new client process:
# upgraded (what one plain peer taught applies to it only).
# Prints MEASURED: ms per connection of each client.
source "$(dirname "$0")/upgrade_test_lib.sh"
[ $# -ge 2 ] || { echo "usage: $0 SERVER_SHAPES PRELOAD"; exit 2; }
bin=$(ut_abs "$1") preload=$(ut_abs "$2")
addr=$(ut_address)
export VSOCK_UPGRADE_TIMEOUT_MS=${VSOCK_UPGRADE_TIMEOUT_MS:-10000}
conns=${VSOCK_PLAIN_CONNS:-5}
bytes=65536
work=$(mktemp -d "${TMPDIR:-/tmp}/vsock-plain-peer.XXXXXX") || exit 2
cd /tmp
servers=()
cleanup() {
  local pid
  for pid in "${servers[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  if [ "${VSOCK_TEST_KEEP:-0}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# start_server NAME PRELOADED: a threads server; its port file is $work/NAME.port.
start_server() {
  local lib=""
  [ "$2" = 1 ] && lib=$preload
  env -u LD_PRELOAD ${lib:+LD_PRELOAD=$lib} VSOCK_STATS=1 VSOCK_LOG_FILE="$work/$1.server.stats" \
    "$bin" server threads "$addr" "$work/$1.port" 2 >"$work/$1.server.out" 2>&1 &
  servers+=($!)
  for _ in $(seq 100); do [ -s "$work/$1.port" ] && return 0; sleep 0.1; done
  ut_fail "$1: the server wrote no port file"
}

# client NAME PORTNAME [ENV...]: one preloaded client process, checked;
# MS = its ms per connection.
client() {
  local name=$1 portname=$2
  shift 2
  timeout 300 env -u LD_PRELOAD LD_PRELOAD="$preload" VSOCK_STATS=1 VSOCK_LOG_FILE="$work/$name.stats" "$@" \
    "$bin" client "$addr" "$work/$portname.port" "$conns" "$bytes" >"$work/$name.out" 2>&1 ||
    { tail -n 20 "$work/$name.out" "$work/$name.stats"; ut_fail "$name: the client failed"; }
  MS=$(sed -n 's/^MEASURED .* mean_ms_per_connection=\([0-9.]*\)$/\1/p' "$work/$name.out")
  echo "  $name: $MS ms per connection; $(ut_stats "$work/$name.stats" upgrade_attempts upgrades_done \
    fallback_no_listener fallback_cached_peer device_opened)"
}

# expect NAME COUNTER VALUE
expect() {
  local v
  v=$(ut_stat "$work/$1.stats" "$2")
  [ "${v:-0}" = "$3" ] || ut_fail "$1: $2=${v:-0}, expected $3"
}

echo "plain peer on $addr: $conns connections x $bytes bytes per client process"
start_server plain 0
client first plain
first_ms=$MS
expect first upgrade_attempts 1
expect first fallback_no_listener 1
expect first fallback_cached_peer $((conns - 1))
client second plain
second_ms=$MS
expect second upgrade_attempts 0
expect second fallback_cached_peer "$conns"
expect second device_opened 0
client other plain VSOCK_PEER_FAIL_CACHE_S=0
other_ms=$MS
expect other upgrade_attempts "$conns"
expect other fallback_no_listener "$conns"

start_server preloaded 1
client upgraded preloaded
expect upgraded upgrades_done "$conns"
echo "MEASURED plain server, $conns connections x $bytes B per process: ms per connection first process" \
  "$first_ms (finds out), second $second_ms (host memory), without memory $other_ms; a preloaded server:" \
  "$MS (upgraded)"
echo "PASS: a plain peer found by one process is skipped by the next"
