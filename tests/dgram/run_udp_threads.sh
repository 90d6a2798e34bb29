#!/bin/bash
# run_udp_threads.sh UDP_THREADS PRELOAD: four UDP sockets of one process,
# each with a thread of its own that waits without a timeout (recvfrom,
# poll, epoll), against a client that sends to them in turn and awaits
# each echo (udp_threads.c). With both ends preloaded the datagrams go over
# UD, and the one completion channel that every sleeper of the process
# watches is taken by one of them, often not the one the datagram is for:
# that one must still wake, at once (src/sock/dgram/sleeper_wake.hpp; it
# used to look again every 100 ms, and missed wake-ups cost up to that).
# Every echo byte-exact and none lost (each awaited 10 s: a sleeper never
# woken would sleep for good),
# at least 80% of the server's datagrams received over UD; the kernel's
# run beside it. Prints MEASURED lines and exits 0 when all held.
source "$(dirname "$0")/../upgrade/upgrade_test_lib.sh"
[ $# -eq 2 ] || { echo "usage: $0 UDP_THREADS PRELOAD"; exit 2; }
program=$(ut_abs "$1") preload=$(ut_abs "$2")
addr=$(ut_address)
rounds=${VSOCK_UDP_THREADS_ROUNDS:-60}
sockets=4
work=$(mktemp -d /tmp/udp_threads.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd /tmp || exit 1
export VSOCK_UPGRADE_TIMEOUT_MS=${VSOCK_UPGRADE_TIMEOUT_MS:-3000}

# one NAME PRELOAD WAIT: a server of $sockets threads waiting the WAIT way
# and the client against it, both with PRELOAD (or none).
one() {
  local name=$1 lib=$2 wait=$3 server ports status i
  env ${lib:+LD_PRELOAD=$lib} VSOCK_STATS=1 timeout -k 5 120 "$program" server "$addr" "$wait" "$sockets" \
    >"$work/$name.server" 2>"$work/$name.server.err" &
  server=$!
  for ((i = 0; i < 300; i++)); do
    ports=$(sed -n 's/^READY //p' "$work/$name.server")
    [ -n "$ports" ] && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$ports" ] || ut_fail "$name: the server did not start: $(cat "$work/$name.server.err")"
  # shellcheck disable=SC2086
  env ${lib:+LD_PRELOAD=$lib} VSOCK_STATS=1 timeout -k 5 120 "$program" client "$addr" "$rounds" $ports \
    >"$work/$name.client" 2>"$work/$name.client.err"
  status=$?
  ut_wait_pid "$server" 30 >/dev/null
  echo "$name: client: $(cat "$work/$name.client") | server: $(grep -h 'echoed' "$work/$name.server")"
  grep -h 'udp_threads:' "$work/$name.client.err" "$work/$name.server.err" | head -n 20
  [ $status -eq 0 ] || ut_fail "$name: the client saw lost or wrong echoes (status $status)"
  grep -q "server echoed $((rounds * sockets))" "$work/$name.server" ||
    ut_fail "$name: the server's threads did not all end with every echo (a sleeper never woke?)"
}

# measured FILE: the slowest echo and how many took over 100 ms.
measured() {
  sed -n 's/.*slowest \([0-9.]*\) ms over_100ms \([0-9]*\).*/\1 ms slowest echo, \2 over 100 ms/p' "$1"
}

for wait in block poll epoll; do
  one "both-$wait" "$preload" "$wait"
  stats=$(ut_stats "$work/both-$wait.server.err" udp_ud_receives udp_kernel_receives wait_sleeps)
  echo "both-$wait server: $stats"
  ud=$(ut_stat "$work/both-$wait.server.err" udp_ud_receives)
  [ -n "$ud" ] || ut_fail "both-$wait: no stats line from the server (was libvsock loaded?)"
  [ "$ud" -ge $((rounds * sockets * 8 / 10)) ] ||
    ut_fail "both-$wait: the server received only $ud of $((rounds * sockets)) datagrams over UD"
  echo "MEASURED udp echo to $sockets threads ($wait, both preloaded): $(measured "$work/both-$wait.client")"
  one "kernel-$wait" "" "$wait"
  echo "MEASURED udp echo to $sockets threads ($wait, kernel): $(measured "$work/kernel-$wait.client")"
done
echo "udp_threads: all held"
