#!/bin/bash
# run_peer_killed.sh TCP_INTEGRITY PRELOAD
#
# A dead peer process still ends the connection, with the kernel's error,
# now that a failed RDMA path resumes on TCP (docs/protocol.md §5.1): on
# VSOCK_KILL_CONNS (default 4) tcp_integrity connections streaming both
# ways, one end is killed with SIGKILL mid-stream (the server, then in a
# second pair the client); the survivor must fail every connection with an
# error (early EOF, ECONNRESET or EPIPE: never a byte wrong, never a hang)
# within 10 s. Each case runs with both ends under the library and with
# neither; the time from the kill to the survivor's exit is printed for
# both (MEASURED lines).
source "$(dirname "$0")/upgrade_test_lib.sh"
[ $# -ge 2 ] || { echo "usage: $0 TCP_INTEGRITY PRELOAD"; exit 2; }
bin=$(ut_abs "$1") preload=$(ut_abs "$2")
addr=$(ut_address)
conns=${VSOCK_KILL_CONNS:-4}
bound_s=10
work=$(mktemp -d /tmp/vsock-kill.XXXXXX) || exit 2
trap 'kill -KILL $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
cd /tmp

side() {  # side LABEL ROLE PORT PRELOADED: sets PID
  env -u LD_PRELOAD ${4:+LD_PRELOAD=$preload} VSOCK_STATS=1 VSOCK_LOG_LEVEL=info VSOCK_LOG_FILE="$work/$1.log" \
    VSOCK_UPGRADE_TIMEOUT_MS=3000 "$bin" "$2" "$addr" "$3" "$conns" 1G 7 --timeout 120 \
    >"$work/$1.out" 2>"$work/$1.err" &
  PID=$!
}

# case VICTIM(server|client) PRELOADED("" or 1)
case_run() {
  local victim=$1 lib=$2 label port spid cpid dead alive at end rc mode
  mode=${lib:+libvsock}
  mode=${mode:-kernel}
  label=$victim-$mode
  side "$label.server" server 0 "$lib"
  spid=$PID
  port=$(ut_wait_line "$work/$label.server.out" '^listening [0-9]+' 30 "$spid") || ut_fail "$label: server did not start"
  side "$label.client" client "$port" "$lib"
  cpid=$PID
  # Every connection made (under the library each connect() waits for its
  # upgrade: on a loaded host the client once had not made all of them
  # 4 s on, and the server waited in accept() for its --timeout), then a
  # while of streaming.
  ut_wait_line "$work/$label.server.out" '^accepted ' 60 "$spid" >/dev/null ||
    { cat "$work/$label.server.err" "$work/$label.client.err"; ut_fail "$label: the connections were not made within 60 s"; }
  sleep 2
  kill -0 "$cpid" 2>/dev/null || { cat "$work/$label.client.err"; ut_fail "$label: the client ended early"; }
  if [ "$victim" = server ]; then dead=$spid alive=$cpid; else dead=$cpid alive=$spid; fi
  at=$(date +%s.%N)
  { kill -KILL "$dead"; wait "$dead"; } 2>/dev/null  # (quiet: no "Killed" line)
  ut_wait_pid "$alive" $((bound_s + 20)); rc=$?
  end=$(date +%s.%N)
  local secs survivor
  secs=$(awk -v s="$at" -v e="$end" 'BEGIN { printf "%.2f", e - s }')
  if [ "$victim" = server ]; then survivor=client; else survivor=server; fi
  echo "MEASURED $label: the $survivor ended ${secs} s after the $victim was killed (exit $rc)"
  grep -E 'differs|extra bytes|different bytes' "$work/$label.$survivor.err" &&
    ut_fail "$label: the $survivor read wrong bytes"
  [ "$rc" != 0 ] && [ "$rc" != 137 ] || {
    tail "$work/$label.$survivor.err"
    ut_show_log "$work/$label.$survivor.log" 40
    ut_fail "$label: the $survivor did not fail its connections (exit $rc)"
  }
  awk -v s="$secs" -v b="$bound_s" 'BEGIN { exit !(s <= b) }' ||
    { ut_show_log "$work/$label.$survivor.log" 40; ut_fail "$label: ${secs} s is beyond the ${bound_s} s bound"; }
  if [ -n "$lib" ]; then
    [ "$(ut_stat "$work/$label.$survivor.log" upgrades_done)" -ge 1 ] ||
      ut_fail "$label: no connection of the $survivor was on RDMA"
    echo "  $survivor: $(ut_stats "$work/$label.$survivor.log" upgrades_done stream_resumes upgrade_resets rdma_bytes_received)"
  fi
}

for victim in server client; do
  case_run "$victim" ""
  case_run "$victim" 1
done
echo "PASS: a killed peer ends the connection with an error within ${bound_s} s, with and without the library"
