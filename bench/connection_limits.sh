#!/usr/bin/env bash
# How many TCP connections one preloaded process pair can hold, what each
# costs and what runs out first (issue 13 item 5). Reported, never asserted
# (docs/performance.md, "Many connections: what each costs and what runs out
# first").
#
#   bash bench/connection_limits.sh [BUILD_DIR]   (default build/default; builds nothing)
#
# Where no verbs device is active it runs itself in the Soft-RoCE VM
# (bench/on_device.sh; guest memory VSOCK_RXE_MEMORY, default 4096 MiB as
# bench/fork_cost.sh). Per row: a fresh `vsock_fork_cost server` (one
# thread, epoll, echoes; vCPU 0) and one `vsock_fork_cost client --forks 0`
# (vCPU 1) that opens up to N connections one after the other (each:
# connect, one 64 B request and its echo, so that under libvsock it is
# upgraded), keeps them all open, then sends one more echo on each and
# checks it byte for byte. The client stops opening at N, at the time bound,
# after 20 failed opens in a row, or when the guest's MemAvailable falls
# below VSOCK_LIMITS_MIN_AVAIL_MIB (so that the OOM killer does not end the
# row); the table says which ("stopped by").
#
# Measured per row: connections opened; upgrades_done of the client and of
# the server; how many connections the client had opened before the first
# one that moved a fallback_* counter, and which counter (the client looks
# at vsock_stats_snapshot() after each connection; the server's non-zero
# fallback_* at exit are beside it); warn- and error-level lines of the
# library; registered_bytes_peak and that divided by the upgraded
# connections; VmRSS growth and /proc/PID/fd entries of each process over
# the connections opened, read while all are open; time to open them all;
# the echoes that came back right afterwards.
#
# Environment:
#   VSOCK_LIMITS_ROWS   rows "COLUMN:RING:BUDGET_MIB[:MEMLOCK_KIB[:DEPTH]]"
#                       (default "kernel libvsock:2097152:0
#                       libvsock:2097152:256"): COLUMN kernel or libvsock
#                       (BUILD_DIR's), RING VSOCK_RING_SIZE of both ends (the
#                       most a ring grows to: each starts at
#                       ring_initial_size, 16 KiB), BUDGET_MIB
#                       VSOCK_MEMORY_BUDGET_MIB of both ends (0: none),
#                       MEMLOCK_KIB an `ulimit -l` for both (- or empty: the
#                       script's, unlimited), without CAP_IPC_LOCK (which
#                       exempts root from it), DEPTH VSOCK_SQ_DEPTH and
#                       VSOCK_RQ_DEPTH of both (empty: the profile's)
#   VSOCK_LIMITS_CONNS  N (default 10000)
#   VSOCK_LIMITS_OPEN_SECONDS  bound of the opening phase per row (default 240)
#   VSOCK_LIMITS_MIN_AVAIL_MIB stop opening below this MemAvailable (default 256)
#   VSOCK_UPGRADE_TIMEOUT_MS   for libvsock rows (default 2000, as fork_cost.sh)
#   VSOCK_BENCH_ADDR    address (default $RXE_VM_IPADDR, else 127.0.0.1)
# Bounds: each row's client is ended after OPEN_SECONDS + 240 s, its server
# 90 s after SIGTERM; the defaults keep the whole run (3 rows) below 25 min with the boot.
set -u
source_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$(cd "${1:-$source_dir/build/default}" 2>/dev/null && pwd) ||
  { echo "connection_limits.sh: ${1:-build/default} not found: build first" >&2; exit 1; }
export VSOCK_RXE_MEMORY=${VSOCK_RXE_MEMORY:-4096} VSOCK_RXE_TIMEOUT=${VSOCK_RXE_TIMEOUT:-1700}
source "$source_dir/bench/on_device.sh"
bench_on_device "$source_dir/bench/connection_limits.sh" "$build_dir"

prog=$build_dir/bench/vsock_fork_cost
libvsock=$build_dir/lib/libvsock.so
[ -x "$prog" ] && [ -f "$libvsock" ] || { echo "connection_limits.sh: $prog or $libvsock missing: build first" >&2; exit 1; }
addr=${VSOCK_BENCH_ADDR:-${RXE_VM_IPADDR:-127.0.0.1}}
read -r -a rows <<<"${VSOCK_LIMITS_ROWS:-kernel libvsock:2097152:0 libvsock:2097152:256}"
conns=${VSOCK_LIMITS_CONNS:-10000}
open_s=${VSOCK_LIMITS_OPEN_SECONDS:-240}
min_avail=${VSOCK_LIMITS_MIN_AVAIL_MIB:-256}
upgrade_ms=${VSOCK_UPGRADE_TIMEOUT_MS:-2000}
client_s=$((open_s + 240))
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
ulimit -l unlimited 2>/dev/null
work=$(mktemp -d /tmp/vsock-limits.XXXXXX) || exit 1
source "$source_dir/bench/bench_server.sh"
source "$source_dir/bench/bench_stats.sh"

