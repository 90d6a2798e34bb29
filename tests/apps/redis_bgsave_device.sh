#!/usr/bin/env bash
# Fork under load (issue 13 item 4): redis-server (Debian's, unmodified)
# snapshots every second (--save "1 1": a BGSAVE, that is a fork(), whenever
# something changed in the last second) while two preloaded clients load it
# over the verbs device: redis-benchmark (SET then GET, -c 20 -P 16, bounded
# -n) and redis_checker.py (20 connections of pipelined SETs and GETs of
# their own keys, every reply compared byte for byte, at most
# VSOCK_CHECKER_SECONDS, default 20). ctest runs it in the Soft-RoCE VM
# through tests/rxe/with-device.sh and tests/upgrade/on_device_address.sh.
#
# Passes when the checker found no wrong or missing reply and all its
# connections alive at the end; redis-benchmark completed both tests; redis
# counted exactly the SETs and GETs both sent (INFO commandstats); at least 3
# BGSAVEs (total_forks) ran while the checker did, the library saw each fork,
# and rdb_last_bgsave_status is ok; the server exits 0 on SIGTERM and the
# dump.rdb it then writes passes redis-check-rdb; every process moved RDMA
# bytes and the server tried to upgrade each of the load's connections. A
# MEASURED line says how many of the server's connections stayed on RDMA
# across the forks. And last, the forks kept them on RDMA: the server's
# reverts_sent less its close_handbacks is 0 (no open connection went back
# to TCP for a fork; one closed while a snapshot child still held its fd is
# handed back at that close, by design: protocol.md §5.2), its
# fallback_declined is 0 (no fork kept one from upgrading), it upgraded
# every connection of the load (60), the library logged no error, and what
# it received and sent after its first fork (vsock-stat's look then,
# against its VSOCK_STATS=1 line at exit) went at least 9 parts in 10 over
# RDMA.
# Usage: redis_bgsave_device.sh VSOCK_STAT
source "$(dirname "$0")/app_test_lib.sh"
vsock_stat=${1:-}
checker=$(cd "$(dirname "$0")" && pwd)/redis_checker.py
app_require redis-server redis-cli redis-benchmark redis-check-rdb
[ -x "$vsock_stat" ] || app_fail "vsock-stat '$vsock_stat' is not an executable (usage: $0 VSOCK_STAT)"
app_init redis-bgsave
app_device_init
clients=20
requests=${VSOCK_APP_REQUESTS:-60000}
seconds=${VSOCK_CHECKER_SECONDS:-20}
# The stats segments in a directory of this test's own, for vsock-stat.
export XDG_RUNTIME_DIR=$APP_WORK/run
mkdir -m 700 "$XDG_RUNTIME_DIR" || app_fail "mkdir $XDG_RUNTIME_DIR"

