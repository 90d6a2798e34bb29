#!/bin/bash
# run_parked_budget.sh PRELOAD
#
# Parked channels give their memory back (docs/protocol.md §1.2): both
# processes preloaded with VSOCK_RING_INITIAL_SIZE=65536 (a channel then
# holds about 148 KiB: its ring, the send buffer that mirrors the peer's,
# the message slots), one of them with VSOCK_MEMORY_BUDGET_MIB=1 (six
# channels fit, seven do not): the server in one run, the client in the
# other. parked_budget.py's client opens 6 connections to the server's
# port A at once (each echoes 256 B checked byte for byte), closes them
# (their channels park on both sides), then makes 6 connections one after
# the other to the same server process's port B: no parked channel leads
# there, so each needs a new one, which the budget refuses while the
# parked ones hold it.
#
# Passes when, in each run: every echo is byte-exact (the PHASE lines are
# those of the run without the library); all 12 connections upgraded on
# both sides and none stayed on TCP for want of memory
# (fallback_no_resources=0); the side with the budget closed parked
# channels for the new ones (parked_yielded > 0) and registered no more
# than the budget (registered_bytes_peak). Prints MEASURED lines with the
# counters.
source "$(dirname "$0")/upgrade_test_lib.sh"
[ $# -ge 1 ] || { echo "usage: $0 PRELOAD"; exit 2; }
preload=$(ut_abs "$1")
here=$(cd "$(dirname "$0")" && pwd)
prog="$here/parked_budget.py"
addr=$(ut_address)
held=6 sequential=6 bytes=256 budget_mib=1
export VSOCK_UPGRADE_TIMEOUT_MS=${VSOCK_UPGRADE_TIMEOUT_MS:-3000}
work=$(mktemp -d "${TMPDIR:-/tmp}/vsock-parked-budget.XXXXXX") || exit 2
cd /tmp
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill -KILL "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
problems=()

port_a=$(ut_free_port "$addr") port_b=$(ut_free_port "$addr")

# run COLUMN ENV...: server and client; the client's output in
# COLUMN.client.out. SERVER_VAR=VALUE goes to the server only, CLIENT_VAR=VALUE
# to the client only.
only() {  # only SERVER_|CLIENT_ ENV...: the common ones and the prefixed ones, unprefixed
  local prefix=$1 assignment
  shift
  for assignment in "$@"; do
    case "$assignment" in
      "$prefix"*) echo "${assignment#"$prefix"}" ;;
      SERVER_* | CLIENT_*) ;;
      *) echo "$assignment" ;;
    esac
  done
}
run() {
  local column=$1
  shift
  local server_env client_env
  mapfile -t server_env < <(only SERVER_ "$@")
  mapfile -t client_env < <(only CLIENT_ "$@")
  env "${server_env[@]}" VSOCK_LOG_FILE="$work/$column.server.log" python3 "$prog" server "$addr" "$port_a" "$port_b" \
    >"$work/$column.server.out" 2>&1 &
  server_pid=$!
  ut_wait_line "$work/$column.server.out" '^READY' 30 "$server_pid" >/dev/null || {
    cat "$work/$column.server.out"
    ut_fail "$column: server did not start"
  }
  env "${client_env[@]}" VSOCK_LOG_FILE="$work/$column.client.log" timeout -k 5 120 \
    python3 "$prog" client "$addr" "$port_a" "$port_b" "$bytes" "$held" "$sequential" \
    >"$work/$column.client.out" 2>"$work/$column.client.err" || problems+=("$column: client exit $?")
  kill -TERM "$server_pid" 2>/dev/null
  ut_wait_pid "$server_pid" 20 >/dev/null 2>&1
  server_pid=""
  sed "s/^/MEASURED path=$column /" "$work/$column.client.out"
}

run kernel LD_PRELOAD=
lib=(LD_PRELOAD="$preload" VSOCK_STATS=1 VSOCK_RING_INITIAL_SIZE=65536)
budget=VSOCK_MEMORY_BUDGET_MIB=$budget_mib
run server-budget "${lib[@]}" SERVER_$budget
run client-budget "${lib[@]}" CLIENT_$budget

names="upgrades_done upgrade_attached channels_parked parked_yielded fallback_no_resources registered_bytes_peak"
total=$((held + sequential))
budget_bytes=$((budget_mib * 1048576))
for column in server-budget client-budget; do
  diff "$work/kernel.client.out" "$work/$column.client.out" >/dev/null ||
    problems+=("$column: the client's output differs from the kernel's")
  for side in client server; do
    log="$work/$column.$side.log"
    echo "MEASURED $column $side: $(ut_stats "$log" $names)"
    up=$(ut_stat "$log" upgrades_done) short=$(ut_stat "$log" fallback_no_resources)
    [ "${up:-0}" = "$total" ] || problems+=("$column $side: ${up:-0} of $total connections upgraded")
    [ "${short:-0}" = 0 ] || problems+=("$column $side: $short connections stayed on TCP for want of memory")
    [ "$column" = "$side-budget" ] || continue
    yielded=$(ut_stat "$log" parked_yielded) peak=$(ut_stat "$log" registered_bytes_peak)
    [ "${yielded:-0}" -gt 0 ] || problems+=("$column $side: no parked channel gave its memory back")
    [ -n "$peak" ] && [ "$peak" -le "$budget_bytes" ] ||
      problems+=("$column $side: registered_bytes_peak=${peak:-none} above the budget $budget_bytes")
  done
done

if [ ${#problems[@]} -gt 0 ]; then
  for f in "$work"/*.err "$work"/*.log; do echo "---- $(basename "$f")"; grep -v " stats: " "$f" | tail -n 15; done
  printf 'FAIL: %s\n' "${problems[@]}"
  exit 1
fi
echo "PASS: parked channels gave their memory to new connections on either side; all $total upgraded within the budget, byte-exact"
