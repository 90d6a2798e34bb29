# Shared helpers of the tests/dgram real-program scripts (sourced, not run):
# tests/apps/app_test_lib.sh (servers, ports, bounded waits, the library on
# or off, its stats), plus the figures a UDP-over-UD test prints beside the
# kernel's: the device's packet counters and the library's UDP counters.
source "$(dirname "${BASH_SOURCE[0]}")/../apps/app_test_lib.sh"

DG_HW=/sys/class/infiniband/${RXE_VM_DEV:-rxe0}/ports/1/hw_counters

# dg_device_init: the device's address (never loopback: rdma_cm cannot use
# it) and a device whose counters can be read.
dg_device_init() {
  app_device_init
  [ -r "$DG_HW/sent_pkts" ] || app_fail "no rxe counters at $DG_HW (not in the Soft-RoCE guest?)"
}

# dg_rxe: "SENT RECEIVED RECVS" of the device so far: packets sent and
# received, and receive work requests completed (rdma_recvs; a UD packet that
# finds no receive posted is dropped: RECEIVED grows, RECVS does not).
dg_rxe() { echo "$(cat "$DG_HW/sent_pkts") $(cat "$DG_HW/rcvd_pkts") $(cat "$DG_HW/rdma_recvs" 2>/dev/null || echo 0)"; }

# dg_now: seconds since the epoch, with fractions.
dg_now() { date +%s.%N; }
dg_secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# dg_udp LOG: reads LOG's stats lines (app_stats) and sets UD_SENDS,
# K_SENDS, UD_RECVS, K_RECVS (summed over the processes that logged there);
# prints them with the resolutions and drops on one line. Fails when LOG
# has no stats line (the library was not loaded, or the process did not
# exit cleanly).
dg_udp() {
  local log=$1 what=$2 name line=""
  app_stats "$log" || app_fail "$what: no stats line in $(basename "$log") (was the library loaded? did it exit cleanly?)"
  UD_SENDS=${APP_STATS[udp_ud_sends]:-0} K_SENDS=${APP_STATS[udp_kernel_sends]:-0}
  UD_RECVS=${APP_STATS[udp_ud_receives]:-0} K_RECVS=${APP_STATS[udp_kernel_receives]:-0}
  for name in udp_sockets udp_ud_sends udp_kernel_sends udp_ud_receives udp_kernel_receives udp_resolutions \
      udp_resolution_failures udp_drops_budget udp_drops_reassembly udp_drops_unknown_socket udp_revokes_sent \
      udp_announces_sent udp_announces_received; do
    line+=" $name=${APP_STATS[$name]:-0}"
  done
  app_log "$what:$line"
}

# dg_expect_ud LOG WHAT MIN_SENDS MIN_RECVS: the process(es) that logged to
# LOG sent at least MIN_SENDS and received at least MIN_RECVS datagrams
# over UD, and (when MIN_SENDS > 0) most of what they sent went that way (at
# least 9 in 10; the first datagrams to a destination go through the kernel
# while it resolves).
dg_expect_ud() {
  local log=$1 what=$2 min_s=$3 min_r=$4
  dg_udp "$log" "$what"
  [ "$UD_SENDS" -ge "$min_s" ] || app_fail "$what: udp_ud_sends=$UD_SENDS, expected at least $min_s"
  [ "$UD_RECVS" -ge "$min_r" ] || app_fail "$what: udp_ud_receives=$UD_RECVS, expected at least $min_r"
  [ "$min_s" -eq 0 ] || [ "$UD_SENDS" -ge $((K_SENDS * 9)) ] ||
    app_fail "$what: udp_ud_sends=$UD_SENDS but udp_kernel_sends=$K_SENDS"
}

# dg_why_kernel LOG: the library's own reasons, from its debug log, why
# sockets left UD or destinations stayed on the kernel (deduplicated).
dg_why_kernel() {
  grep -hoE 'udp: [^\[]*(leaves UD|kernel|refused|failed)[^\[]*' "$@" 2>/dev/null | sed 's/ *$//' | sort | uniq -c | head -n 12
}
