#!/bin/bash
# run_forged.sh SERVER_SHAPES MALFORMED_REQUEST PRELOAD
#
# Another host tries to take a live connection over (issue 10): a preloaded
# echo server (server_shapes, threads shape); a victim client holds a
# connection open (plain, then preloaded); malformed_request --forge sends
# a well-formed upgrade request naming the victim's 4-tuple from a second
# address of the guest. The request must not be accepted, the server must
# count it (upgrade_requests_forged), and the victim's connection must go on
# byte-exact. Needs the Soft-RoCE VM (it adds an address to its netdev).
source "$(dirname "$0")/upgrade_test_lib.sh"
[ $# = 3 ] || { echo "usage: $0 SERVER_SHAPES MALFORMED_REQUEST PRELOAD"; exit 2; }
shapes=$(ut_abs "$1") forger=$(ut_abs "$2") preload=$(ut_abs "$3")
victim_py=$(ut_abs "$(dirname "$0")/forged_victim.py")
[ "${RXE_VM:-0}" = 1 ] || { echo "SKIPPED: needs the Soft-RoCE VM (adds an address to its netdev)"; exit 77; }
addr=$(ut_address)
other=${addr%.*}.$(( (${addr##*.} + 100) % 250 + 1 ))
ip addr add "$other/24" dev "$RXE_VM_NETDEV" || ut_fail "could not add $other to $RXE_VM_NETDEV"
work=$(mktemp -d /tmp/vsock-forged.XXXXXX) || exit 2
server=""
cleanup() {
  [ -n "$server" ] && kill -TERM "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cd /tmp
show() { local f; for f in "$work"/*; do echo "---- $(basename "$f") ----"; tail -n 20 "$f"; done; }

env LD_PRELOAD="$preload" VSOCK_STATS=1 VSOCK_LOG_FILE="$work/server.stats" \
  "$shapes" server threads "$addr" "$work/port" 2 >"$work/server.out" 2>&1 &
server=$!
for _ in $(seq 300); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(awk '{print $1}' "$work/port")
[ -n "$port" ] || { show; ut_fail "server did not start"; }
echo "server (preloaded) on $addr:$port; forged requests come from $other"

# attack NAME LIB: a victim connection, the forged request, then the rest of
# the victim's exchange.
attack() {
  local name=$1 lib=$2
  rm -f "$work/go"
  env -u LD_PRELOAD ${lib:+LD_PRELOAD=$lib} VSOCK_STATS=1 VSOCK_LOG_FILE="$work/$name.stats" \
    timeout -k 5 120 python3 "$victim_py" "$addr" "$port" "$work/go" >"$work/$name.out" 2>&1 &
  local victim=$!
  local vport
  vport=$(ut_wait_line "$work/$name.out" '^PORT [0-9]+' 60 "$victim") || { show; ut_fail "$name: no connection"; }
  timeout -k 5 60 "$forger" "$addr" "$port" 3000 --forge "$vport" "$other" >"$work/$name.forger" 2>&1
  local rc=$?
  cat "$work/$name.forger"
  [ $rc = 0 ] || { show; ut_fail "$name: the forged request for port $vport was not refused (exit $rc)"; }
  touch "$work/go"
  ut_wait_pid "$victim" 120 || { show; ut_fail "$name: the victim's connection did not go on"; }
  grep -q VERIFIED "$work/$name.out" || { show; ut_fail "$name: the victim's bytes were wrong"; }
  echo "$name: connection from port $vport untouched, 1 MiB echoed byte-exact after the attack"
}
attack plain-victim ""
attack preloaded-victim "$preload"
kill -TERM "$server"
ut_wait_pid "$server" 20 >/dev/null
server=""
forged=$(ut_stat "$work/server.stats" upgrade_requests_forged)
echo "server: upgrade_requests_forged=${forged:-?} $(ut_stats "$work/server.stats" upgrades_done)"
[ "${forged:-0}" -ge 2 ] || ut_fail "the server did not count both forged requests"
echo "PASS: forged requests refused and counted, victims untouched"
