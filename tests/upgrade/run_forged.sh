#!/bin/bash
# run_forged.sh SERVER_SHAPES MALFORMED_REQUEST PRELOAD [HOSTILE_PEER]
#
# Somebody else tries to take a live connection over (issue 10): a
# preloaded echo server (server_shapes, threads shape); a victim client
# (forged_victim.py) holds a connection open, plain or preloaded, and
# echoes 1 MiB byte-exact once the attack is over.
#
# Another host: malformed_request --forge sends a well-formed upgrade
# request naming the victim's 4-tuple from a second address of the guest.
# It must not be accepted, the server must count it
# (upgrade_requests_forged), and the victim's connection must go on.
#
# The same host (with HOSTILE_PEER): hostile_peer forge sends the request
# from the victim's own address, so every check of docs/protocol.md §1
# passes: for a plain victim, whose accepted socket still waits for its
# request (the server runs with upgrade_timeout_ms 15 s: 60 s), the server
# accepts and sends Bound. The forger switches with tcp_bytes 0 (below
# what the server read already) or the 1000 bytes the victim wrote (the
# server then waits at 1000 on TCP for the token), writes "FORGED-..." and
# a FIN into the server's ring and cannot write the token (§2, "Who may
# switch"). The server must refuse (upgrade_tokens_refused, at least one
# per forgery that got Bound), send the forger nothing (no Switch, no echo
# of its bytes: the application never read them), stay alive, and the
# victim's echo must go on byte-exact on TCP. A preloaded victim's own
# upgrade has the 4-tuple already: the forged request gets no Bound.
# Needs the Soft-RoCE VM (it adds an address to its netdev).
source "$(dirname "$0")/upgrade_test_lib.sh"
[ $# = 3 ] || [ $# = 4 ] || { echo "usage: $0 SERVER_SHAPES MALFORMED_REQUEST PRELOAD [HOSTILE_PEER]"; exit 2; }
shapes=$(ut_abs "$1") forger=$(ut_abs "$2") preload=$(ut_abs "$3") hostile=""
[ $# = 4 ] && hostile=$(ut_abs "$4")
victim_py=$(ut_abs "$(dirname "$0")/forged_victim.py")
[ "${RXE_VM:-0}" = 1 ] || { echo "SKIPPED: needs the Soft-RoCE VM (adds an address to its netdev)"; exit 77; }
addr=$(ut_address)
other=${addr%.*}.$(( (${addr##*.} + 100) % 250 + 1 ))
ip addr add "$other/24" dev "$RXE_VM_NETDEV" || ut_fail "could not add $other to $RXE_VM_NETDEV"
work=$(mktemp -d /tmp/vsock-forged.XXXXXX) || exit 2
server="" forging=""
cleanup() {
  [ -n "$forging" ] && kill -TERM "$forging" 2>/dev/null
  [ -n "$server" ] && kill -TERM "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cd /tmp
show() { local f; for f in "$work"/*; do echo "---- $(basename "$f") ----"; tail -n 20 "$f"; done; }

env LD_PRELOAD="$preload" VSOCK_STATS=1 VSOCK_LOG_FILE="$work/server.stats" VSOCK_UPGRADE_TIMEOUT_MS=15000 \
  "$shapes" server threads "$addr" "$work/port" 2 >"$work/server.out" 2>&1 &
server=$!
for _ in $(seq 300); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(awk '{print $1}' "$work/port")
[ -n "$port" ] || { show; ut_fail "server did not start"; }
echo "server (preloaded) on $addr:$port; forged requests come from $other${hostile:+ and from $addr itself}"

# victim NAME LIB: starts a victim connection; sets vport, sent, victim.
victim() {
  local name=$1 lib=$2
  rm -f "$work/go"
  env -u LD_PRELOAD ${lib:+LD_PRELOAD=$lib} VSOCK_STATS=1 VSOCK_LOG_FILE="$work/$name.stats" \
    VSOCK_UPGRADE_TIMEOUT_MS=3000 timeout -k 5 120 python3 "$victim_py" "$addr" "$port" "$work/go" \
    >"$work/$name.out" 2>&1 &
  victim=$!
  vport=$(ut_wait_line "$work/$name.out" '^PORT [0-9]+' 60 "$victim") || { show; ut_fail "$name: no connection"; }
  sent=$(awk '/^PORT / {print $4; exit}' "$work/$name.out")
}

# victim_goes_on NAME: the rest of the victim's exchange, checked.
victim_goes_on() {
  local name=$1
  touch "$work/go"
  ut_wait_pid "$victim" 120 || { show; ut_fail "$name: the victim's connection did not go on"; }
  grep -q VERIFIED "$work/$name.out" || { show; ut_fail "$name: the victim's bytes were wrong"; }
  kill -0 "$server" 2>/dev/null || { show; ut_fail "$name: the server died"; }
}

# attack NAME LIB: the forged request from another address.
attack() {
  local name=$1 lib=$2
  victim "$name" "$lib"
  timeout -k 5 60 "$forger" "$addr" "$port" 3000 --forge "$vport" "$other" >"$work/$name.forger" 2>&1
  local rc=$?
  cat "$work/$name.forger"
  [ $rc = 0 ] || { show; ut_fail "$name: the forged request for port $vport was not refused (exit $rc)"; }
  victim_goes_on "$name"
  echo "$name: connection from port $vport untouched, 1 MiB echoed byte-exact after the attack"
}

# forge NAME LIB COUNT: the forged request from the victim's own address;
# its Switch says COUNT TCP bytes (a number, or "sent": what the victim
# wrote so far).
bound_forgeries=0
forge() {
  local name=$1 lib=$2 count=$3 i
  victim "$name" "$lib"
  [ "$count" = sent ] && count=$sent
  timeout -k 5 150 "$hostile" "$addr" "$port" forge "$vport" "$count" >"$work/$name.forger" 2>&1 &
  forging=$!
  # The victim writes again once the forgery is in the server's ring (or
  # the request got nowhere): with count = its bytes so far, the server
  # then finds the victim's bytes where the token should be.
  for i in $(seq 400); do
    grep -Eq '^forge: (written|no Bound|request=)' "$work/$name.forger" && break
    kill -0 "$forging" 2>/dev/null || break
    sleep 0.1
  done
  sleep 1
  victim_goes_on "$name"
  ut_wait_pid "$forging" 150
  local rc=$?
  forging=""
  sed 's/^/  /' "$work/$name.forger"
  [ $rc = 77 ] && { echo "SKIPPED: hostile_peer found no device or route"; exit 77; }
  [ $rc = 0 ] || { show; ut_fail "$name: hostile_peer forge exit $rc (1: the server switched for the forger, see its lines)"; }
  local result bound
  result=$(grep -E '^forge: request=' "$work/$name.forger")
  bound=$(sed -n 's/.* bound=\([01]\) .*/\1/p' <<<"$result")
  [ -n "$bound" ] || { show; ut_fail "$name: no result line from the forger"; }
  if [ -z "$lib" ] && [ "$bound" != 1 ]; then
    show; ut_fail "$name: the forged request got no Bound (the token check was never reached: nothing proved)"
  fi
  bound_forgeries=$((bound_forgeries + bound))
  echo "$name: forged Switch (tcp_bytes $count) for port $vport: ${result#forge: }; the victim's 1 MiB echoed byte-exact"
  [ -n "$lib" ] && echo "$name: victim $(ut_stats "$work/$name.stats" upgrades_done rdma_bytes_sent tcp_bytes_sent)"
  return 0
}

attack plain-victim ""
attack preloaded-victim "$preload"
if [ -n "$hostile" ]; then
  forge same-host-plain-count-0 "" 0
  forge same-host-plain-count-sent "" sent
  forge same-host-preloaded "$preload" 0
fi
kill -TERM "$server"
ut_wait_pid "$server" 20 >/dev/null
server=""
forged=$(ut_stat "$work/server.stats" upgrade_requests_forged)
echo "server: $(ut_stats "$work/server.stats" upgrade_requests_forged upgrade_tokens_refused upgrades_done \
  upgrade_resets stream_violations fallback_no_request)"
[ "${forged:-0}" -ge 2 ] || ut_fail "the server did not count both forged requests"
if [ -n "$hostile" ]; then
  refused=$(ut_stat "$work/server.stats" upgrade_tokens_refused)
  [ "${refused:-0}" -ge "$bound_forgeries" ] ||
    ut_fail "the server counted ${refused:-0} refused tokens, $bound_forgeries forged Switches got a Bound"
  echo "PASS: forged requests from another address refused and counted; $bound_forgeries forged Switches from" \
    "the victims' address refused for want of the token; victims untouched"
else
  echo "PASS: forged requests refused and counted, victims untouched"
fi
