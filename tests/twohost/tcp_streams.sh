#!/bin/bash
# tcp_streams.sh TCP_INTEGRITY PRELOAD [upgrade|flap|mixed]
# Runs on both hosts of the two-host bed (tests/rxe/two-hosts.sh): host a
# runs the tcp_integrity server, host b its client; VSOCK_TH_CONNS
# connections (default 4) each stream VSOCK_TH_BYTES (default 16M) both
# ways, every byte verified, and both ends must print the same checksums.
#
#   upgrade  the kernel pair, then both ends under the library (once
#            more if a connection stayed on TCP or resumed there, the
#            emulated link dropping packets under load, or the client wrote
#            before the server's Bound). The
#            library's run must have upgraded every connection on both
#            hosts, sent at most 10% of its bytes on TCP from either end
#            (what the server writes before the client's Switch arrives
#            goes there, and the client's writes before a late Bound), and
#            moved its data
#            through each host's rxe0 (packet counters) rather than the
#            kernel's TCP (segment counters, printed beside the kernel's).
#   flap     both ends under the library; once data flows over the device,
#            host b takes its link down for 3 s and up again (TCP and RDMA
#            both stall; RDMA's retries run out first). Every connection
#            completes byte-exact, both hosts resumed at least one on TCP
#            (docs/protocol.md §5.1) and reset none.
#   mixed    one host without the library: the server preloaded and the
#            client plain, then the reverse. Byte-exact, nothing over RDMA.
source "$(dirname "$0")/twohost_lib.sh"
[ $# -ge 2 ] || { echo "usage: $0 TCP_INTEGRITY PRELOAD [upgrade|flap|mixed]"; exit 2; }
bin=$(ut_abs "$1") preload=$(ut_abs "$2") scenario=${3:-upgrade}
conns=${VSOCK_TH_CONNS:-4}
bytes=${VSOCK_TH_BYTES:-16M}
seed=${VSOCK_TH_SEED:-20261125}
limit=${VSOCK_TH_TIMEOUT:-240}
th_leave_share

# run_side NAME PRELOADED ROLE ADDR PORT: starts tcp_integrity, PID in PID.
run_side() {
  local name=$1 preloaded=$2
  shift 2
  local envs=(VSOCK_STATS=1 VSOCK_LOG_LEVEL=${VSOCK_TH_LOG_LEVEL:-info} VSOCK_LOG_FILE="$TH_WORK/$name.log" VSOCK_UPGRADE_TIMEOUT_MS=5000)
  [ "$preloaded" = 1 ] && envs+=(LD_PRELOAD="$preload")
  env "${envs[@]}" "$bin" "$@" "$conns" "$bytes" "$seed" --timeout "$limit" \
    > "$TH_WORK/$name.out" 2> "$TH_WORK/$name.err" &
  PID=$!
}

# One run; NAME names it on both hosts. Host a: the server, checks that
# both ends' checksums agree. Host b: the client, reports the time.
# With FLAP=1, host b takes its link down for 3 s mid-stream.
one_run() {  # NAME SERVER_PRELOADED CLIENT_PRELOADED
  local name=$1 spre=$2 cpre=$3 port pkts segs start sums stats
  pkts=$(th_device_packets) segs=$(th_tcp_segments)
  if [ "$TH_ROLE" = a ]; then
    : > "$TH_WORK/$name.log"
    run_side "$name" "$spre" server "$TH_SELF" 0
    port=$(ut_wait_line "$TH_WORK/$name.out" '^listening [0-9]+' 30 "$PID") || ut_fail "$name: the server did not start"
    pair_mark "$name-server" "$port"
    sums=$(pair_wait "$name-client" $((limit + 60))) || ut_fail "$name: no result from host b"
    ut_wait_pid "$PID" 60 || ut_fail "$name: the server failed (exit $?)"
    diff <(echo "$sums" | sort) <(grep '^conn ' "$TH_WORK/$name.out" | sort) \
      || ut_fail "$name: the two hosts' checksums differ"
    [ "$(grep -c '^conn ' "$TH_WORK/$name.out")" = "$conns" ] || ut_fail "$name: the server verified fewer than $conns connections"
  else
    port=$(pair_wait "$name-server" 60) || ut_fail "$name: host a's server did not start"
    : > "$TH_WORK/$name.log"
    start=$(date +%s.%N)
    run_side "$name" "$cpre" client "$TH_PEER" "$port"
    [ "${FLAP:-0}" = 1 ] && th_flap_when_flowing "$PID" 20000
    ut_wait_pid "$PID" $((limit + 30)) || ut_fail "$name: the client failed (exit $?)"
    th_log "$name: $conns connections x $bytes each way verified in" \
      "$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f s", e - s }')"
    pair_mark "$name-client" "$(grep '^conn ' "$TH_WORK/$name.out")"
  fi
  th_evidence "$name ($TH_ROLE)" "$pkts" "$segs"
  LAST_LOG=$TH_WORK/$name.log
  stats=$(ut_stats "$LAST_LOG" upgrades_done rdma_bytes_sent tcp_bytes_sent stream_resumes upgrade_resets)
  [ -n "$stats" ] && th_log "$name ($TH_ROLE): $stats"
  # Why a connection stayed on TCP, if one did (the fallback counters).
  stats=$(ut_stats "$LAST_LOG" upgrade_attempts fallback_declined fallback_rejected fallback_no_listener \
    fallback_timeout fallback_cached_peer fallback_peer_closed fallback_no_request fallback_refused)
  [ -n "$stats" ] && th_log "$name ($TH_ROLE): $stats"
  return 0
}