# info SECTION FIELD: one value of redis INFO, asked without the library.
info() {
  env -u LD_PRELOAD timeout 30 redis-cli -h "$APP_ADDR" -p "$port" INFO "$1" | tr -d '\r' |
    sed -n "s/^$2:\(.*\)$/\1/p"
}
# counters_of FILE: the process counters of a vsock-stat --json look into
# COUNTERS[name], in bash alone (each program started costs in the VM).
declare -A COUNTERS=()
counters_of() {
  local json pair
  local -a pairs
  COUNTERS=()
  json=$(<"$1")
  json=${json#*\"counters\":\{}
  IFS=, read -ra pairs <<<"${json%%\}*}"
  for pair in "${pairs[@]}"; do
    pair=${pair//\"/}
    COUNTERS[${pair%%:*}]=${pair#*:}
  done
}

app_library on
app_start_server redis tcp redis-server --port @PORT@ --bind "$APP_ADDR" --save '1 1' --appendonly no \
  --protected-mode no --daemonize no --logfile '' --dir "$APP_WORK" --dbfilename dump.rdb
port=$APP_PORT server=$APP_PID
rpid=$(head -n1 "/proc/$server/task/$server/children" 2>/dev/null | awk '{ print $1 }')
[ "$(cat "/proc/${rpid:-0}/comm" 2>/dev/null)" = redis-server ] ||
  app_fail "no redis-server under timeout (pid $server): child '${rpid:-none}'"
forks_before=$(info stats total_forks)
app_log "redis-server pid $rpid on port $port, total_forks=$forks_before before the load"

# The load: both clients at once, each bounded by timeout(1) as well.
start=$SECONDS
timeout -k 5 "${VSOCK_APP_CLIENT_TIMEOUT:-300}" "${APP_ENV[@]}" redis-benchmark -h "$APP_ADDR" -p "$port" \
  -c "$clients" -P 16 -n "$requests" -r 10000 -d 256 -t set,get --csv \
  >"$APP_WORK/bench.csv" 2>>"$APP_WORK/bench.log" </dev/null &
bench=$!
APP_SERVER_PIDS+=("$bench")
timeout -k 5 "${VSOCK_APP_CLIENT_TIMEOUT:-300}" "${APP_ENV[@]}" "$APP_PYTHON" "$checker" "$APP_ADDR" "$port" \
  --conns "$clients" --seconds "$seconds" >"$APP_WORK/checker.out" 2>>"$APP_WORK/checker.log" </dev/null &
check=$!
APP_SERVER_PIDS+=("$check")

# The server's counters just after its first fork (at most 600 looks).
first=$APP_WORK/first-fork.json
for ((i = 0; i < 600; i++)); do
  if "$vsock_stat" --once --json -p "$rpid" >"$first.tmp" 2>/dev/null && counters_of "$first.tmp" &&
    [ "${COUNTERS[forks]:-0}" -ge 1 ]; then
    mv "$first.tmp" "$first"
    break
  fi
  app_is_running "$check" || app_is_running "$bench" || break
  sleep 0.1
done
[ -f "$first" ] || app_fail "vsock-stat never showed a fork of redis-server while the load ran"
declare -A FIRST=()
for name in "${!COUNTERS[@]}"; do FIRST[$name]=${COUNTERS[$name]}; done
on_rdma=$(grep -Eo '"role":"accepted","local":"[^"]*","peer":"[^"]*","path":"rdma"' "$first" | wc -l)
accepted=$(grep -Eo '"role":"accepted"' "$first" | wc -l)
app_log "first fork after $((SECONDS - start)) s: $on_rdma of $accepted accepted connections on rdma then," \
  "reverts_sent=${FIRST[reverts_sent]}"

app_wait_exit "$check" $((seconds + 240)) || app_fail "the checker did not end within $((seconds + 240)) s"
check_status=$APP_STOP_STATUS
forks_load=$(($(info stats total_forks) - forks_before))
app_log "$(cat "$APP_WORK/checker.out")"
[ "$check_status" -eq 0 ] || app_fail "the checker failed (status $check_status): $(grep ERROR "$APP_WORK/checker.out" | head -n 3)"
app_wait_exit "$bench" 240 || app_fail "redis-benchmark did not end within 240 s of the checker"
[ "$APP_STOP_STATUS" -eq 0 ] || app_fail "redis-benchmark failed (status $APP_STOP_STATUS)"
for t in SET GET; do
  rps=$(tr -d '"' <"$APP_WORK/bench.csv" | awk -F, -v t="$t" '$1 == t { print $2 }')
  [ -n "$rps" ] || app_fail "redis-benchmark printed no $t result"
  app_log "redis-benchmark $t: $requests requests, $rps requests/s"
done
load_secs=$((SECONDS - start))
app_log "load over after $load_secs s"

# Every request counted once: the benchmark's and the checker's.
read -r csets cgets < <(sed -n 's/.*(\([0-9]*\) SET, \([0-9]*\) GET,.*/\1 \2/p' "$APP_WORK/checker.out")
for t in set get; do
  want=$requests
  if [ "$t" = set ]; then want=$((want + csets)); else want=$((want + cgets)); fi
  calls=$(info commandstats "cmdstat_$t" | sed -n 's/^calls=\([0-9]*\),.*/\1/p')
  [ "${calls:-0}" -eq "$want" ] || app_fail "redis counted ${calls:-no} $t calls, expected $want"
done
app_log "redis counted $((requests + csets)) SET and $((requests + cgets)) GET calls, as sent"

# The snapshots: at least 3 while the checker ran, the last one good.
for ((i = 0; i < 300; i++)); do
  [ "$(info persistence rdb_bgsave_in_progress)" = 0 ] && break
  sleep 0.1
done
forks=$(info stats total_forks)
saves=$(info persistence rdb_saves)
bgsave_status=$(info persistence rdb_last_bgsave_status)
app_log "redis: $forks_load forks while the checker ran, total_forks=$forks, rdb_saves=$saves," \
  "rdb_last_bgsave_status=$bgsave_status"
[ "$forks_load" -ge 3 ] || app_fail "only $forks_load BGSAVE forks while the checker ran, expected at least 3"
[ "$bgsave_status" = ok ] || app_fail "rdb_last_bgsave_status is '$bgsave_status', expected ok"

app_stop_pid "$server" TERM 30
[ "$APP_STOP_STATUS" -eq 0 ] || app_fail "redis-server exited with status $APP_STOP_STATUS"
[ -s "$APP_WORK/dump.rdb" ] || app_fail "redis-server left no dump.rdb in $APP_WORK"
env -u LD_PRELOAD timeout 120 redis-check-rdb "$APP_WORK/dump.rdb" >"$APP_WORK/check-rdb.out" 2>&1 ||
  app_fail "redis-check-rdb rejects dump.rdb: $(tail -n 5 "$APP_WORK/check-rdb.out")"
app_log "redis-server exited 0; dump.rdb ($(stat -c %s "$APP_WORK/dump.rdb") bytes) passes redis-check-rdb"

# The library in every process; the server's own line at exit.
app_expect_loaded "$APP_WORK/checker.log" "checker"
app_expect_loaded "$APP_WORK/bench.log" "redis-benchmark"
grep -E "^libvsock\[$rpid\]: stats: " "$APP_WORK/redis.log" >"$APP_WORK/server-stats.log" ||
  app_fail "redis-server (pid $rpid) printed no stats line at exit"
app_stats "$APP_WORK/server-stats.log"
declare -A SERVER=()
for name in "${!APP_STATS[@]}"; do SERVER[$name]=${APP_STATS[$name]}; done
lib_forks=${SERVER[forks]}
[ "$lib_forks" = "$forks" ] || app_fail "the library counted forks=$lib_forks in redis-server, redis total_forks=$forks"
# On RDMA: the server tried to upgrade the checker's connections and both
# benchmark tests' (how many it did is checked at the end: a fork in the
# middle of an upgrade can stop it), and moved RDMA bytes both ways.
upgrades=${SERVER[upgrades_done]}
declined=${SERVER[fallback_declined]}
[ "${SERVER[upgrade_attempts]}" -ge $((3 * clients)) ] ||
  app_fail "redis-server: upgrade_attempts=${SERVER[upgrade_attempts]}, expected at least $((3 * clients))"
for d in sent received; do
  [ "${SERVER[rdma_bytes_$d]}" -gt 0 ] || app_fail "redis-server: rdma_bytes_$d=0"
done
for log in checker bench; do
  app_stats "$APP_WORK/$log.log"
  if [ "${APP_STATS[upgrades_done]:-0}" -eq 0 ] || [ "${APP_STATS[rdma_bytes_sent]:-0}" -eq 0 ]; then
    app_fail "$log: upgrades_done=${APP_STATS[upgrades_done]:-0} rdma_bytes_sent=${APP_STATS[rdma_bytes_sent]:-0}"
  fi
  app_log "$log: upgrades_done=${APP_STATS[upgrades_done]} of ${APP_STATS[tcp_sockets]:-0} connections," \
    "fallback_transport_error=${APP_STATS[fallback_transport_error]:-0}, reverts_received=${APP_STATS[reverts_received]:-0}"
done

# How many connections stayed on RDMA across the forks. (A connection can
# be reverted after its switch began but before it counted as upgraded.)
reverts_sent=${SERVER[reverts_sent]}
at_close=${SERVER[close_handbacks]:-0}
reverts_open=$((reverts_sent - at_close))
reverted=$((reverts_open + SERVER[reverts_received] + SERVER[stream_resumes]))
kept=$((upgrades > reverted ? upgrades - reverted : 0))
app_log "redis-server: $upgrades connections upgraded ($declined declined during a fork), $kept stayed on RDMA" \
  "across $forks forks (reverts_sent=$reverts_sent, $at_close of them at the connection's close," \
  "reverted or resumed on TCP in all: $reverted)"
# What the server moved after its first fork, each way and path: AFTER[path_d].
declare -A AFTER=()
for d in sent received; do
  for path in rdma tcp; do
    AFTER[${path}_$d]=$((SERVER[${path}_bytes_$d] - FIRST[${path}_bytes_$d]))
  done
  app_log "redis-server after its first fork: ${AFTER[rdma_$d]} bytes $d over RDMA, ${AFTER[tcp_$d]} over TCP"
done
echo "MEASURED redis BGSAVE under load: $forks forks ($forks_load while the checker ran)," \
  "$kept of $upgrades server connections stayed on RDMA across them (reverts_sent=$reverts_sent," \
  "fallback_declined=$declined);" \
  "after the first fork ${AFTER[rdma_received]} bytes received over RDMA, ${AFTER[tcp_received]} over TCP;" \
  "at the first fork $on_rdma of $accepted accepted connections on rdma;" \
  "checker: $((csets + cgets)) SET+GET checked; load $load_secs s on $APP_ADDR"

# What the forks must not do: send a connection back to TCP, or keep one
# from upgrading. (Today's library fails here: every fork reverts them all.)
[ "$reverts_open" -eq 0 ] || app_fail "redis-server: reverts_sent=$reverts_sent of which $at_close at a close," \
  "expected none but those: its $forks forks (BGSAVE) sent $reverts_open open connections back to TCP" \
  "(upgrades_done=$upgrades)"
[ "$declined" -eq 0 ] || app_fail "redis-server: fallback_declined=$declined, expected 0: $declined connections" \
  "stayed on TCP because a fork (BGSAVE) came while they upgraded"
[ "$upgrades" -ge $((3 * clients)) ] || app_fail "redis-server: upgrades_done=$upgrades of" \
  "upgrade_attempts=${SERVER[upgrade_attempts]}, expected at least $((3 * clients))"
# A run that went well logs no error-level line (issue 13 item 6); today a
# fork in the middle of an upgrade can make the client log one.
errors=$(grep -E 'libvsock\[[0-9]+\]: error: ' "$APP_WORK"/*.log | sort | uniq -c | head -n 5)
[ -z "$errors" ] || app_fail "the library logged errors:"$'\n'"$errors"
for d in sent received; do
  rdma=${AFTER[rdma_$d]} tcp=${AFTER[tcp_$d]}
  if [ "$rdma" -eq 0 ] || [ "$rdma" -lt $((tcp * 9)) ]; then
    app_fail "redis-server after its first fork: rdma_bytes_$d grew by $rdma but tcp_bytes_$d by $tcp:" \
      "the data went over TCP"
  fi
done
echo "PASS: redis BGSAVE forks under load, connections kept on RDMA"
