#!/bin/bash
# run_udp_pair.sh UDP_PAIR PRELOAD: UDP over UD (DESIGN decision 5) with an
# unmodified echo pair (udp_pair.c) on the device's address.
#
#   1. both ends preloaded, the server waiting in recvfrom, poll and epoll:
#      every echo byte-exact, none lost, and the datagrams went over UD —
#      at least 90% of each side's sends (the first ones go through the
#      kernel while the destination is resolved), fragments included, and
#      the device's sent-packet counter grew;
#   1b. bursts: a client that sends each round's datagrams with one
#      sendmmsg() and takes the echoes with recvmmsg(): every echo
#      byte-exact, none lost, and the client's UD sends were posted in
#      chains (udp_ud_posts well below udp_ud_sends: one doorbell per run);
#   1c. the same echo with the guest's netdev MTU at 4200 (UD MTU 4096:
#      fewer, larger fragments) when the test runs in the Soft-RoCE guest;
#      the MTU is put back after;
#   1d. a rules file that keeps the server's port on the kernel for the
#      client (`udp kernel role=client port=P`): every echo byte-exact and
#      nothing over UD either way (the server learns no path from a kernel
#      datagram);
#   2. mixed: a plain server with a preloaded client, and the reverse: every
#      echo byte-exact, nothing over UD (the plain side has no libvsock to
#      answer a resolution, so the preloaded side stays on the kernel);
#   3. the kernel alone, for the figure beside it.
# Prints MEASURED lines (seconds per run) and exits 0 when all held.
source "$(dirname "$0")/../upgrade/upgrade_test_lib.sh"
[ $# -eq 2 ] || { echo "usage: $0 UDP_PAIR PRELOAD"; exit 2; }
pair=$(ut_abs "$1") preload=$(ut_abs "$2")
addr=$(ut_address)
count=${VSOCK_UDP_PAIR_COUNT:-1100}
work=$(mktemp -d /tmp/udp_pair.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd /tmp || exit 1
counter=/sys/class/infiniband/${RXE_VM_DEVICE:-rxe0}/ports/1/hw_counters/sent_pkts
# A destination's resolution (SIDR) is bounded by the upgrade timeout; one
# that runs out caches the server as failed (every datagram of the run then
# goes through the kernel). The default 200 ms is short on a loaded host.
export VSOCK_UPGRADE_TIMEOUT_MS=${VSOCK_UPGRADE_TIMEOUT_MS:-3000}

# echo_pair NAME SERVER_PRELOAD CLIENT_PRELOAD WAIT CLIENT_RULE MODE ARGS...:
# a server that waits the WAIT way, and `udp_pair MODE ADDR PORT ARGS...`
# (client or burst) against it; sets SECS. CLIENT_RULE: a rules line for
# the client (or empty), PORT replaced by the server's port.
echo_pair() {
  local name=$1 server_lib=$2 client_lib=$3 wait=$4 rule=$5 mode=$6 port server status config=
  shift 6
  env ${server_lib:+LD_PRELOAD=$server_lib} VSOCK_STATS=1 "$pair" server "$addr" "$wait" \
    >"$work/$name.server" 2>"$work/$name.server.err" &
  server=$!
  port=$(ut_wait_line "$work/$name.server" '^READY ' 30 "$server") || ut_fail "$name: server did not start: $(cat "$work/$name.server.err")"
  if [ -n "$rule" ]; then
    config=$work/$name.conf
    echo "${rule//PORT/$port}" >"$config"
  fi
  timeout 300 env ${client_lib:+LD_PRELOAD=$client_lib} ${config:+VSOCK_CONFIG=$config} VSOCK_STATS=1 \
    "$pair" "$mode" "$addr" "$port" "$@" \
    >"$work/$name.client" 2>"$work/$name.client.err"
  status=$?
  ut_wait_pid "$server" 30 >/dev/null
  echo "$name: client: $(cat "$work/$name.client") | $(grep -h 'udp_pair:' "$work/$name.client.err" | head -3)"
  [ $status -eq 0 ] || ut_fail "$name: the client saw lost or wrong echoes (status $status)"
  SECS=$(sed -n 's/.* in \([0-9.]*\) s$/\1/p' "$work/$name.client")
}

# run NAME SERVER_PRELOAD CLIENT_PRELOAD WAIT [CLIENT_RULE]: COUNT echoes,
# one at a time, both ends waiting the WAIT way.
run() { echo_pair "$1" "$2" "$3" "$4" "${5:-}" client "$count" "$4"; }

# sends NAME SIDE: "ud=N kernel=M" of that side's stats.
sends() {
  echo "$(ut_stats "$work/$1.$2.err" udp_ud_sends udp_kernel_sends udp_ud_receives udp_resolutions udp_drops_reassembly udp_drops_budget)"
}

for wait in block poll epoll; do
  before=$(cat "$counter" 2>/dev/null || echo 0)
  run "both-$wait" "$preload" "$preload" "$wait"
  after=$(cat "$counter" 2>/dev/null || echo 0)
  for side in server client; do
    stats=$(sends "both-$wait" "$side")
    echo "both-$wait $side: $stats"
    ud=$(ut_stat "$work/both-$wait.$side.err" udp_ud_sends)
    [ -n "$ud" ] || ut_fail "both-$wait $side: no stats line (was libvsock loaded?)"
    [ "$ud" -ge $((count * 9 / 10)) ] || ut_fail "both-$wait $side: only $ud of $count datagrams went over UD"
  done
  echo "both-$wait: device sent_pkts grew by $((after - before))"
  [ $((after - before)) -ge "$count" ] || ut_fail "both-$wait: the device sent only $((after - before)) packets"
  echo "MEASURED udp echo ($wait, both preloaded): $SECS s for $count datagrams"
done

# burst NAME SERVER_PRELOAD CLIENT_PRELOAD: rounds of sendmmsg bursts of 32
# against a server in poll; sets SECS.
burst() { echo_pair "$1" "$2" "$3" poll "" burst "$rounds" 32; }
rounds=${VSOCK_UDP_BURST_ROUNDS:-100}
burst both-burst "$preload" "$preload"
echo "both-burst client: $(ut_stats "$work/both-burst.client.err" udp_ud_sends udp_ud_posts udp_kernel_sends udp_ud_receives udp_drops_budget)"
ud=$(ut_stat "$work/both-burst.client.err" udp_ud_sends)
posts=$(ut_stat "$work/both-burst.client.err" udp_ud_posts)
[ "${ud:-0}" -ge $((rounds * 32 * 9 / 10)) ] || ut_fail "both-burst: only ${ud:-0} of $((rounds * 32)) datagrams went over UD"
[ "${posts:-0}" -gt 0 ] && [ $((posts * 4)) -le "$ud" ] || ut_fail "both-burst: $posts posts for $ud UD datagrams: sendmmsg did not chain them"
echo "MEASURED udp bursts of 32 (sendmmsg/recvmmsg, both preloaded): $SECS s for $((rounds * 32)) datagrams, $posts doorbells"
burst kernel-burst "" ""
echo "MEASURED udp bursts of 32 (sendmmsg/recvmmsg, kernel): $SECS s for $((rounds * 32)) datagrams"

# The UD MTU follows the netdev's (rxe): 1500 gives 1024, 4200 gives 4096.
netdev=${RXE_VM_NETDEV:-}
if [ "${RXE_VM:-0}" = 1 ] && [ -n "$netdev" ] && old_mtu=$(cat "/sys/class/net/$netdev/mtu" 2>/dev/null) &&
  ip link set dev "$netdev" mtu 4200 2>/dev/null; then
  trap 'ip link set dev "$netdev" mtu "$old_mtu"; rm -rf "$work"' EXIT
  sleep 1
  active=$(ibv_devinfo -d "${RXE_VM_DEVICE:-rxe0}" | sed -n 's/.*active_mtu:[[:space:]]*\([0-9]*\).*/\1/p' | head -1)
  echo "netdev MTU 4200: UD active_mtu $active"
  [ "$active" = 4096 ] || ut_fail "with netdev MTU 4200 the port's active MTU is $active, not 4096"
  before=$(cat "$counter")
  run both-mtu4096 "$preload" "$preload" poll
  after=$(cat "$counter")
  ud=$(ut_stat "$work/both-mtu4096.client.err" udp_ud_sends)
  echo "both-mtu4096: $(sends both-mtu4096 client); device sent_pkts grew by $((after - before))"
  [ "${ud:-0}" -ge $((count / 2)) ] || ut_fail "both-mtu4096: only ${ud:-0} of $count datagrams went over UD"
  echo "MEASURED udp echo (poll, both preloaded, UD MTU 4096): $SECS s for $count datagrams, $((after - before)) packets"
  ip link set dev "$netdev" mtu "$old_mtu"
  trap 'rm -rf "$work"' EXIT
else
  echo "not in the Soft-RoCE guest as root: the UD MTU 4096 run is left out"
fi

run "rule-kernel" "$preload" "$preload" block "udp kernel role=client port=PORT"
for side in server client; do
  ud=$(ut_stat "$work/rule-kernel.$side.err" udp_ud_sends)
  echo "rule-kernel $side: $(sends rule-kernel "$side")"
  [ "${ud:-x}" = 0 ] || ut_fail "rule-kernel: the $side sent ${ud:-?} datagrams over UD against the client's rule"
done

run "plain-server" "" "$preload" block
ud=$(ut_stat "$work/plain-server.client.err" udp_ud_sends)
[ "${ud:-0}" -eq 0 ] || ut_fail "plain-server: the preloaded client sent $ud datagrams over UD to a plain server"
run "plain-client" "$preload" "" block
ud=$(ut_stat "$work/plain-client.server.err" udp_ud_sends)
[ "${ud:-0}" -eq 0 ] || ut_fail "plain-client: the preloaded server sent $ud datagrams over UD to a plain client"

run kernel "" "" block
echo "MEASURED udp echo (block, kernel): $SECS s for $count datagrams"
echo "PASS"