# The server may take a while to tear thousands of queue pairs down and
# print its stats line: 90 s after SIGTERM before SIGKILL.
stop_server() {
  [ -n "$server_pid" ] || return 0
  local i
  kill -TERM "$server_pid" 2>/dev/null
  for ((i = 0; i < 900; i++)); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$server_pid" 2>/dev/null && echo "connection_limits.sh: server SIGKILLed after 90 s" >&2
  wait "$server_pid" 2>/dev/null
  server_pid=""
}
trap 'stop_server; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# bash -c "$launch" MEMLOCK CMD...: CMD under `ulimit -l MEMLOCK` (- : as
# is). Root is exempt from the memlock limit through CAP_IPC_LOCK (the
# guest runs everything as root): dropped then with setpriv, or the limit
# would limit nothing.
launch='[ "$0" = - ] && exec "$@"; ulimit -l "$0" || exit 1
  [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && exec setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock "$@"
  exec "$@"'

# row_env COLUMN RING BUDGET WHO [DEPTH] -> env assignments; WHO names the log.
row_env() {
  case "$1" in
    kernel) echo "LD_PRELOAD=" ;;
    *) echo "LD_PRELOAD=$libvsock VSOCK_STATS=1 VSOCK_LOG_FILE=$work/$4.log VSOCK_UPGRADE_TIMEOUT_MS=$upgrade_ms" \
      "VSOCK_RING_SIZE=$2 VSOCK_MEMORY_BUDGET_MIB=$3" ${5:+VSOCK_SQ_DEPTH=$5 VSOCK_RQ_DEPTH=$5} ;;
  esac
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }
fallbacks() { grep -o 'fallback_[a-z_]*=[0-9]*' <<<"$1" | tr '\n' ' ' | sed 's/ $//'; }
# div A B [SCALE [DECIMALS]] -> A / B / SCALE, "-" when either is missing.
div() {
  awk -v a="$1" -v b="$2" -v s="${3:-1}" -v d="${4:-1}" \
    'BEGIN { if (a == "" || b == "" || a < 0 || b <= 0) print "-"; else printf "%.*f", d, a / b / s }'
}
# Library lines of LEVEL in LOG: "COUNT" and the first one's text (pid cut).
log_lines() {
  grep -E "libvsock\[[0-9]+\]: $2: " "$1" 2>/dev/null | sed -E 's/^libvsock\[[0-9]+\]: //' |
    awk '{ n++; if (n == 1) first = $0 } END { if (n) printf "%d (first: %s)", n, substr(first, 1, 160); else printf "0" }'
}

echo "connection_limits.sh: guest $(uname -r), $(nproc) vCPUs, MemTotal $(awk '/MemTotal/ { printf "%d MiB", $2 / 1024 }' /proc/meminfo)," \
  "ulimit -n $(ulimit -n), ulimit -l $(ulimit -l), addr $addr, N $conns, open bound $open_s s" >&2
