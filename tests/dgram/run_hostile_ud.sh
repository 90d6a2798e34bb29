#!/bin/bash
# run_hostile_ud.sh HOSTILE_UD UDP_PAIR PRELOAD: a preloaded UDP echo server
# (udp_pair server ADDR epoll) against a hostile UD peer (hostile_ud.cpp:
# garbage, broken headers, an unknown cookie, a fragment bomb, duplicate
# and mismatched fragments, a flood, many distinct senders), then a
# well-behaved preloaded client.
#
# Holds when: hostile_ud saw every expectation hold (nothing back for
# garbage and broken headers, a correct UNREACH for the unknown cookie, the
# server's VmRSS within +16 MiB through the bomb, the valid fragmented
# datagram echoed byte-exact, an answer after the flood, a new sender's
# echo over UD after 4,300 others); the server is alive after it; the good
# client gets every echo byte-exact with at least 90% of its sends and of
# the echoes over UD; the server exits 0 on QUIT; and its stats show
# udp_drops_malformed, udp_drops_unknown_socket, udp_unreach_sent and
# udp_drops_reassembly above 0. Every failure is listed, then exit 1.
source "$(dirname "$0")/../upgrade/upgrade_test_lib.sh"
[ $# -eq 3 ] || { echo "usage: $0 HOSTILE_UD UDP_PAIR PRELOAD"; exit 2; }
hostile=$(ut_abs "$1") pair=$(ut_abs "$2") preload=$(ut_abs "$3")
addr=$(ut_address)
count=${VSOCK_HOSTILE_UD_CLIENT_COUNT:-330}
work=$(mktemp -d /tmp/hostile_ud.XXXXXX)
server=
cleanup() {
  [ -n "$server" ] && kill -KILL "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cd /tmp || exit 1
failures=()
fail() {
  echo "FAIL: $*"
  failures+=("$*")
}

env LD_PRELOAD="$preload" VSOCK_STATS=1 "$pair" server "$addr" epoll >"$work/server.out" 2>"$work/server.err" &
server=$!
port=$(ut_wait_line "$work/server.out" '^READY ' 30 "$server") ||
  ut_fail "server did not start: $(cat "$work/server.err")"
echo "server: pid $server on $addr:$port (preloaded, epoll)"

timeout 400 "$hostile" "$addr" "$port" "$server" >"$work/hostile.out" 2>"$work/hostile.err"
status=$?
cat "$work/hostile.out"
sed 's/^/hostile_ud stderr: /' "$work/hostile.err"
if [ $status -eq 77 ]; then
  echo "SKIPPED: hostile_ud found no device"
  exit 77
fi
if [ $status -ne 0 ]; then
  fail "hostile_ud: an expectation did not hold (status $status)"
  # A server that stopped answering costs the client 1 s a datagram: a
  # short run still tells whether it answers.
  count=$(( count < 22 ? count : 22 ))
  echo "good client: $count datagrams only, after that failure"
fi

if kill -0 "$server" 2>/dev/null; then
  echo "server: alive after hostile_ud"
else
  ut_wait_pid "$server" 1 >/dev/null
  rc=$?
  server=
  echo "server stderr: $(tail -5 "$work/server.err")"
  ut_fail "the server died during hostile_ud (status $rc); $(printf '%s; ' "${failures[@]}")"
fi

timeout 200 env LD_PRELOAD="$preload" VSOCK_STATS=1 "$pair" client "$addr" "$port" "$count" epoll \
  >"$work/client.out" 2>"$work/client.err"
status=$?
echo "good client: $(cat "$work/client.out") | $(grep -h 'udp_pair:' "$work/client.err" | head -3)"
[ $status -eq 0 ] || fail "the good client saw lost or wrong echoes (status $status)"
echo "good client: $(ut_stats "$work/client.err" udp_ud_sends udp_kernel_sends udp_ud_receives udp_kernel_receives udp_resolutions udp_revokes_received)"
ud=$(ut_stat "$work/client.err" udp_ud_sends)
if [ -z "$ud" ]; then
  fail "good client: no stats line (was libvsock loaded?)"
elif [ "$ud" -lt $((count * 9 / 10)) ]; then
  fail "good client: only $ud of $count datagrams went over UD"
fi
# The server's echoes too: it learns the path back from the client's first
# datagram over UD.
back=$(ut_stat "$work/client.err" udp_ud_receives)
if [ -n "$back" ] && [ "$back" -lt $((count * 9 / 10)) ]; then
  fail "good client: only $back of $count echoes came over UD"
fi

# The client sent QUIT at its end; once more through the kernel (plain
# bash, not preloaded) in case that one was lost.
for _ in 1 2 3 4 5 6 7 8 9 10; do
  kill -0 "$server" 2>/dev/null || break
  sleep 0.5
  kill -0 "$server" 2>/dev/null || break
  echo -n QUIT >"/dev/udp/$addr/$port" 2>/dev/null
done
# A server that did not take the QUIT: where its threads are, before the kill.
if kill -0 "$server" 2>/dev/null; then
  echo "server: still running after QUIT; its threads:"
  for task in /proc/"$server"/task/*; do
    echo "  thread ${task##*/}: $(awk '{print "state", $3}' "$task/stat" 2>/dev/null) wchan $(cat "$task/wchan" 2>/dev/null)"
  done
  if command -v gdb >/dev/null; then
    timeout 60 gdb -q -batch -p "$server" -ex 'thread apply all bt 12' 2>/dev/null |
      grep -E '^(Thread|#)' | sed 's/^/  gdb: /' | head -60
  fi
fi
ut_wait_pid "$server" 5 >/dev/null
rc=$?
server=
echo "server: $(cat "$work/server.out" | tail -1), exit status $rc"
[ $rc -eq 0 ] || fail "the server did not exit 0 on QUIT (status $rc)"

stats=$(ut_stats "$work/server.err" udp_ud_sends udp_ud_receives udp_kernel_sends udp_kernel_receives \
  udp_drops_malformed udp_drops_unknown_socket udp_drops_reassembly udp_drops_budget udp_unreach_sent \
  udp_revokes_sent udp_revokes_received)
echo "server counters: $stats"
[ -n "$stats" ] || fail "server: no stats line (was libvsock loaded?)"
for name in udp_drops_malformed udp_drops_unknown_socket udp_unreach_sent udp_drops_reassembly; do
  value=$(ut_stat "$work/server.err" "$name")
  [ "${value:-0}" -gt 0 ] || fail "server: $name is ${value:-missing}, expected > 0"
done
grep -v ' stats: ' "$work/server.err" | head -20 | sed 's/^/server stderr: /'

if [ ${#failures[@]} -gt 0 ]; then
  echo "FAILED (${#failures[@]}):"
  printf '  %s\n' "${failures[@]}"
  exit 1
fi
echo "PASS"
