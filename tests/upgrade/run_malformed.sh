#!/bin/bash
# run_malformed.sh TCP_INTEGRITY MALFORMED_REQUEST PRELOAD
#
# A TCP server (tcp_integrity server, 2 connections) under LD_PRELOAD=PRELOAD
# on ut_address; malformed_request sends it hostile rdma_cm upgrade requests
# on the same port. Then: the server must still be alive, and a plain client
# and a preloaded client must each get a byte-exact exchange with it.
source "$(dirname "$0")/upgrade_test_lib.sh"
[ $# = 3 ] || { echo "usage: $0 TCP_INTEGRITY MALFORMED_REQUEST PRELOAD"; exit 2; }
integrity=$(ut_abs "$1") malformed=$(ut_abs "$2") preload=$(ut_abs "$3")
addr=$(ut_address)
[ "$addr" != 127.0.0.1 ] || { echo "SKIPPED: rdma_cm needs a device address (run through with-device.sh)"; exit 77; }
work=$(mktemp -d /tmp/vsock-malformed.XXXXXX) || exit 2
server=""
cleanup() {
  [ -n "$server" ] && kill -0 "$server" 2>/dev/null && kill -KILL "$server"
  rm -rf "$work"
}
trap cleanup EXIT
cd /tmp
show() { local f; for f in "$work"/*; do echo "---- $(basename "$f") ----"; tail -n 20 "$f"; done; }

env LD_PRELOAD="$preload" VSOCK_STATS=1 VSOCK_LOG_FILE="$work/server.stats" \
  "$integrity" server "$addr" 0 2 1M 11 --timeout 240 >"$work/server.out" 2>"$work/server.err" &
server=$!
port=$(ut_wait_line "$work/server.out" '^listening [0-9]+' 20 "$server") || { show; ut_fail "server did not start"; }
echo "server (preloaded) on $addr:$port"

timeout -k 5 120 "$malformed" "$addr" "$port" 3000; rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || { show; ut_fail "malformed_request exit $rc"; }
kill -0 "$server" 2>/dev/null || { show; ut_fail "the server died after the hostile requests"; }
echo "server still alive after the hostile requests"

# client NAME LIB: one connection, 1 MiB each way, verified.
client() {
  env -u LD_PRELOAD ${2:+LD_PRELOAD=$2} VSOCK_STATS=1 VSOCK_LOG_FILE="$work/$1.stats" \
    timeout -k 5 120 "$integrity" client "$addr" "$port" 1 1M 11 --timeout 100 >"$work/$1.out" 2>"$work/$1.err" ||
    { show; ut_fail "$1 did not get a byte-exact exchange"; }
  echo "$1: $(grep '^verified' "$work/$1.out")"
}
client plain-client ""
client preloaded-client "$preload"
ut_wait_pid "$server" 60 || { show; ut_fail "server failed"; }
server=""
cat "$work"/*client.out | grep '^conn ' | sort >"$work/clients.sums"
grep '^conn ' "$work/server.out" | sort >"$work/server.sums"
diff -u "$work/clients.sums" "$work/server.sums" || ut_fail "client and server checksums differ"
echo "server: $(grep '^verified' "$work/server.out"); $(ut_stats_summary "$work/server.stats")"
[ -n "$(ut_stat "$work/server.stats" tcp_sockets)" ] || ut_fail "no stats line from the preloaded server"
echo "PASS: malformed requests"
