#!/usr/bin/env bash
# An epoll server's 64 B round trip with 1,000 idle connections beside 10
# active ones, against the same with the 10 alone (issue 12 item 6: waits
# that cost O(ready), not O(registered)). Reported, never asserted
# (docs/performance.md, "An epoll server with idle connections").
#
#   bash bench/idle_epoll.sh [BUILD_DIR]     (default build/default; builds nothing)
#
# Where no verbs device is active it runs itself in the Soft-RoCE VM
# (bench/on_device.sh; guest memory VSOCK_RXE_MEMORY, default 4096 MiB).
# Per row: a fresh `vsock_idle_epoll server` (one thread, one epoll set
# holding every connection, echoes; vCPU 0, blocking epoll_wait) and one
# `vsock_idle_epoll client` (vCPU 1, blocking write and read) that opens
# IDLE connections and then 10 active ones (each with one 64 B echo, so
# that under libvsock it is upgraded), then times ROUNDS round trips of
# 64 B taking the active ones in turn. kernel rows: nothing preloaded;
# libvsock rows: both ends preloaded (BUILD_DIR's library, default
# profile). The rows run REPEAT times, interleaved, so that a phase of host
# load falls on every row alike. From the client's VSOCK_STATS=1 line:
# upgrades_done, the bytes it sent over RDMA and over TCP and any fallback_*
# counter that is not 0 (the proof of the path; the client's, as the server
# may not finish closing 1,000 connections in the 5 s its stop allows).
#
# Environment:
#   VSOCK_IDLE_ROWS     rows "COLUMN:IDLE" (default "kernel:0 kernel:1000
#                       libvsock:0 libvsock:1000"); COLUMN kernel or libvsock
#   VSOCK_IDLE_ACTIVE   active connections (default 10)
#   VSOCK_IDLE_ROUNDS   measured round trips per row (default 4000; 400 of warm-up)
#   VSOCK_IDLE_REPEAT   times each row runs (default 2)
#   VSOCK_IDLE_SECONDS  bound of one client run (default 300)
#   VSOCK_UPGRADE_TIMEOUT_MS  for libvsock rows (default 2000, as setup_time.sh)
#   VSOCK_BENCH_ADDR    address (default $RXE_VM_IPADDR, else 127.0.0.1)
set -u
source_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$(cd "${1:-$source_dir/build/default}" 2>/dev/null && pwd) ||
  { echo "idle_epoll.sh: ${1:-build/default} not found: build first" >&2; exit 1; }
export VSOCK_RXE_MEMORY=${VSOCK_RXE_MEMORY:-4096} VSOCK_RXE_TIMEOUT=${VSOCK_RXE_TIMEOUT:-2400}
source "$source_dir/bench/on_device.sh"
bench_on_device "$source_dir/bench/idle_epoll.sh" "$build_dir"

prog=$build_dir/bench/vsock_idle_epoll
libvsock=$build_dir/lib/libvsock.so
[ -x "$prog" ] && [ -f "$libvsock" ] || { echo "idle_epoll.sh: $prog or $libvsock missing: build first" >&2; exit 1; }
addr=${VSOCK_BENCH_ADDR:-${RXE_VM_IPADDR:-127.0.0.1}}
read -r -a rows <<<"${VSOCK_IDLE_ROWS:-kernel:0 kernel:1000 libvsock:0 libvsock:1000}"
active=${VSOCK_IDLE_ACTIVE:-10}
rounds=${VSOCK_IDLE_ROUNDS:-4000}
repeat=${VSOCK_IDLE_REPEAT:-2}
seconds=${VSOCK_IDLE_SECONDS:-300}
upgrade_ms=${VSOCK_UPGRADE_TIMEOUT_MS:-2000}
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
ulimit -l unlimited 2>/dev/null
work=$(mktemp -d /tmp/vsock-idle.XXXXXX) || exit 1
source "$source_dir/bench/bench_server.sh"
source "$source_dir/bench/bench_stats.sh"
trap 'bench_stop_server; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# row_env COLUMN WHO -> env assignments; WHO names the stats log.
row_env() {
  case "$1" in
    kernel) echo "LD_PRELOAD=" ;;
    *) echo "LD_PRELOAD=$libvsock VSOCK_STATS=1 VSOCK_LOG_FILE=$work/$2.log VSOCK_UPGRADE_TIMEOUT_MS=$upgrade_ms" ;;
  esac
}

