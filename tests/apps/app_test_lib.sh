# Shared helpers for the real-program tests in tests/apps/ (sourced, not run).
#
# Every test runs both ends of a real program under LD_PRELOAD=$VSOCK_PRELOAD
# on $VSOCK_TEST_ADDR (default 127.0.0.1), keeps its files in a temp dir under
# /tmp, bounds every wait, and kills the servers it started by PID on exit.
# Exit codes: 0 pass, 1 fail, 77 skipped (a program is not installed).
# The *_device.sh scripts run inside the Soft-RoCE VM (tests/rxe/) on its
# address and also run each program without the library (app_library off).
# To look into a failure: VSOCK_APP_LOG_LEVEL=debug (the library's log
# level, default info) and VSOCK_APP_WORKDIR=DIR (where the temp dir goes,
# e.g. a directory the VM shares with the host) with VSOCK_TEST_KEEP=1.

set -u
export TMPDIR=${TMPDIR:-/tmp}
[ -n "$TMPDIR" ] || export TMPDIR=/tmp

APP_ADDR=${VSOCK_TEST_ADDR:-127.0.0.1}
APP_PYTHON=/usr/bin/python3
APP_SERVER_PIDS=()
APP_WORK=""
APP_WITH_LIBRARY=1

# app_library on|off: whether app_preloaded and app_start_server load the
# library (off: the same programs on the kernel alone, for comparison).
# APP_ENV is the env(1) command line that does it.
APP_ENV=()
app_library() {
  case $1 in
    on) APP_WITH_LIBRARY=1; APP_ENV=(env LD_PRELOAD="$VSOCK_PRELOAD" VSOCK_STATS=1 VSOCK_LOG_LEVEL=${VSOCK_APP_LOG_LEVEL:-info}) ;;
    off) APP_WITH_LIBRARY=0; APP_ENV=(env -u LD_PRELOAD -u VSOCK_STATS) ;;
    *) app_fail "usage: app_library on|off" ;;
  esac
}

app_log() { echo "[$(date +%T)] $*"; }

app_fail() {
  echo "FAIL: $*" >&2
  exit 1
}

app_skip() {
  echo "SKIPPED: $*"
  exit 77
}

# Skips the test unless every named program is installed.
app_require() {
  local prog
  for prog in "$@"; do
    if ! command -v "$prog" >/dev/null 2>&1 && [ ! -x "$prog" ]; then
      app_skip "$prog not installed"
    fi
  done
}

# True while PID is alive and not a zombie waiting to be reaped.
app_is_running() {
  local state
  [ -r "/proc/$1/stat" ] || return 1
  state=$(sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# Sends SIG (default TERM) to PID, waits up to SECS (default 10) for it to end,
# then SIGKILLs it. Leaves the exit status in APP_STOP_STATUS.
# When PID is a `timeout` wrapper (app_start_server's), the signal goes to the
# program it runs: `timeout` passes a signal on twice (to its child, then to
# its process group), and a second signal that lands while the program tears
# down has killed node (status 143) and hung sockperf in its exit path (its
# handler prints; `timeout -k 5` then killed it, status 137).
app_stop_pid() {
  local pid=$1 sig=${2:-TERM} secs=${3:-10} target=$1 i
  APP_STOP_STATUS=0
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; APP_STOP_STATUS=$?; return 0; }
  if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = timeout ]; then
    target=$(head -n1 "/proc/$pid/task/$pid/children" 2>/dev/null | awk '{ print $1 }')
    [ -n "$target" ] || target=$pid
  fi
  kill -s "$sig" "$target" 2>/dev/null
  for ((i = 0; i < secs * 10; i++)); do
    app_is_running "$pid" || break
    sleep 0.1
  done
  if app_is_running "$pid"; then
    echo "warning: PID $pid ignored SIG$sig for ${secs}s; killing it" >&2
    kill -s KILL "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null
  APP_STOP_STATUS=$?
}

