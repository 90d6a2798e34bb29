#!/bin/bash
# run_memory_budget.sh VSOCK_FORK_COST PRELOAD
#
# The registered-memory budget (setting memory_budget_mib, issue 13 item 5):
# a preloaded `vsock_fork_cost server` (one thread, epoll, echoes) with
# VSOCK_MEMORY_BUDGET_MIB small enough for only some of the connections
# (default 8 MiB: about 56 channels of a 64 KiB ring each), and a preloaded
# `vsock_fork_cost client --forks 0` without a budget that opens 200
# connections (VSOCK_RING_SIZE=65536 on both), each upgraded by one 64 B
# echo, keeps them all open, then echoes once more on each.
#
# Passes when: all 200 opened and every echo came back byte-exact (no
# application error: the connections the budget left out stayed on TCP);
# the server's upgrades_done is > 0 and < 200; its fallback_no_resources is
# > 0 and equals the connections it did not upgrade (200 - upgrades_done);
# its registered_bytes_peak is within the budget; and no
# `libvsock[PID]: error:` line is in either process's log. Prints one
# MEASURED line with the figures and both processes' counters.
source "$(dirname "$0")/upgrade_test_lib.sh"
[ $# -ge 2 ] || { echo "usage: $0 VSOCK_FORK_COST PRELOAD"; exit 2; }
bin=$(ut_abs "$1") preload=$(ut_abs "$2")
addr=$(ut_address)
conns=200
budget_mib=${VSOCK_BUDGET_TEST_MIB:-8}
work=$(mktemp -d /tmp/vsock-budget.XXXXXX) || exit 2
cd /tmp || exit 2
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill -KILL "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
ulimit -n 4096 2>/dev/null
common=(VSOCK_STATS=1 VSOCK_RING_SIZE=65536 VSOCK_UPGRADE_TIMEOUT_MS=3000)

env -u LD_PRELOAD LD_PRELOAD="$preload" "${common[@]}" VSOCK_LOG_FILE="$work/server.log" \
  VSOCK_MEMORY_BUDGET_MIB="$budget_mib" "$bin" server --addr "$addr" --port 0 >"$work/server.out" 2>&1 &
server_pid=$!
port=$(ut_wait_line "$work/server.out" '^READY [0-9]+$' 30 "$server_pid") ||
  { cat "$work/server.out"; ut_fail "server did not start"; }

timeout -k 5 300 env -u LD_PRELOAD LD_PRELOAD="$preload" "${common[@]}" VSOCK_LOG_FILE="$work/client.log" \
  "$bin" client --addr "$addr" --port "$port" --conns "$conns" --forks 0 --seconds 240 --open-seconds 150 \
  >"$work/client.out" 2>&1
rc=$?
kill -TERM "$server_pid" 2>/dev/null
ut_wait_pid "$server_pid" 60 >/dev/null 2>&1
server_pid=""

result=$(grep '^result ' "$work/client.out")
limits=$(grep '^limits ' "$work/client.out")
val() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
opened=$(val opened "$result") failed=$(val open_failed "$result")
checked=$(val checked_after "$result") echoed=$(val echo_after "$result")
s_up=$(ut_stat "$work/server.log" upgrades_done)
s_nr=$(ut_stat "$work/server.log" fallback_no_resources)
s_peak=$(ut_stat "$work/server.log" registered_bytes_peak)
c_up=$(ut_stat "$work/client.log" upgrades_done)
budget_bytes=$((budget_mib * 1048576))
echo "MEASURED conns=$conns budget_mib=$budget_mib opened=${opened:-0} echo_after=${echoed:-0}/${checked:-0}" \
  "open_s=$(val open_s "$result") server_upgrades_done=${s_up:-none} server_fallback_no_resources=${s_nr:-none}" \
  "server_registered_bytes_peak=${s_peak:-none} (budget $budget_bytes, $(awk -v p="${s_peak:-0}" -v u="${s_up:-0}" 'BEGIN { if (u > 0) printf "%.1f", p / u / 1024; else printf "-" }') KiB per upgraded)" \
  "client_upgrades_done=${c_up:-none} client_first_fallback_at=$(val first_fallback_at "$limits")" \
  "client_first_fallback=$(val first_fallback "$limits")"
echo "  server: $(ut_stats_summary "$work/server.log") fallback_no_resources=${s_nr:-} registered_bytes=$(ut_stat "$work/server.log" registered_bytes)"
echo "  client: $(ut_stats_summary "$work/client.log") fallback_no_resources=$(ut_stat "$work/client.log" fallback_no_resources)"
warns=$(grep -hE 'libvsock\[[0-9]+\]: warn: ' "$work/server.log" "$work/client.log" | sed -E 's/^libvsock\[[0-9]+\]: //' | sort | uniq -c | head -n 5)
[ -n "$warns" ] && echo "  warn lines:" && echo "$warns"

# Every check is made and every failure said, then the verdict.
problems=()
check() { eval "$1" || problems+=("$2"); }
check '[ "$rc" = 0 ]' "client exit $rc"
check '[ "$opened" = "$conns" ] && [ "$failed" = 0 ]' "opened ${opened:-none} of $conns, ${failed:-?} failed"
check '[ "$checked" = "$conns" ] && [ "$echoed" = "$conns" ]' \
  "echo after: ${echoed:-none} of ${checked:-none} checked, $conns expected"
check '[ -n "$s_up" ] && [ "$s_up" -gt 0 ] && [ "$s_up" -lt "$conns" ]' \
  "server upgrades_done=${s_up:-none}: expected some but not all of $conns"
check '[ "${s_nr:-0}" -gt 0 ]' "server fallback_no_resources=${s_nr:-none}: the budget turned nobody away"
check '[ -n "$s_up" ] && [ "${s_nr:-0}" = $((conns - ${s_up:-0})) ]' \
  "server fallback_no_resources=${s_nr:-none}, but $((conns - ${s_up:-0})) connections were not upgraded"
check '[ -n "$s_peak" ] && [ "$s_peak" -le "$budget_bytes" ]' \
  "server registered_bytes_peak=${s_peak:-none} above the budget $budget_bytes"
errors=$(grep -hE 'libvsock\[[0-9]+\]: error: ' "$work/server.log" "$work/client.log" "$work/server.out" "$work/client.out" |
  sort | uniq -c | head -n 5)
check '[ -z "$errors" ]' "error lines from the library: $errors"
if [ ${#problems[@]} -gt 0 ]; then
  echo "---- client ----"; tail -n 5 "$work/client.out"
  echo "---- server ----"; tail -n 5 "$work/server.out"
  printf 'FAIL: %s\n' "${problems[@]}"
  exit 1
fi
echo "PASS: $s_up of $conns connections upgraded within the $budget_mib MiB budget, $s_nr stayed on TCP (no_resources), all $conns echoed"