table=$work/table.md notes=$work/notes.txt
for row in "${rows[@]}"; do
  IFS=: read -r column ring budget memlock depth <<<"$row"
  ring=${ring:-2097152} budget=${budget:-0} memlock=${memlock:--} depth=${depth:-}  # -: the script's own
  label="$column"
  [ "$column" != kernel ] && label="$column, ring $((ring / 1024)) KiB, budget $([ "$budget" = 0 ] && echo none || echo "$budget MiB")"
  [ "$memlock" != - ] && label="$label, ulimit -l $memlock KiB"
  [ -n "$depth" ] && label="$label, queue depth $depth"
  : >"$work/server.log"
  : >"$work/client.log"
  dmesg_before=$(dmesg 2>/dev/null | wc -l)
  # shellcheck disable=SC2046
  # No timeout(1) around the server: server_pid must be the server's own
  # (bash execs env, env execs it), for --peer-pid; stop_server ends it.
  if ! bench_start_server "$work/server.out" bash -c "$launch" "$memlock" \
    env $(row_env "$column" "$ring" "$budget" server "$depth") "$prog" server --addr "$addr" --port 0 --cpu 0; then
    echo "| $label | server did not start | | | | | | | | | |" >>"$table"
    stop_server
    continue
  fi
  rss0=$(awk '/VmRSS/ { print $2 }' "/proc/$server_pid/status" 2>/dev/null)
  # shellcheck disable=SC2046
  out=$(timeout -k 5 $((client_s + 20)) bash -c "$launch" "$memlock" \
    env $(row_env "$column" "$ring" "$budget" client "$depth") "$prog" client --addr "$addr" --port "$server_port" \
    --conns "$conns" --forks 0 --cpu 1 --seconds "$client_s" --open-seconds "$open_s" --min-avail-mib "$min_avail" \
    --peer-pid "$server_pid" 2>>"$work/errors")
  stop_server
  limits=$(grep '^limits ' <<<"$out") result=$(grep '^result ' <<<"$out")
  echo "connection_limits.sh: $row: ${limits:-FAILED} ${result:+echo_after=$(field echo_after "$result")}" >&2
  [ -n "$limits" ] || { echo "| $label | client failed | | | | | | | | | |" >>"$table"; continue; }
  opened=$(field opened "$limits")
  cstats=$(bench_stats_of "$work/client.log" upgrades_done registered_bytes_peak)
  sstats=$(bench_stats_of "$work/server.log" upgrades_done registered_bytes_peak)
  up="-" before="-" reg="-" per_reg="-"
  if [ "$column" != kernel ]; then
    cup=$(field upgrades_done "$cstats") sup=$(field upgrades_done "$sstats")
    cpeak=$(field registered_bytes_peak "$cstats") speak=$(field registered_bytes_peak "$sstats")
    up="$cup / $sup"
    first=$(field first_fallback_at "$limits")
    if [ "$first" = -1 ]; then before="none (all $opened)"
    else before="$first: client $(field first_fallback "$limits"); server $(fallbacks "$sstats")"; fi
    reg="$(div "$cpeak" 1048576) / $(div "$speak" 1048576)"
    per_reg="$(div "$cpeak" "$cup" 1024) / $(div "$speak" "$sup" 1024)"
    echo "$label: client $cstats; server $sstats; warn lines: client $(log_lines "$work/client.log" warn), server $(log_lines "$work/server.log" warn); error lines: client $(log_lines "$work/client.log" error), server $(log_lines "$work/server.log" error)" >>"$notes"
  fi
  warns=$(( $(grep -cE 'libvsock\[[0-9]+\]: warn: ' "$work/client.log" "$work/server.log" 2>/dev/null | awk -F: '{ s += $NF } END { print s + 0 }') ))
  crss=$(awk -v a="$(field rss_kb "$result")" -v b="$(field rss_base_kb "$limits")" 'BEGIN { print (a == "" ? -1 : a - b) }')
  srss=$(awk -v a="$(field peer_rss_kb "$limits")" -v b="${rss0:-0}" 'BEGIN { print (a == "" || a < 0 ? -1 : a - b) }')
  oom=$(dmesg 2>/dev/null | tail -n +"$((dmesg_before + 1))" | grep -ciE 'out of memory|oom-kill')
  [ "$oom" -gt 0 ] && echo "$label: the kernel logged $oom OOM lines" >>"$notes"
  printf '| %s | %s / %s (%s) | %s | %s | %s | %s | %s | %s / %s | %s / %s | %s | %s / %s |\n' \
    "$label" "$opened" "$conns" "$(field stop "$limits")" "$up" "$before" "$warns" "$reg" "$per_reg" \
    "$(div "$crss" "$opened")" "$(div "$srss" "$opened")" \
    "$(div "$(field fds "$limits")" "$opened" 1 2)" "$(div "$(field peer_fds "$limits")" "$opened" 1 2)" \
    "$(field open_s "$limits")" "$(field echo_after "$result")" "$(field checked_after "$result")" >>"$table"
  echo "$label: first failed open $(field first_error_at "$limits") ($(field first_error "$limits")), lowest MemAvailable seen $(field mem_avail_min_mib "$limits") MiB, client VmPin $(field pinned_kb "$result") kB" >>"$notes"
done

echo
echo "| row | opened / N (stopped by) | upgraded client / server | opened before the first fallback: reason | warn lines | registered peak MiB client / server | registered KiB per upgraded client / server | RSS KiB per conn client / server | fds per conn client / server | open s | echo after ok / checked |"
echo "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
cat "$table"
echo
echo "Client on vCPU 1, server on vCPU 0, $addr; guest $(uname -r), $(nproc) vCPUs," \
  "$(awk '/MemTotal/ { printf "%d MiB", $2 / 1024 }' /proc/meminfo), ulimit -n $(ulimit -n), ulimit -l $(ulimit -l) unless the row says." \
  "stopped by: count (N reached), time ($open_s s), memory (MemAvailable below $min_avail MiB), errors (20 failed opens in a row)." \
  "RSS per conn: VmRSS growth (client: from before its first connection; server: from before the client started) / opened." \
  "fds per conn: /proc/PID/fd entries / opened, read while all were open. registered: registered_bytes_peak of each process."
[ -s "$notes" ] && { echo; echo "counters and logs:"; cat "$notes"; }
[ -s "$work/errors" ] && { echo; echo "client stderr:"; sort "$work/errors" | uniq -c | sort -rn | head -n 8; }
exit 0