# Waits up to SECS for PID to exit on its own; status in APP_STOP_STATUS.
# Returns 1 (and leaves PID running) on timeout.
app_wait_exit() {
  local pid=$1 secs=$2 i
  for ((i = 0; i < secs * 10; i++)); do
    app_is_running "$pid" || break
    sleep 0.1
  done
  app_is_running "$pid" && return 1
  wait "$pid" 2>/dev/null
  APP_STOP_STATUS=$?
  return 0
}

app_cleanup() {
  local pid
  for pid in "${APP_SERVER_PIDS[@]}"; do
    app_is_running "$pid" && app_stop_pid "$pid" TERM 5
  done
  if [ -n "$APP_WORK" ] && [ -d "$APP_WORK" ]; then
    if [ "${VSOCK_TEST_KEEP:-0}" = 1 ]; then
      echo "kept $APP_WORK"
    else
      rm -rf "$APP_WORK"
    fi
  fi
}

# Prints the per-process logs when the test fails, so CTest shows them.
app_on_exit() {
  local status=$? f
  if [ "$status" -ne 0 ] && [ "$status" -ne 77 ] && [ -n "$APP_WORK" ] && [ -d "$APP_WORK" ]; then
    for f in "$APP_WORK"/*.log; do
      [ -f "$f" ] || continue
      echo "---- $(basename "$f") (last 40 lines) ----" >&2
      tail -n 40 "$f" >&2
    done
  fi
  app_cleanup
  exit "$status"
}

# app_init NAME: checks the environment and makes the temp dir $APP_WORK.
app_init() {
  [ -n "${VSOCK_PRELOAD:-}" ] || app_fail "VSOCK_PRELOAD is not set (run through ctest)"
  local lib
  for lib in ${VSOCK_PRELOAD//:/ }; do
    [ -f "$lib" ] || app_fail "preload library $lib does not exist (build first)"
  done
  unset VSOCK_LOG_FILE
  app_library on
  APP_WORK=$(mktemp -d "${VSOCK_APP_WORKDIR:-/tmp}/vsock-app-$1.XXXXXX") || app_fail "mktemp failed"
  trap app_on_exit EXIT
  trap 'exit 130' INT TERM
}

# Is PORT (decimal) in use by any TCP or UDP socket, IPv4 or IPv6?
app_port_in_use() {
  local hex
  hex=$(printf '%04X' "$1")
  cat /proc/net/tcp /proc/net/tcp6 /proc/net/udp /proc/net/udp6 2>/dev/null |
    awk -v p=":$hex" '{ if (substr($2, length($2) - 4) == p) found = 1 } END { exit !found }'
}

# Prints a port that is free for both TCP and UDP right now. Asks the kernel
# for an ephemeral TCP port, checks UDP too; falls back to a port derived
# from $$. Callers retry on a bind race (see app_start_server).
app_free_port() {
  local port="" i
  if [ -x "$APP_PYTHON" ]; then
    port=$("$APP_PYTHON" - "$APP_ADDR" <<'EOF' 2>/dev/null
import socket, sys
addr = sys.argv[1]
for _ in range(50):
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.bind((addr, 0))
    port = t.getsockname()[1]
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.bind((addr, port))
    except OSError:
        continue
    finally:
        u.close()
        t.close()
    print(port)
    break
EOF
)
  fi
  if [ -z "$port" ]; then
    for ((i = 0; i < 100; i++)); do
      port=$((20000 + ($$ * 7 + RANDOM + i * 131) % 30000))
      app_port_in_use "$port" || break
    done
  fi
  echo "$port"
}

# app_wait_port PROTO PORT PID SECS: waits until something listens on TCP PORT
# (PROTO tcp) or is bound to UDP PORT (PROTO udp). Fails early if PID exits.
app_wait_port() {
  local proto=$1 port=$2 pid=$3 secs=$4 hex i files
  hex=$(printf '%04X' "$port")
  if [ "$proto" = tcp ]; then files="/proc/net/tcp /proc/net/tcp6"; else files="/proc/net/udp /proc/net/udp6"; fi
  for ((i = 0; i < secs * 10; i++)); do
    # shellcheck disable=SC2086
    if cat $files 2>/dev/null | awk -v p=":$hex" -v tcp="$proto" \
        '{ if (substr($2, length($2) - 4) == p && (tcp != "tcp" || $4 == "0A")) found = 1 } END { exit !found }'; then
      return 0
    fi
    app_is_running "$pid" || return 1
    sleep 0.1
  done
  return 1
}

# app_preloaded LOG CMD...: runs CMD in the foreground under the library, with
# stats and the info log going to LOG (stderr); stdout is left alone.
# Bounded by VSOCK_APP_CLIENT_TIMEOUT seconds (default 120).
app_preloaded() {
  local log=$1
  shift
  timeout -k 5 "${VSOCK_APP_CLIENT_TIMEOUT:-120}" "${APP_ENV[@]}" "$@" 2>>"$log"
}

# app_start_server NAME PROTO CMD...: starts CMD (which must contain the word
# @PORT@, replaced by a free port) in the background under the library, output
# to $APP_WORK/NAME.log, and waits until it listens. Retries with another port
# if the server dies first (a port race). Sets APP_PORT and APP_PID.
app_start_server() {
  local name=$1 proto=$2 attempt port arg
  shift 2
  local -a cmd
  for ((attempt = 1; attempt <= 3; attempt++)); do
    port=$(app_free_port)
    [ -n "$port" ] || app_fail "no free port found"
    cmd=()
    for arg in "$@"; do cmd+=("${arg//@PORT@/$port}"); done
    app_log "starting $name on $APP_ADDR:$port: ${cmd[*]}"
    # timeout bounds the server's life even if this script is SIGKILLed; it
    # forwards our SIGTERM/SIGINT to the server.
    timeout -k 5 "${VSOCK_APP_SERVER_TIMEOUT:-300}" \
      "${APP_ENV[@]}" "${cmd[@]}" >>"$APP_WORK/$name.log" 2>&1 </dev/null &
    APP_PID=$!
    APP_SERVER_PIDS+=("$APP_PID")
    APP_PORT=$port
    if app_wait_port "$proto" "$port" "$APP_PID" 15; then
      return 0
    fi
    app_stop_pid "$APP_PID" KILL 2
    echo "warning: $name did not come up on port $port (attempt $attempt)" >&2
  done
  app_fail "$name did not start (see $name.log)"
}

# app_start_redis NAME: redis-server on $APP_ADDR without persistence, in the
# foreground, logging to its stdout (app_start_server's NAME.log), under the
# library as app_library last said. Sets APP_PORT and APP_PID.
app_start_redis() {
  app_start_server "$1" tcp redis-server --port @PORT@ --bind "$APP_ADDR" --save '' --appendonly no \
    --protected-mode no --daemonize no --logfile '' --dir "$APP_WORK"
}

# app_expect_loaded LOG WHAT [COUNTER]: proves the library was loaded in the
# process(es) whose stderr went to LOG and that it saw at least one socket of
# the kind COUNTER (default tcp_sockets) in one process.
app_expect_loaded() {
  local log=$1 what=$2 counter=${3:-tcp_sockets}
  grep -Eq 'libvsock\[[0-9]+\]: info: libvsock [0-9.]+ loaded' "$log" ||
    app_fail "$what: no 'libvsock ... loaded' line in $(basename "$log")"
  grep -Eq "libvsock\[[0-9]+\]: stats:.* $counter=[1-9]" "$log" ||
    app_fail "$what: no stats line with $counter>=1 in $(basename "$log")"
  app_log "$what: library loaded, $(grep -Eo "stats:.* $counter=[0-9]+" "$log" | grep -Eo "$counter=[0-9]+" | sort -t= -k2 -n | tail -n1)"
}

# app_stats LOG: reads every "libvsock[pid]: stats:" line of LOG into
# APP_STATS[counter] (summed over the processes that logged there), with one
# awk: forks are slow in the emulated VM. Returns 1 when LOG has no stats line.
declare -A APP_STATS=()
app_stats() {
  local sums name value
  APP_STATS=()
  sums=$(awk '/libvsock\[[0-9]+\]: stats:/ {
      for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2 && kv[2] ~ /^[0-9]+$/) sum[kv[1]] += kv[2]
    } END { for (k in sum) print k, sum[k] }' "$1" 2>/dev/null)
  [ -n "$sums" ] || return 1
  while read -r name value; do APP_STATS[$name]=$value; done <<<"$sums"
}

# app_expect_rdma LOG WHAT UPGRADES DIR MIN: the process(es) whose stderr went
# to LOG upgraded at least UPGRADES connections and moved at least MIN bytes
# in direction DIR (sent|received) over RDMA, and at least 9 times what went
# that way over TCP (only what precedes the switch may use TCP).
app_expect_rdma() {
  local log=$1 what=$2 upgrades=$3 dir=$4 min=$5 done rdma tcp name summary=""
  app_stats "$log" || app_fail "$what: no stats line in $(basename "$log") (did it exit cleanly?)"
  for name in tcp_bytes_sent tcp_bytes_received rdma_bytes_sent rdma_bytes_received upgrade_attempts upgrades_done \
      upgrade_resets; do
    summary="$summary $name=${APP_STATS[$name]:-0}"
  done
  for name in "${!APP_STATS[@]}"; do
    [[ $name == fallback_* && ${APP_STATS[$name]} -gt 0 ]] && summary="$summary $name=${APP_STATS[$name]}"
  done
  app_log "$what:$summary"
  # An error-level line is one the user must act on (issue 13 item 6): a
  # program that ran well under the library logs none.
  local errors
  errors=$(grep -E 'libvsock\[[0-9]+\]: error: ' "$log" | sort | uniq -c | head -n 5)
  [ -z "$errors" ] || app_fail "$what: the library logged errors on a run that went well:"$'\n'"$errors"
  done=${APP_STATS[upgrades_done]:-0}
  rdma=${APP_STATS[rdma_bytes_$dir]:-0}
  tcp=${APP_STATS[tcp_bytes_$dir]:-0}
  [ "$done" -ge "$upgrades" ] || app_fail "$what: upgrades_done=$done, expected at least $upgrades"
  [ "$rdma" -ge "$min" ] || app_fail "$what: rdma_bytes_$dir=$rdma, expected at least $min"
  [ "$rdma" -ge $((tcp * 9)) ] || app_fail "$what: rdma_bytes_$dir=$rdma but tcp_bytes_$dir=$tcp: the data went over TCP"
}

# app_device_init: for the *_device.sh scripts. They need the device's
# address (rdma_cm cannot use 127.0.0.1); ctest runs them through
# tests/rxe/with-device.sh and tests/upgrade/on_device_address.sh. Under TCG
# an upgrade often takes longer than the default upgrade_timeout_ms (200 ms:
# rdma_cm's first connect in a process alone takes 40-100 ms there, see
# tests/rxe/README.md), and a connection that times out stays on TCP and
# makes the peer skipped for peer_fail_cache_s, so these tests allow 10 s:
# with two guests booted side by side (ctest -j2 in CI) one upgrade among
# dozens of connections was seen to take more than 2 s.
app_device_init() {
  case $APP_ADDR in
    127.* | ::1) app_fail "VSOCK_TEST_ADDR is $APP_ADDR: run through tests/rxe/with-device.sh tests/upgrade/on_device_address.sh" ;;
  esac
  export VSOCK_UPGRADE_TIMEOUT_MS=${VSOCK_UPGRADE_TIMEOUT_MS:-10000}
  app_log "device address $APP_ADDR, VSOCK_UPGRADE_TIMEOUT_MS=$VSOCK_UPGRADE_TIMEOUT_MS"
}