# One counter of the last run's stats line.
stat_of() { ut_stat "$LAST_LOG" "$1"; }

case $scenario in
  upgrade)
    one_run kernel 0 0
    kernel_tcp=$TH_TCP_DELTA
    one_run libvsock 1 1
    # On a loaded host the emulated link drops packets: an rdma_cm connect
    # can time out, or rxe fail a queue pair (the connection then resumes on
    # TCP, protocol.md §5.1, and new ones to that peer stay there a while).
    # Both are right, both leave a connection on TCP, and CI saw each once.
    # And a client write that comes before the server's Bound (an early
    # upgrade: its accept() came after the request) goes on TCP by design
    # (protocol.md §2): 1 run in 3 here sent ~68 kB so. Such a run is
    # repeated once, by both hosts together (they agree through the pair
    # directory); the second must be clean.
    verdict=clean
    [ "$(stat_of upgrades_done)" -ge "$conns" ] && [ "$(stat_of stream_resumes)" = 0 ] || verdict=short
    [ "$TH_ROLE" = a ] || [ "$(stat_of tcp_bytes_sent)" = 0 ] || verdict=short
    pair_mark libvsock-verdict "$verdict"
    peer_verdict=$(pair_wait libvsock-verdict 120) || ut_fail "no verdict from the other host"
    if [ "$verdict" != clean ] || [ "$peer_verdict" != clean ]; then
      th_log "libvsock: a connection stayed on TCP, resumed there, or the client wrote before Bound" \
        "(this host $verdict, the other $peer_verdict): once more"
      one_run libvsock-again 1 1
    fi
    [ "$(stat_of upgrades_done)" -ge "$conns" ] || ut_fail "host $TH_ROLE upgraded $(stat_of upgrades_done) of $conns connections"
    # The client's connect waits for the upgrade (and, in a clean run, the
    # server's Bound came first), so none of its bytes go on TCP; but a
    # run whose Bound came late (the early upgrade above) may repeat that
    # under load: both runs of CI at e43a6b8 did (398,200 bytes). The
    # server writes at once after accept (its greeting, then its stream):
    # what it writes before the client's Switch comes goes on TCP
    # (protocol.md §2), more across a slow link. At most 10% on TCP for
    # either, after the repeat.
    [ "$(stat_of rdma_bytes_sent)" -ge $(($(stat_of tcp_bytes_sent) * 9)) ] \
      || ut_fail "host $TH_ROLE sent $(stat_of tcp_bytes_sent) application bytes on TCP against $(stat_of rdma_bytes_sent) over RDMA"
    [ "$(stat_of rdma_bytes_sent)" -gt 0 ] || ut_fail "host $TH_ROLE sent nothing over RDMA"
    [ "$TH_DEVICE_DELTA" -ge 1000 ] || ut_fail "host $TH_ROLE: rxe0 counted only $TH_DEVICE_DELTA packets"
    # The kernel's run moved the same bytes in TCP segments; the library's
    # TCP carries only handshakes, requests and closes.
    [ "$TH_TCP_DELTA" -lt $((kernel_tcp / 10)) ] \
      || ut_fail "host $TH_ROLE: $TH_TCP_DELTA TCP segments under the library against $kernel_tcp under the kernel"
    ;;
  flap)
    FLAP=1 one_run flap 1 1
    [ "$(stat_of stream_resumes)" -ge 1 ] || ut_fail "host $TH_ROLE resumed no connection on TCP"
    [ "$(stat_of upgrade_resets)" = 0 ] || ut_fail "host $TH_ROLE reset a connection"
    ;;
  mixed)
    one_run server-only 1 0
    [ "$TH_ROLE" = b ] || [ "$(stat_of rdma_bytes_sent)" = 0 ] || ut_fail "server-only: host a sent over RDMA"
    one_run client-only 0 1
    [ "$TH_ROLE" = a ] || [ "$(stat_of rdma_bytes_sent)" = 0 ] || ut_fail "client-only: host b sent over RDMA"
    ;;
  *) ut_fail "unknown scenario $scenario" ;;
esac
echo "PASS: two hosts, TCP $scenario (host $TH_ROLE)"
