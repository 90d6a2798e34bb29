#!/usr/bin/env bash
# The cost of a fork() in a process that holds many open upgraded TCP
# connections (issue 13 item 4). Reported, never asserted
# (docs/performance.md, "fork() with many open connections").
#
#   bash bench/fork_cost.sh [BUILD_DIR]     (default build/default; builds nothing)
#
# Where no verbs device is active it runs itself in the Soft-RoCE VM
# (bench/on_device.sh; guest memory VSOCK_RXE_MEMORY, default 4096 MiB here).
# Per row: a fresh `vsock_fork_cost server` (vCPU 0, through
# bench/bench_server.sh) and one `vsock_fork_cost client` (vCPU 1) that
# opens N connections (each: connect, one 64 B request and its echo, so
# that under libvsock it is upgraded), keeps them open, reads its VmRSS /
# VmPin / VmLck and counts its mappings, then makes R bare fork system
# calls (SYS_clone: the kernel's share, past the library) and R fork()
# calls (the child _exit(0)s at once) and times the call's return and
# waitpid()'s in the parent; then one more echo on every connection. kernel rows: nothing preloaded; libvsock rows: both
# ends preloaded, VSOCK_RING_SIZE as the row says. From the client's
# VSOCK_STATS=1 line: upgrades_done, reverts_sent (a fork that hands every
# upgraded connection back to TCP first, protocol.md §5, sends one per
# connection, all in the first fork) and any fallback counter that is not 0
# (the reason a connection stayed on TCP).
#
# Environment:
#   VSOCK_FORK_ROWS   rows "COLUMN:N[:RING]" (default
#                     "kernel:1000 libvsock:1000:65536 kernel:100 libvsock:100");
#                     COLUMN kernel, libvsock (BUILD_DIR's), or other
#                     ($VSOCK_FORK_OTHER_LIB, e.g. an older build's libvsock.so);
#                     RING in bytes, none = the profile's (2 MiB)
#   VSOCK_FORK_FORKS  forks per row (default 20)
#   VSOCK_FORK_SECONDS  bound of one client run (default 400)
#   VSOCK_UPGRADE_TIMEOUT_MS  for libvsock rows (default 2000, as setup_time.sh)
#   VSOCK_BENCH_ADDR  address (default $RXE_VM_IPADDR, else 127.0.0.1)
set -u
source_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$(cd "${1:-$source_dir/build/default}" 2>/dev/null && pwd) ||
  { echo "fork_cost.sh: ${1:-build/default} not found: build first" >&2; exit 1; }
export VSOCK_RXE_MEMORY=${VSOCK_RXE_MEMORY:-4096} VSOCK_RXE_TIMEOUT=${VSOCK_RXE_TIMEOUT:-2400}
source "$source_dir/bench/on_device.sh"
bench_on_device "$source_dir/bench/fork_cost.sh" "$build_dir"

prog=$build_dir/bench/vsock_fork_cost
libvsock=$build_dir/lib/libvsock.so
[ -x "$prog" ] && [ -f "$libvsock" ] || { echo "fork_cost.sh: $prog or $libvsock missing: build first" >&2; exit 1; }
addr=${VSOCK_BENCH_ADDR:-${RXE_VM_IPADDR:-127.0.0.1}}
read -r -a rows <<<"${VSOCK_FORK_ROWS:-kernel:1000 libvsock:1000:65536 kernel:100 libvsock:100}"
forks=${VSOCK_FORK_FORKS:-20}
seconds=${VSOCK_FORK_SECONDS:-400}
upgrade_ms=${VSOCK_UPGRADE_TIMEOUT_MS:-2000}
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
ulimit -l unlimited 2>/dev/null
work=$(mktemp -d /tmp/vsock-fork.XXXXXX) || exit 1
source "$source_dir/bench/bench_server.sh"
source "$source_dir/bench/bench_stats.sh"
trap 'bench_stop_server; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# row_env COLUMN RING WHO -> env assignments; WHO names the stats log.
row_env() {
  local lib=$libvsock ring=""
  [ "$1" = other ] && lib=${VSOCK_FORK_OTHER_LIB:?other rows need VSOCK_FORK_OTHER_LIB}
  [ -n "$2" ] && ring="VSOCK_RING_SIZE=$2"
  case "$1" in
    kernel) echo "LD_PRELOAD=" ;;
    *) echo "LD_PRELOAD=$lib VSOCK_STATS=1 VSOCK_LOG_FILE=$work/$3.log VSOCK_UPGRADE_TIMEOUT_MS=$upgrade_ms $ring" ;;
  esac
}

field() { sed -n "s/.* $1=\([0-9.-]*\).*/\1/p" <<<"$2"; }