field() { sed -n "s/.* $1=\([0-9.-]*\).*/\1/p" <<<" $2"; }

echo "idle_epoll.sh: guest $(uname -r), $(nproc) vCPUs, ulimit -n $(ulimit -n), addr $addr, $active active," \
  "$rounds round trips per row, ${repeat}x" >&2
table=$work/table.md
declare -A p50s=()
for ((pass = 1; pass <= repeat; pass++)); do
  for row in "${rows[@]}"; do
    IFS=: read -r column idle <<<"$row"
    : >"$work/server.log"
    : >"$work/client.log"
    # shellcheck disable=SC2046
    if ! bench_start_server "$work/server.out" timeout -k 5 $((seconds + 60)) env $(row_env "$column" server) \
      "$prog" server --addr "$addr" --port 0 --cpu 0; then
      echo "| $column | $idle | $pass | server did not start | | | | |" >>"$table"
      bench_stop_server
      continue
    fi
    # shellcheck disable=SC2046
    line=$(timeout -k 5 $((2 * seconds + 20)) env $(row_env "$column" client) "$prog" client --addr "$addr" \
      --port "$server_port" --idle "$idle" --active "$active" --rounds "$rounds" --warmup $((rounds / 10)) \
      --cpu 1 --seconds "$seconds" 2>>"$work/errors" | grep '^result ')
    bench_stop_server
    stats=""
    [ "$column" != kernel ] && stats=$(bench_stats_of "$work/client.log" upgrades_done rdma_bytes_sent tcp_bytes_sent)
    echo "idle_epoll.sh: $column idle=$idle pass $pass: ${line:-FAILED} ${stats:+client: $stats}" >&2
    [ -n "$line" ] || { echo "| $column | $idle | $pass | client failed | | | | |" >>"$table"; continue; }
    path="kernel TCP"
    [ "$column" != kernel ] && path="$(field upgrades_done "$stats") upgraded; RDMA $(field rdma_bytes_sent "$stats") B, TCP $(field tcp_bytes_sent "$stats") B"
    printf '| %s | %s | %s | %s | %s | %s | %s / %s | %s |\n' "$column" "$(field idle "$line")" "$pass" \
      "$(field p50_us "$line")" "$(field p99_us "$line")" "$(field p999_us "$line")" "$(field idle_alive "$line")" \
      "$(field idle_checked "$line")" "$path" >>"$table"
    p50s["$column:$idle"]+="$(field p50_us "$line") "
  done
done

echo
echo "| column | idle connections | pass | p50 µs | p99 µs | p99.9 µs | idle echo after | client sent (path) |"
echo "|---|---:|---:|---:|---:|---:|---:|---|"
cat "$table"
echo
echo "p50 with idle connections / p50 with the $active alone, per pass:"
for row in "${rows[@]}"; do
  IFS=: read -r column idle <<<"$row"
  [ "$idle" = 0 ] && continue
  read -r -a with <<<"${p50s[$column:$idle]:-}"
  read -r -a alone <<<"${p50s[$column:0]:-}"
  ratios=""
  for ((i = 0; i < ${#with[@]} && i < ${#alone[@]}; i++)); do
    ratios+="$(awk -v a="${with[$i]}" -v b="${alone[$i]}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }') "
  done
  echo "- $column, $idle idle: ${ratios:-none}"
done
echo
echo "Server (one thread, blocking epoll_wait over every connection) on vCPU 0, client (blocking write/read)" \
  "on vCPU 1, $addr; $active active connections taken in turn, 64 B; guest $(uname -r), $(nproc) vCPUs." \
  "idle echo after: one echo on every 50th idle connection after the measured phase." \
  "client sent: the client's VSOCK_STATS=1 counters over the whole row (the opening echoes included)."
[ -s "$work/errors" ] && { echo; echo "errors:"; sort "$work/errors" | uniq -c | sort -rn | head -n 8; }
exit 0
