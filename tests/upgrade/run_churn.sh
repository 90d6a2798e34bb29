#!/bin/bash
# run_churn.sh CHURN PRELOAD
#
# Connection churn (issue 10), tests/upgrade/churn.c on the device's
# address: one echo server (a thread per connection) and one client that
# runs a warm-up cycle, then VSOCK_CHURN_SEQ (default 10,000) sequential
# connect / echo 64 B-4 KiB checked byte for byte / close cycles, then
# VSOCK_CHURN_CONC_CYCLES (default 2,000) cycles with VSOCK_CHURN_CONC
# (default 50) connections open at once. First both without the library
# (the kernel's time per cycle), then both preloaded. Preloaded, it checks:
#   - every cycle succeeded, no byte wrong (the client's MEASURED lines);
#   - the connections upgraded: the client's upgrades_done per phase (at
#     least VSOCK_CHURN_MIN_SEQ_PCT %, default 99, of the sequential ones,
#     VSOCK_CHURN_MIN_CONC_PCT %, default 25, of the concurrent ones: a
#     connection whose server has not bound the upgrade yet goes on on TCP
#     at once, and under TCG 50 requests at once queue behind the server's
#     one side-band thread for longer than a small echo lasts), and the
#     server counts every connection as upgraded or under a fallback
#     reason (printed). (The client's own count may miss a connection it
#     closed after its Switch, before the server's came: upgraded for the
#     server, neither for the client.)
#     VSOCK_UPGRADE_TIMEOUT_MS is 3000 unless set: under TCG 50 upgrades at
#     once queue behind the server's one side-band thread for longer than
#     the default 200 ms (those connections stay on TCP, counted as
#     fallback_timeout or, closed before their upgrade completed,
#     fallback_peer_closed);
#   - at least VSOCK_CHURN_MIN_ATTACHED_PCT % (default 90) of the
#     sequential connections upgraded on the last one's parked channel
#     (protocol.md §1.2; the client's upgrade_attached);
#   - within 5 s after each phase (both processes still alive, the client
#     paused) plus the time parked channels are kept (protocol.md §1.2: a
#     client drops one it has not used for 5 s, and the server its side
#     then; VSOCK_CHURN_PARK_S, default 6), the device's queue pairs, MRs,
#     cm_ids, CQs and PDs (`rdma resource show`) and the server's and the
#     client's open fds are back to their counts after the warm-up cycle
#     and its parked channel's time (the library's one-time resources: the
#     device, the listener's cm_id, the event channel);
#     after both processes exited, the device's counts are those from
#     before the server started.
# Prints MEASURED lines with the figures. Counts are env-overridable:
# VSOCK_CHURN_SEQ, VSOCK_CHURN_CONC, VSOCK_CHURN_CONC_CYCLES,
# VSOCK_CHURN_SEED (default: the clock; printed), VSOCK_CHURN_MAX_S
# (seconds per phase, default 2400). VSOCK_CHURN_LOGS=DIR keeps the
# processes' output and library logs there (with VSOCK_LOG_LEVEL=debug:
# what each connection did).
source "$(dirname "$0")/upgrade_test_lib.sh"
[ $# -ge 2 ] || { echo "usage: $0 CHURN PRELOAD"; exit 2; }
bin=$(ut_abs "$1") preload=$(ut_abs "$2")
addr=$(ut_address)
seq_n=${VSOCK_CHURN_SEQ:-10000}
conc=${VSOCK_CHURN_CONC:-50}
conc_n=${VSOCK_CHURN_CONC_CYCLES:-2000}
seed=${VSOCK_CHURN_SEED:-$(date +%s)}
max_s=${VSOCK_CHURN_MAX_S:-2400}
min_seq_pct=${VSOCK_CHURN_MIN_SEQ_PCT:-99}
min_conc_pct=${VSOCK_CHURN_MIN_CONC_PCT:-25}
# Sequential connections take the last one's parked channel (protocol.md
# §1.2): at least this % of them upgrade with an Attach (0 with parking off).
min_attached_pct=${VSOCK_CHURN_MIN_ATTACHED_PCT:-90}
[ "${VSOCK_PARK_CHANNELS:-1}" = 0 ] && min_attached_pct=0
export VSOCK_UPGRADE_TIMEOUT_MS=${VSOCK_UPGRADE_TIMEOUT_MS:-3000}
park_s=${VSOCK_CHURN_PARK_S:-6}
settle_s=$((5 + park_s))
work=$(mktemp -d /tmp/vsock-churn.XXXXXX) || exit 2
cd /tmp || exit 2
server_pid="" client_pid=""
cleanup() {
  [ -n "$client_pid" ] && kill -KILL "$client_pid" 2>/dev/null
  [ -n "$server_pid" ] && kill -KILL "$server_pid" 2>/dev/null
  [ -n "${VSOCK_CHURN_LOGS:-}" ] && mkdir -p "$VSOCK_CHURN_LOGS" && cp -r "$work"/. "$VSOCK_CHURN_LOGS"/
  rm -rf "$work"
}
trap cleanup EXIT
ulimit -n 4096 2>/dev/null
t_start=$(date +%s)

# "pd=N cq=N qp=N cm_id=N mr=N ctx=N": the device's resources, summed over
# devices (the guest has one).
rdma_counts() {
  rdma resource show 2>/dev/null | awk '
    { for (i = 1; i < NF; i++) if ($i ~ /^(pd|cq|qp|cm_id|mr|ctx)$/) n[$i] += $(i + 1) }
    END { printf "pd=%d cq=%d qp=%d cm_id=%d mr=%d ctx=%d", n["pd"], n["cq"], n["qp"], n["cm_id"], n["mr"], n["ctx"] }'
}
fds_of() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
# Everything counted, on one line.
counts() { echo "$(rdma_counts) server_fds=$(fds_of "$server_pid") client_fds=$(fds_of "$client_pid")"; }

# settle: the counts once two looks 0.5 s apart agree (at most 10 s).
settle() {
  local a b i
  a=$(counts)
  for ((i = 0; i < 20; i++)); do
    sleep 0.5
    b=$(counts)
    [ "$a" = "$b" ] && break
    a=$b
  done
  echo "$b"
}

# back_to BASE: waits up to settle_s for counts() == BASE; prints
# "SECONDS COUNTS" (SECONDS "-" when they did not come back).
back_to() {
  local base=$1 t0 now c
  t0=$(date +%s.%N)
  while :; do
    c=$(counts)
    now=$(date +%s.%N)
    if [ "$c" = "$base" ]; then
      echo "$(awk -v a="$t0" -v b="$now" 'BEGIN { printf "%.1f", b - a }') $c"
      return 0
    fi
    if awk -v a="$t0" -v b="$now" -v s="$settle_s" 'BEGIN { exit !(b - a >= s) }'; then
      echo "- $c"
      return 1
    fi
    sleep 0.25
  done
}

# wait_phase NAME PID: waits for "PHASE NAME done" from the client.
wait_phase() {
  ut_wait_line "$work/client.out" "^PHASE $1 done" $((max_s + 120)) "$2" >/dev/null
}

# server_stats N: asks the server for its counters (SIGUSR1) and prints its
# Nth "STATS server" line (empty if it did not come within 5 s).
server_stats() {
  local n=$1 i line
  for ((i = 0; i < 50; i++)); do
    ((i % 10 == 0)) && kill -USR1 "$server_pid" 2>/dev/null
    line=$(grep "^STATS server $n " "$work/server.out")
    [ -n "$line" ] && { echo "$line"; return; }
    sleep 0.1
  done
}
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }

problems=()

echo "churn on $addr: warmup 1, seq $seq_n cycles, conc $conc_n cycles x $conc at once; seed $seed;" \
  "upgrade_timeout_ms $VSOCK_UPGRADE_TIMEOUT_MS"

# ---- the kernel: neither end preloaded ----
env -u LD_PRELOAD "$bin" server "$addr" "$work/kernel.port" >"$work/kernel.server.out" 2>&1 &
server_pid=$!
port=$(ut_wait_line "$work/kernel.port" '^[0-9]+ ' 30 "$server_pid" >/dev/null && awk '{print $1}' "$work/kernel.port")
[ -n "$port" ] || ut_fail "kernel server did not start"
timeout -k 5 $((3 * max_s)) env -u LD_PRELOAD "$bin" client "$addr" "$port" "$seq_n" "$conc" "$conc_n" "$seed" "$max_s" \
  >"$work/kernel.client.out" 2>"$work/kernel.client.err"
rc=$?
kill -TERM "$server_pid" 2>/dev/null
ut_wait_pid "$server_pid" 20 >/dev/null 2>&1
server_pid=""
grep MEASURED "$work/kernel.client.out" | sed 's/^MEASURED /MEASURED path=kernel /'
[ $rc = 0 ] || { head -n 20 "$work/kernel.client.err"; problems+=("kernel run: client exit $rc"); }