echo "fork_cost.sh: guest $(uname -r), $(nproc) vCPUs, MemTotal $(awk '/MemTotal/ { printf "%d MiB", $2 / 1024 }' /proc/meminfo)," \
  "ulimit -n $(ulimit -n), ulimit -l $(ulimit -l), addr $addr" >&2
table=$work/table.md
notes=$work/notes.txt
for row in "${rows[@]}"; do
  IFS=: read -r column conns ring <<<"$row"
  : >"$work/server.log"
  : >"$work/client.log"
  # shellcheck disable=SC2046
  if ! bench_start_server "$work/server.out" timeout -k 5 $((seconds + 60)) env $(row_env "$column" "$ring" server) \
    "$prog" server --addr "$addr" --port 0 --cpu 0; then
    echo "| $row | server did not start | | | | | | | | | |" >>"$table"
    bench_stop_server
    continue
  fi
  # shellcheck disable=SC2046
  line=$(timeout -k 5 $((seconds + 20)) env $(row_env "$column" "$ring" client) "$prog" client --addr "$addr" \
    --port "$server_port" --conns "$conns" --forks "$forks" --cpu 1 --seconds "$seconds" 2>>"$work/errors" | grep '^result ')
  bench_stop_server
  echo "fork_cost.sh: $row: ${line:-FAILED} $(bench_stats_of "$work/client.log" upgrades_done reverts_sent)" >&2
  [ -n "$line" ] || { echo "| $row | client failed | | | | | | | | | |" >>"$table"; continue; }
  upgraded=- on_rdma=-
  if [ "$column" != kernel ]; then
    stats=$(bench_stats_of "$work/client.log" upgrades_done reverts_sent stream_resumes upgrade_resets)
    up=$(field upgrades_done " $stats") rev=$(field reverts_sent " $stats")
    res=$(field stream_resumes " $stats") rst=$(field upgrade_resets " $stats")
    upgraded=$up on_rdma=$((up - rev - res - rst))
    echo "$row: client after the forks: RSS $(field rss_after_kb "$line") kB, $(field maps_after "$line") mappings; $stats; server $(bench_stats_of "$work/server.log" upgrades_done reverts_received)" >>"$notes"
  fi
  opened=$(field opened "$line") ring_shown=${ring:-2097152}
  [ "$column" = kernel ] && ring_shown=-
  printf '| %s | %s | %s | %s / %s | %s | %s | %s | %s | %s / %s | %s / %s / %s | %s / %s / %s | %s | %s / %s |\n' \
    "$column" "$conns" "$ring_shown" "$upgraded" "$opened" "$(field open_s "$line")" \
    "$(field rss_kb "$line")" "$(field pinned_kb "$line")/$(field lck_kb "$line")" "$(field maps "$line")" \
    "$(field raw_fork_p50_us "$line")" "$(field raw_fork_max_us "$line")" \
    "$(field fork_first_us "$line")" "$(field fork_p50_us "$line")" "$(field fork_max_us "$line")" \
    "$(field reap_first_us "$line")" "$(field reap_p50_us "$line")" "$(field reap_max_us "$line")" \
    "$on_rdma" "$(field echo_after "$line")" "$(field checked_after "$line")" >>"$table"
done

echo
echo "| column | N | ring_size | upgraded / open | open s | RSS kB | VmPin/VmLck kB | mappings | bare fork µs p50 / max | fork() µs first / p50 / max | reaped µs first / p50 / max | on RDMA after | echo after / checked |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
cat "$table"
echo
echo "$forks forks per row; client on vCPU 1, server on vCPU 0, $addr; guest $(uname -r), $(nproc) vCPUs," \
  "$(awk '/MemTotal/ { printf "%d MiB", $2 / 1024 }' /proc/meminfo). ring_size: VSOCK_RING_SIZE of both ends" \
  "(libvsock rows without one: the default profile's 2 MiB ring + 2 MiB send mirror per connection and side)." \
  "fork() µs: from just before fork() to its return in the parent; reaped: to waitpid()'s return." \
  "mappings: lines of the client's /proc/self/maps before the forks." \
  "bare fork: the fork system call itself (SYS_clone, past glibc and the library), R times before the R fork() calls:" \
  "what the kernel alone costs with every connection as it was opened." \
  "on RDMA after: upgrades_done - reverts_sent - stream_resumes - upgrade_resets of the client."
[ -s "$notes" ] && { echo; echo "counters:"; cat "$notes"; }
[ -s "$work/errors" ] && { echo; echo "errors:"; sort "$work/errors" | uniq -c | sort -rn | head -n 8; }
exit 0
