#!/bin/bash
# run_integrity.sh TCP_INTEGRITY PRELOAD [--expect-rdma]
#
# Runs tcp_integrity (server and client in two processes) three times on
# ut_address (the Soft-RoCE VM's address when run through with-device.sh):
#   both    - client and server under LD_PRELOAD=PRELOAD
#   client  - client under the library, plain kernel server
#   server  - plain kernel client, server under the library
# Each run must verify every byte both ways, and both ends must print the
# same checksum lines. The library's stats (VSOCK_STATS=1) go to a log file
# per process and are printed. With --expect-rdma (or VSOCK_EXPECT_RDMA=1):
# "both" must show rdma_bytes_sent > 0 in each process; the mixed runs
# rdma_bytes_sent=0 and upgrades_done=0 in the preloaded process.
#
# Sizes: VSOCK_INTEGRITY_CONNS (default 8) connections of
# VSOCK_INTEGRITY_BYTES (default 4M) each way; VSOCK_INTEGRITY_FULL=1 means
# 8 x 256M (the issue's figure; long under TCG). VSOCK_INTEGRITY_SEED picks
# the data (default: from the clock, printed).
source "$(dirname "$0")/upgrade_test_lib.sh"
[ $# -ge 2 ] || { echo "usage: $0 TCP_INTEGRITY PRELOAD [--expect-rdma]"; exit 2; }
bin=$(ut_abs "$1") preload=$(ut_abs "$2")
shift 2
expect=0
ut_expect_rdma "$@" && expect=1

addr=$(ut_address)
conns=${VSOCK_INTEGRITY_CONNS:-8}
bytes=${VSOCK_INTEGRITY_BYTES:-4M}
[ "${VSOCK_INTEGRITY_FULL:-0}" = 1 ] && bytes=256M && conns=8
seed=${VSOCK_INTEGRITY_SEED:-$(date +%s%N | tail -c 10)}
timeout_s=${VSOCK_INTEGRITY_TIMEOUT:-150}
[ "${VSOCK_INTEGRITY_FULL:-0}" = 1 ] && timeout_s=${VSOCK_INTEGRITY_TIMEOUT:-7200}
work=$(mktemp -d /tmp/vsock-integrity.XXXXXX) || exit 2
trap 'rm -rf "$work"' EXIT
cd /tmp
echo "integrity on $addr: $conns connections x $bytes each way, seed $seed, timeout ${timeout_s}s, expect-rdma=$expect"

# run_side NAME PRELOADED ROLE PORT: tcp_integrity in the background, with
# or without the library; sets PID.
run_side() {
  local name=$1 preloaded=$2 role=$3 port=$4 lib=""
  [ "$preloaded" = 1 ] && lib=$preload
  env -u LD_PRELOAD ${lib:+LD_PRELOAD=$lib} VSOCK_STATS=1 VSOCK_LOG_FILE="$work/$name.stats" \
    "$bin" "$role" "$addr" "$port" "$conns" "$bytes" "$seed" --timeout "$timeout_s" \
    >"$work/$name.out" 2>"$work/$name.err" &
  PID=$!
}

show_logs() {
  local f
  for f in "$work"/"$1".*; do echo "---- $(basename "$f") ----"; tail -n 20 "$f"; done
}

# check_stats NAME PRELOADED: the process's stats line exists iff preloaded.
check_stats() {
  local name=$1 preloaded=$2
  if [ "$preloaded" = 0 ]; then
    [ -z "$(ut_stat "$work/$name.stats" tcp_sockets)" ] || ut_fail "$name: stats line from a process without the library"
    echo "  $name: kernel only"
    return
  fi
  [ -n "$(ut_stat "$work/$name.stats" tcp_sockets)" ] || { show_logs "$name"; ut_fail "$name: no stats line (library not loaded?)"; }
  echo "  $name: $(ut_stats_summary "$work/$name.stats")"
}

# pair LABEL CLIENT_PRELOADED SERVER_PRELOADED
pair() {
  local label=$1 cpre=$2 spre=$3 port spid cpid start rc
  start=$(date +%s.%N)
  run_side "$label.server" "$spre" server 0
  spid=$PID
  port=$(ut_wait_line "$work/$label.server.out" '^listening [0-9]+' 20 "$spid") ||
    { show_logs "$label.server"; ut_fail "$label: server did not start"; }
  run_side "$label.client" "$cpre" client "$port"
  cpid=$PID
  ut_wait_pid "$cpid" $((timeout_s + 30)); rc=$?
  [ $rc = 0 ] || { show_logs "$label.client"; show_logs "$label.server"; ut_fail "$label: client exit $rc"; }
  ut_wait_pid "$spid" 30; rc=$?
  [ $rc = 0 ] || { show_logs "$label.server"; ut_fail "$label: server exit $rc"; }
  grep '^conn ' "$work/$label.client.out" | sort >"$work/$label.client.sums"
  grep '^conn ' "$work/$label.server.out" | sort >"$work/$label.server.sums"
  [ "$(wc -l <"$work/$label.client.sums")" = "$conns" ] || ut_fail "$label: client printed the wrong number of connections"
  diff -u "$work/$label.client.sums" "$work/$label.server.sums" || ut_fail "$label: client and server checksums differ"
  echo "$label (client preload=$cpre, server preload=$spre): $conns connections verified both ways," \
    "$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f s", e - s }')"
  check_stats "$label.client" "$cpre"
  check_stats "$label.server" "$spre"
}

# expect_counter NAME COUNTER OP VALUE
expect_counter() {
  local v
  v=$(ut_stat "$work/$1.stats" "$2")
  [ "$v" "$3" "$4" ] || ut_fail "--expect-rdma: $1 has $2=$v, expected $3 $4"
}

pair both 1 1
pair client 1 0
pair server 0 1
if [ $expect = 1 ]; then
  expect_counter both.client rdma_bytes_sent -gt 0
  expect_counter both.server rdma_bytes_sent -gt 0
  for name in client.client server.server; do
    expect_counter "$name" rdma_bytes_sent -eq 0
    expect_counter "$name" upgrades_done -eq 0
  done
  echo "RDMA expectations hold"
fi
echo "PASS: integrity"