# ---- both ends preloaded ----
lib_env=(LD_PRELOAD="$preload" VSOCK_STATS=1)
r0=$(rdma_counts)
env -u LD_PRELOAD "${lib_env[@]}" VSOCK_LOG_FILE="$work/server.log" \
  "$bin" server "$addr" "$work/lib.port" >"$work/server.out" 2>&1 &
server_pid=$!
port=$(ut_wait_line "$work/lib.port" '^[0-9]+ ' 30 "$server_pid" >/dev/null && awk '{print $1}' "$work/lib.port")
[ -n "$port" ] || { cat "$work/server.out"; ut_fail "preloaded server did not start"; }
listening=$(counts)
mkdir -p "$work/go"
timeout -k 5 $((3 * max_s + 600)) env -u LD_PRELOAD "${lib_env[@]}" VSOCK_LOG_FILE="$work/client.log" \
  "$bin" client "$addr" "$port" "$seq_n" "$conc" "$conc_n" "$seed" "$max_s" "$work/go" \
  >"$work/client.out" 2>"$work/client.err" &
client_pid=$!
wait_phase warmup "$client_pid" || { cat "$work/client.err"; ut_fail "no warm-up cycle"; }
sleep "$park_s"  # the warm-up's parked channel goes first
base=$(settle)
server_stats 1 >/dev/null
echo "MEASURED resources before_server: $r0"
echo "MEASURED resources server_listening: $listening (client started, no connection yet)"
echo "MEASURED resources after_warmup: $base (the baseline of each phase)"
touch "$work/go/warmup"

