#!/usr/bin/env bash
# A well-known program pair beside the main job's table (issue 14 item 5):
# Debian's redis-server, unmodified, with redis-benchmark against it, first
# both on the kernel, then both under LD_PRELOAD of libvsock, on the verbs
# device's address; requests/s and p50 latency per test, the ratio, and
# whether the libvsock run really went over RDMA (rxe packet counter growth,
# the server's VSOCK_STATS=1 counters, kernel TCP segments beside).
#
#   bash bench/app_pair.sh [BUILD_DIR [OUT_DIR]]   measure (in the Soft-RoCE VM when this
#                                                  machine has no verbs device), print the
#                                                  table, write it into docs/performance.md
#   bash bench/app_pair.sh --measure [BUILD_DIR [OUT_DIR]]   only measure, here, on a device
#                                                  (bench/main.sh runs this in the guest
#                                                  right after bench/fair.sh, same boot)
#   bash bench/app_pair.sh --report OUT_DIR [NOTE] only turn OUT_DIR's results into the table,
#                                                  print it and write it into docs/performance.md
#                                                  (section "app-pair"); NOTE: where it ran
# Defaults: BUILD_DIR build/default, OUT_DIR BUILD_DIR/app_pair (it must be in
# the source tree when the VM is used: the guest writes through there only).
#
# Both columns alike: redis-server pinned to vCPU 0 and redis-benchmark to
# vCPU 1 (taskset), each waiting in its own epoll loop (redis' ae); the
# libvsock column in the library's default profile. The servers and the
# helpers (start, stop, stats) are those of the app tests (tests/apps/
# app_test_lib.sh); VSOCK_UPGRADE_TIMEOUT_MS is theirs too (app_device_init).
#
# Environment: VSOCK_APP_PAIR_REQUESTS (-n, default 20000), _CLIENTS (-c,
# default 20), _SECONDS (bound of one redis-benchmark run, default 45: a run
# cut short shows as such); VSOCK_FAIR_NO_DOC=1 leaves docs/ alone.
set -uo pipefail
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=all
case "${1:-}" in --measure | --report) mode=${1#--}; shift ;; esac

# ---- the report: OUT_DIR/raw.txt -> the markdown table (host side) ----
report() {
  local out=$1 note=${2:-} commit table
  [ -s "$out/raw.txt" ] || { echo "app_pair.sh: no results in $out" >&2; return 1; }
  # the commit measured: the caller's (bench/main.sh looks before it builds),
  # else the tree's now
  commit=${VSOCK_APP_PAIR_COMMIT:-}
  if [ -z "$commit" ]; then
    commit=$(cd "$source_dir" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
    [ -n "$(cd "$source_dir" && git status --porcelain --untracked-files=no -- . ':!docs' 2>/dev/null)" ] &&
      commit+=" + uncommitted changes"
  fi
  table=$out/table.md
  awk -v commit="$commit" -v note="$note" '
    function v(line, key,   r) {  # value of key=VALUE in a raw line ("" when absent)
      if (match(" " line, " " key "=[^ ]*")) { r = substr(" " line, RSTART + 1, RLENGTH - 1); r = substr(r, length(key) + 2); gsub(/~/, " ", r); return r }
      return ""
    }
    function none(c,   e) {  # why a cell has no figure
      e = v(path[c], "bench_exit")
      return (e == 124 || e == 137) ? "cut short (" v(meta, "bound_s") " s)" : "no result (exit " e ")"
    }
    function ratio(a, b) { return (a + 0 > 0 && b + 0 > 0) ? sprintf("%.2f", a / b) : "–" }
    /^meta / { meta = $0 }
    /^col=/ { c = v($0, "col"); t = v($0, "test"); rps[c, t] = v($0, "rps"); p50[c, t] = v($0, "p50_ms"); if (!(t in seen)) { seen[t] = 1; tests[++nt] = t } }
    /^path / { path[v($0, "col")] = $0 }
    END {
      printf "Measured at commit `%s`, %s, in the Soft-RoCE guest (%s vCPUs, device %s, %s)%s; guest load average at start %s.\n\n",
        commit, v(meta, "date"), v(meta, "nproc"), v(meta, "dev"), v(meta, "addr"), note == "" ? "" : ", " note, v(meta, "load")
      printf "Programs: Debian'"'"'s `redis-server` %s and `redis-benchmark`, unmodified: `redis-benchmark -t %s -n %s -c %s -P 1 --csv`, each run bounded to %s s; a fresh server per column, the kernel column first. Both columns: server pinned to vCPU 0, benchmark to vCPU 1 (`taskset`), each waiting in its own epoll loop (redis'"'"' ae); libvsock column: both processes preloaded, default profile, `VSOCK_UPGRADE_TIMEOUT_MS=%s` (under TCG an upgrade can take longer than the 200 ms default, and a connection whose upgrade times out stays on TCP for good).\n\n",
        v(meta, "redis"), v(meta, "tests"), v(meta, "requests"), v(meta, "clients"), v(meta, "bound_s"), v(meta, "upgrade_timeout_ms")
      lp = path["libvsock"]; rdma = v(lp, "verdict") == "rdma"
      lname = rdma ? "libvsock (RDMA)" : "libvsock, NOT on RDMA"
      printf "| test | kernel: requests/s | kernel: p50 (ms) | %s: requests/s | %s: p50 (ms) | requests/s, libvsock / kernel | p50, libvsock / kernel |\n", lname, lname
      print "|---|---:|---:|---:|---:|---:|---:|"
      for (i = 1; i <= nt; i++) {
        t = tests[i]
        kr = rps["kernel", t]; kp = p50["kernel", t]; lr = rps["libvsock", t]; lq = p50["libvsock", t]
        printf "| %s | %s | %s | %s | %s | %s | %s |\n", t, kr == "" ? none("kernel") : kr, kp == "" ? "–" : kp,
          lr == "" ? none("libvsock") : lr, lq == "" ? "–" : lq,
          rdma ? ratio(lr, kr) : "– (not RDMA)", rdma ? ratio(lq, kp) : "– (not RDMA)"
      }
      print ""
      print "What went where while each column'"'"'s redis-benchmark ran (guest-wide counters; the server'"'"'s own `VSOCK_STATS=1` line at its exit):"
      print ""
      print "| column | rxe `rcvd_pkts` growth | kernel TCP segments out (`/proc/net/snmp`) | server upgrades_done | server rdma_bytes received / sent | server tcp_bytes received / sent | server fallbacks | requests the server counted (SET / GET) | verdict |"
      print "|---|---:|---:|---:|---:|---:|---|---|---|"
      for (k = 1; k <= 2; k++) {
        c = k == 1 ? "kernel" : "libvsock"; p = path[c]
        if (p == "") { printf "| %s | no run | | | | | | | |\n", c; continue }
        lib = c == "libvsock"
        verdict = v(p, "verdict")
        if (verdict == "kernel") verdict = "kernel TCP (no library)"
        else if (verdict == "rdma") verdict = "**on RDMA**: every benchmark connection upgraded, ≥ 90 % of the bytes both ways over RDMA, rxe packets grew"
        else verdict = "**NOT on RDMA**: " v(p, "why")
        fb = v(p, "fallbacks"); if (fb == "") fb = "none"; gsub(/,/, " ", fb)
        printf "| %s | %s | %s | %s | %s | %s | %s | %s / %s | %s |\n", c, v(p, "rxe_rcvd_pkts"), v(p, "tcp_out_segs"),
          lib ? v(p, "upgrades_done") " (" v(p, "connections") " needed)" : "–",
          lib ? v(p, "rdma_bytes_received") " / " v(p, "rdma_bytes_sent") : "–",
          lib ? v(p, "tcp_bytes_received") " / " v(p, "tcp_bytes_sent") : "–",
          lib ? fb : "–", v(p, "calls_set"), v(p, "calls_get"), verdict
      }
      print ""
      printf "The benchmark opens %s connections per test (and one more for its `CONFIG GET` at start); the server also answered two `redis-cli INFO commandstats` connections made without the library (its request counts above), which stay on TCP and count among its fallbacks. A libvsock run whose connections did not all upgrade, or whose bytes went over TCP, is marked NOT on RDMA and gets no ratio.\n", v(meta, "clients")
    }' "$out/raw.txt" >"$table" || return 1
  echo
  echo "== redis-benchmark against redis-server, kernel vs libvsock"
  cat "$table"
  [ "${VSOCK_FAIR_NO_DOC:-0}" = 1 ] && return 0
  {
    echo "Generated by \`bash bench/main.sh\` (or alone: \`bash bench/app_pair.sh\`); a rerun replaces everything up to"
    echo "the end marker."
    echo
    cat "$table"
  } | bash "$source_dir/bench/doc_section.sh" "$source_dir/docs/performance.md" app-pair || return 1
  echo "app_pair.sh: table written to docs/performance.md (section app-pair)"
}

if [ "$mode" = report ]; then
  report "${1:?usage: app_pair.sh --report OUT_DIR [NOTE]}" "${2:-}"
  exit
fi

build_dir=$(cd "${1:-$source_dir/build/default}" 2>/dev/null && pwd) ||
  { echo "app_pair.sh: ${1:-build/default} not found: build first" >&2; exit 1; }
out=${2:-$build_dir/app_pair}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1

on_device() { [ "${RXE_VM:-0}" = 1 ] || grep -qs ACTIVE /sys/class/infiniband/*/ports/*/state; }
if [ "$mode" = all ] && ! on_device; then
  # measure in the Soft-RoCE VM, report here
  export VSOCK_RXE_TIMEOUT=${VSOCK_RXE_TIMEOUT:-600}
  rm -f "$out/raw.txt"
  (cd "$source_dir" && bash tests/rxe/with-device.sh bash -c 'ulimit -l unlimited 2>/dev/null; unset TMPDIR; cd /tmp &&
    exec bash "$0" --measure "$1" "$2"' "$source_dir/bench/app_pair.sh" "$build_dir" "$out")
  rc=$?
  [ -s "$out/raw.txt" ] || { echo "app_pair.sh: no results (exit $rc)" >&2; exit "$((rc ? rc : 1))"; }
  report "$out" "booted for this script alone" || rc=1
  exit "$rc"
fi

# ---- the measurement (here, on a device) ----
export VSOCK_PRELOAD=$build_dir/lib/libvsock.so
export VSOCK_TEST_ADDR=${VSOCK_BENCH_ADDR:-${RXE_VM_IPADDR:-}}
[ -n "$VSOCK_TEST_ADDR" ] || { echo "app_pair.sh: no device address (RXE_VM_IPADDR or VSOCK_BENCH_ADDR)" >&2; exit 1; }
source "$source_dir/tests/apps/app_test_lib.sh"
app_require redis-server redis-cli redis-benchmark taskset
app_init app-pair
app_device_init
requests=${VSOCK_APP_PAIR_REQUESTS:-20000}
clients=${VSOCK_APP_PAIR_CLIENTS:-20}
tests=set,get
export VSOCK_APP_CLIENT_TIMEOUT=${VSOCK_APP_PAIR_SECONDS:-45}
dev=${RXE_VM_DEV:-$(ls /sys/class/infiniband 2>/dev/null | head -1)}
raw=$out/raw.txt
: >"$raw"

# "TCP_OUT_SEGMENTS RXE_RCVD_PACKETS" of this machine now
counters() {
  local tcp rx
  tcp=$(awk '$1 == "Tcp:" { if (h) { print $12; exit } h = 1 }' /proc/net/snmp 2>/dev/null)
  rx=$(cat "/sys/class/infiniband/$dev/ports/1/hw_counters/rcvd_pkts" 2>/dev/null)
  echo "${tcp:-0} ${rx:-0}"
}
# calls PORT CMD: how many CMD calls the server counted (INFO commandstats,
# asked without the library: not part of what is measured)
calls() {
  env -u LD_PRELOAD timeout 20 redis-cli -h "$APP_ADDR" -p "$1" INFO commandstats | tr -d '\r' |
    sed -n "s/^cmdstat_$2:calls=\([0-9]*\),.*/\1/p"
}

echo "meta date=$(date -u +%FT%TZ) nproc=$(nproc) dev=$dev addr=$APP_ADDR load=$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' '~')" \
  "redis=$(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p') tests=$tests requests=$requests clients=$clients" \
  "bound_s=$VSOCK_APP_CLIENT_TIMEOUT upgrade_timeout_ms=$VSOCK_UPGRADE_TIMEOUT_MS" >>"$raw"
redis_args=(--save '' --appendonly no --protected-mode no --daemonize no --logfile '' --dir "$APP_WORK")
for col in kernel libvsock; do
  if [ "$col" = libvsock ]; then app_library on; else app_library off; fi
  app_start_server "redis-$col" tcp taskset -c 0 redis-server --port @PORT@ --bind "$APP_ADDR" "${redis_args[@]}"
  port=$APP_PORT server=$APP_PID
  read -r t0 r0 <<<"$(counters)"
  began=$SECONDS
  app_preloaded "$APP_WORK/bench-$col.log" taskset -c 1 redis-benchmark -h "$APP_ADDR" -p "$port" -n "$requests" \
    -c "$clients" -P 1 -t "$tests" --csv >"$APP_WORK/bench-$col.csv"
  brc=$?
  read -r t1 r1 <<<"$(counters)"
  secs=$((SECONDS - began))
  ((brc == 124 || brc == 137)) && app_log "$col: redis-benchmark cut short after $VSOCK_APP_CLIENT_TIMEOUT s"
  for t in ${tests//,/ }; do
    # "SET","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",...
    line=$(tr -d '"' <"$APP_WORK/bench-$col.csv" | awk -F, -v t="${t^^}" '$1 == t { print "rps=" $2, "p50_ms=" $5 }')
    echo "col=$col test=${t^^} ${line:-missing=1}" >>"$raw"
    app_log "$col ${t^^}: ${line:-no result (redis-benchmark exit $brc)}"
  done
  cs=$(calls "$port" set) cg=$(calls "$port" get)
  app_stop_pid "$server" TERM 15
  path="path col=$col seconds=$secs bench_exit=$brc rxe_rcvd_pkts=$((r1 - r0)) tcp_out_segs=$((t1 - t0)) calls_set=${cs:-?} calls_get=${cg:-?}"
  if [ "$col" = kernel ]; then
    path+=" verdict=kernel"
  else
    # the server's own counters at exit (SIGTERM: redis exits 0 and the
    # library prints its VSOCK_STATS=1 line); the benchmark's connections:
    # one per client per test
    conns=$((clients * $(echo "$tests" | tr , '\n' | wc -l)))
    why=""
    if app_stats "$APP_WORK/redis-$col.log"; then
      fb=""
      for name in "${!APP_STATS[@]}"; do
        [[ $name == fallback_* && ${APP_STATS[$name]} -gt 0 ]] && fb+="${fb:+,}$name=${APP_STATS[$name]}"
      done
      done_=${APP_STATS[upgrades_done]:-0}
      rr=${APP_STATS[rdma_bytes_received]:-0} rs=${APP_STATS[rdma_bytes_sent]:-0}
      tr_=${APP_STATS[tcp_bytes_received]:-0} ts=${APP_STATS[tcp_bytes_sent]:-0}
      path+=" connections=$conns upgrades_done=$done_ rdma_bytes_received=$rr rdma_bytes_sent=$rs"
      path+=" tcp_bytes_received=$tr_ tcp_bytes_sent=$ts fallbacks=$fb"
      ((done_ >= conns)) || why+="only $done_ of $conns connections upgraded; "
      ((rr > 0 && rr >= 9 * tr_)) || why+="received $rr B over RDMA, $tr_ B over TCP; "
      ((rs > 0 && rs >= 9 * ts)) || why+="sent $rs B over RDMA, $ts B over TCP; "
    else
      why+="the server printed no VSOCK_STATS line (exit status $APP_STOP_STATUS); "
    fi
    ((r1 - r0 >= 2 * requests)) || why+="rxe rcvd_pkts grew by $((r1 - r0)) only; "
    if [ -z "$why" ]; then path+=" verdict=rdma"; else why=${why%; }; path+=" verdict=tcp why=${why// /\~}"; fi
    app_log "libvsock server: ${path#path }"
  fi
  echo "$path" >>"$raw"
done
app_log "done; results in $raw"
[ "$mode" = all ] && report "$out"
exit 0
