# twohost_lib.sh - sourced by the tests/twohost scripts, which
# tests/rxe/two-hosts.sh runs on both hosts of the two-host bed: host a
# serves, host b is the client. Adds to pair_lib.sh (where the halves meet)
# and upgrade_test_lib.sh (stats lines, bounded waits) what both halves of
# every test do: a work directory, the end-of-run mark, and the evidence
# from the device and the kernel (rxe packet counters, TCP segments).
here_th=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here_th/../rxe/pair_lib.sh"
source "$here_th/../upgrade/upgrade_test_lib.sh"

TH_ROLE=$(pair_role)
TH_PEER=${RXE_VM_PEER_IPADDR:?not on a two-host bed}
TH_SELF=${RXE_VM_IPADDR:?not on a two-host bed}
TH_COUNTERS=/sys/class/infiniband/${RXE_VM_DEV:-rxe0}/ports/1/hw_counters
TH_WORK=$(mktemp -d /tmp/vsock-twohost.XXXXXX) || exit 2
# VSOCK_TH_RXE_DEBUG=1: rxe's own debug lines (why its responder refused a
# packet, say) go to the kernel log, and th_evidence prints the last ones.
if [ "${VSOCK_TH_RXE_DEBUG:-0}" = 1 ]; then
  mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug 2>/dev/null
  echo 'module rdma_rxe +p' > /sys/kernel/debug/dynamic_debug/control 2>/dev/null ||
    echo "twohost: no dynamic debug for rdma_rxe here" >&2
fi

th_exit() {
  local status=$?
  [ $status = 0 ] || { th_show_logs; th_device_trouble "at the failure"; }
  # VSOCK_RXE_KEEP=1: the whole work directory stays for a look afterwards
  # (two-hosts.sh keeps the shared pair directory then).
  [ "${VSOCK_RXE_KEEP:-0}" = 1 ] && cp -r "$TH_WORK" "$VSOCK_PAIR_DIR/work-$TH_ROLE" 2>/dev/null
  pair_done "$status"
  rm -rf "$TH_WORK"
  exit $status
}
trap th_exit EXIT

# Call after taking the arguments' paths: programs that create temp files
# must not run on a 9p share.
th_leave_share() { cd /tmp || exit 2; }

th_log() { echo "[$(date +%T)] $*"; }

# Prints the tail of every log of this half (called on failure).
th_show_logs() {
  local f
  for f in "$TH_WORK"/*; do
    [ -f "$f" ] || continue
    echo "---- $(basename "$f") ----"
    grep -v ' stats: ' "$f" | tail -n 40
  done
}

# th_device_packets: "SENT RECEIVED", the device's packet counters.
th_device_packets() { echo "$(cat "$TH_COUNTERS/sent_pkts") $(cat "$TH_COUNTERS/rcvd_pkts")"; }

# th_tcp_segments: "OUT IN", the kernel's TCP segment counters.
th_tcp_segments() { awk '$1 == "Tcp:" && $2 ~ /^[0-9]/ { print $12, $11 }' /proc/net/snmp; }

# th_evidence LABEL BEFORE_PKTS BEFORE_SEGS: logs what the device and the
# kernel's TCP counted since the BEFORE figures; leaves the device's packet
# growth (sent + received) in TH_DEVICE_DELTA and TCP's in TH_TCP_DELTA.
th_evidence() {
  local p0 p1 s0 s1 ps pr so si
  read -r p0 p1 <<< "$2"
  read -r s0 s1 <<< "$3"
  read -r ps pr <<< "$(th_device_packets)"
  read -r so si <<< "$(th_tcp_segments)"
  TH_DEVICE_DELTA=$((ps - p0 + pr - p1))
  TH_TCP_DELTA=$((so - s0 + si - s1))
  th_log "$1: device rxe0 packets sent $((ps - p0)) received $((pr - p1));" \
    "kernel TCP segments out $((so - s0)) in $((si - s1))"
  th_device_trouble "$1"
}

# th_device_trouble LABEL: the device's own account of trouble since boot
# (drops on its way out, sequence errors, retries): what made a queue pair
# fail, if one did.
th_device_trouble() {
  local name trouble=""
  for name in send_err rcvd_seq_err out_of_seq_request duplicate_request retry_exceeded_err \
    completer_retry_err rcvd_rnr_err send_rnr_err; do
    [ -r "$TH_COUNTERS/$name" ] && trouble+=" $name=$(cat "$TH_COUNTERS/$name")"
  done
  th_log "$1: rxe0 since boot:$trouble"
  [ "${VSOCK_TH_RXE_DEBUG:-0}" = 1 ] && dmesg | grep -i rxe | tail -n 20 | sed 's/^/  kernel: /'
  return 0
}

# th_kill_wait PID SIG SECS: signals PID and waits for it (SIGKILL after SECS).
th_kill_wait() {
  kill -s "$2" "$1" 2>/dev/null
  ut_wait_pid "$1" "$3"
}

# th_flap_when_flowing PID PACKETS: once this host's rxe0 received PACKETS
# more packets (60 s at most; PID must still run), takes this host's link
# down for 3 s and up again. TH_FAULT_AT: when it went down (ut_clock).
th_flap_when_flowing() {
  local pid=$1 want=$2 base i
  base=$(cat "$TH_COUNTERS/rcvd_pkts")
  for ((i = 0; i < 600; i++)); do
    [ $(($(cat "$TH_COUNTERS/rcvd_pkts") - base)) -ge "$want" ] && break
    kill -0 "$pid" 2>/dev/null || ut_fail "the client ended before the link could fail"
    sleep 0.1
  done
  th_log "$(($(cat "$TH_COUNTERS/rcvd_pkts") - base)) packets received; link down for 3 s"
  TH_FAULT_AT=$(ut_clock)
  ip link set "$RXE_VM_NETDEV" down
  sleep 3
  ip link set "$RXE_VM_NETDEV" up
  th_log "link up again"
}

# th_time_to_outcome LOG: from this host's debug lines in LOG (the library
# logged at debug level), when its connections found RDMA failed and when
# each had read the peer's Resume record, in seconds after TH_FAULT_AT
# (this host's link went down then; the other host's clock is not ours).
th_time_to_outcome() {
  local n first last m rfirst rlast
  read -r n first last <<<"$(ut_times_after "$1" 'RDMA failed .* goes on over TCP' "$TH_FAULT_AT")"
  read -r m rfirst rlast <<<"$(ut_times_after "$1" ': resumed on TCP$' "$TH_FAULT_AT")"
  th_log "MEASURED host $TH_ROLE: $n connections found RDMA failed ${first}-${last} s after its link went down;" \
    "$m resumed on TCP ${rfirst}-${rlast} s after it (the link came back at 3 s)"
}