n=1
for phase in seq conc; do
  if [ "$phase" = seq ]; then cycles=$seq_n min_pct=$min_seq_pct; else cycles=$conc_n min_pct=$min_conc_pct; fi
  [ "$cycles" -gt 0 ] || { touch "$work/go/$phase"; continue; }
  wait_phase "$phase" "$client_pid" || { tail -n 20 "$work/client.err"; problems+=("$phase: the client never finished it"); break; }
  back=$(back_to "$base")
  took=${back%% *} after=${back#* }
  n=$((n + 1))
  sstats=$(server_stats $n)
  cstats=$(grep "^STATS client $phase " "$work/client.out")
  measured=$(grep "^MEASURED phase=$phase " "$work/client.out")
  echo "MEASURED path=libvsock ${measured#MEASURED }"
  up=$(field upgrades_done "$cstats") att=$(field upgrade_attempts "$cstats") socks=$(field tcp_sockets "$cstats")
  fallbacks=$(tr ' ' '\n' <<<"$cstats" | grep -E '^fallback_.*=[1-9]' | tr '\n' ' ')
  echo "MEASURED phase=$phase upgraded=${up:-0}/$cycles (client upgrade_attempts=${att:-0} tcp_sockets=${socks:-0};" \
    "server upgrades_done=$(field upgrades_done "$sstats")) fallbacks: ${fallbacks:-none}"
  echo "MEASURED phase=$phase resources before: $base"
  echo "MEASURED phase=$phase resources after:  $after (back after ${took}s)"
  echo "  client: ${cstats#STATS client $phase }"
  echo "  server: ${sstats#STATS server $n }"
  # Every check made and said; the verdict at the end.
  [ "$(field failures "$measured")" = 0 ] || problems+=("$phase: $(field failures "$measured") cycles failed")
  [ "$(field wrong_bytes "$measured")" = 0 ] || problems+=("$phase: $(field wrong_bytes "$measured") bytes wrong")
  [ "$took" != - ] || {
    problems+=("$phase: resources not back within ${settle_s}s: $after (baseline $base)")
    echo "  rdma resource show (now):"; rdma resource show 2>&1 | sed 's/^/    /'
    later=$(sleep 25; counts)
    echo "  30 s after the phase: $later"
  }
  if [ -z "$cstats" ]; then
    problems+=("$phase: no STATS line from the client (library not loaded?)")
  else
    [ $((${up:-0} * 100)) -ge $((cycles * min_pct)) ] ||
      problems+=("$phase: ${up:-0} of $cycles connections upgraded (at least $min_pct % expected)")
    attached=$(field upgrade_attached "$cstats")
    echo "MEASURED phase=$phase attached=${attached:-0}/$cycles (on a parked channel; client channels_parked=$(field channels_parked "$cstats") attach_failed=$(field attach_failed "$cstats"); server attach_refused=$(field attach_refused "$sstats"))"
    [ "$phase" != seq ] || [ $((${attached:-0} * 100)) -ge $((cycles * min_attached_pct)) ] ||
      problems+=("$phase: ${attached:-0} of $cycles connections upgraded on a parked channel (at least $min_attached_pct % expected)")
    # Every connection the server took is upgraded or has its reason.
    s_up=$(field upgrades_done "$sstats") s_resets=$(field upgrade_resets "$sstats")
    s_fb=$(tr ' ' '\n' <<<"$sstats" | awk -F= '/^fallback_/ { s += $2 } END { print s + 0 }')
    [ $((${s_up:-0} + s_fb + ${s_resets:-0})) -eq "$cycles" ] ||
      problems+=("$phase: the server counts ${s_up:-0} upgraded + $s_fb fallbacks + ${s_resets:-0} resets, not $cycles")
  fi
  touch "$work/go/$phase"
done

ut_wait_pid "$client_pid" 60 >/dev/null 2>&1
crc=$?
client_pid=""
[ $crc = 0 ] || { tail -n 20 "$work/client.err"; problems+=("libvsock run: client exit $crc"); }
kill -TERM "$server_pid" 2>/dev/null
ut_wait_pid "$server_pid" 30 >/dev/null 2>&1
server_pid=""
grep '^SERVER ' "$work/server.out" | sed 's/^/  server: /'
end=""
for ((i = 0; i < 20; i++)); do
  end=$(rdma_counts)
  [ "$end" = "$r0" ] && break
  sleep 0.25
done
echo "MEASURED resources after_exit: $end (before the server: $r0)"
[ "$end" = "$r0" ] || problems+=("after both exited: $end, before: $r0")
echo "  client totals: $(ut_stats_summary "$work/client.log")"
echo "  server totals: $(ut_stats_summary "$work/server.log")"
errors=$(grep -hE 'libvsock\[[0-9]+\]: (error|warn): ' "$work/server.log" "$work/client.log" |
  sed -E 's/^libvsock\[[0-9]+\]: //' | sort | uniq -c | sort -rn | head -n 10)
[ -n "$errors" ] && echo "  library error/warn lines:" && echo "$errors" | sed 's/^/    /'
grep -q 'errors=0' "$work/server.out" || problems+=("server: $(grep '^SERVER ' "$work/server.out")")
echo "MEASURED wall_s=$(($(date +%s) - t_start)) (kernel and libvsock runs)"
if [ ${#problems[@]} -gt 0 ]; then
  echo "---- client stderr ----"; head -n 30 "$work/client.err"
  printf 'FAIL: %s\n' "${problems[@]}"
  exit 1
fi
echo "PASS: every cycle byte-exact, connections upgraded, resources back within ${settle_s}s"
