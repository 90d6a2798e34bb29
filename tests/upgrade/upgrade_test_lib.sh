# Shared helpers of the tests/upgrade scripts (sourced, not run): the test
# address, bounded waits, and reading the library's stats line.
set -u

# The address to test on: the Soft-RoCE VM's (rdma_cm cannot use
# 127.0.0.1), else VSOCK_TEST_ADDR, else loopback.
ut_address() {
  if [ -n "${RXE_VM_IPADDR:-}" ]; then echo "$RXE_VM_IPADDR"
  elif [ -n "${VSOCK_TEST_ADDR:-}" ]; then echo "$VSOCK_TEST_ADDR"
  else echo 127.0.0.1
  fi
}

ut_fail() {
  echo "FAIL: $*"
  exit 1
}

# ut_work_dir NAME: a fresh work directory in $work, the current directory
# /tmp, $server_pid empty, and an EXIT trap that stops $server_pid (when a
# server is running) and removes $work (kept with VSOCK_TEST_KEEP=1).
ut_work_dir() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/vsock-$1.XXXXXX") || exit 2
  cd /tmp || exit 2
  server_pid=""
  trap ut_work_cleanup EXIT
}
ut_work_cleanup() {
  [ -n "${server_pid:-}" ] && kill -TERM "$server_pid" 2>/dev/null
  if [ "${VSOCK_TEST_KEEP:-0}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
}

# ut_show_log FILE [LINES]: the last LINES (default 30) lines of a library
# log or program output, without the stats lines, under a header; for a
# failing test's report.
ut_show_log() {
  echo "---- $(basename "$1") ----"
  grep -v ' stats: ' "$1" 2>/dev/null | tail -n "${2:-30}"
}

# ut_wait_line FILE REGEX SECS PID: waits until a line of FILE matches REGEX
# and prints its second field; fails early when PID exits.
ut_wait_line() {
  local file=$1 regex=$2 secs=$3 pid=$4 i
  for ((i = 0; i < secs * 10; i++)); do
    if grep -Eq "$regex" "$file" 2>/dev/null; then
      grep -E "$regex" "$file" | head -n1 | awk '{print $2}'
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# ut_wait_pid PID SECS: waits for PID (a child of this shell) to exit, up to
# SECS; SIGKILLs it after that. Returns its exit status (137 when killed).
ut_wait_pid() {
  local pid=$1 secs=$2 i
  for ((i = 0; i < secs * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "process $pid still running after ${secs}s: killing it" >&2
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid"
}

# ut_stats FILE NAME...: "NAME=VALUE ..." with each counter summed over
# every stats line in FILE (one line per process that had the library
# loaded); prints nothing when FILE has no stats line. One awk: process
# creation is slow in the TCG-emulated VM.
ut_stats() {
  local file=$1
  shift
  awk -v names="$*" '
    / stats: / && /libvsock\[[0-9]+\]/ {
      seen = 1
      for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2) sum[kv[1]] += kv[2]
    }
    END {
      if (!seen) exit
      n = split(names, want, " ")
      for (i = 1; i <= n; i++) printf "%s%s=%d", (i > 1 ? " " : ""), want[i], sum[want[i]]
      print ""
    }' "$file" 2>/dev/null
}

# ut_stat FILE NAME: the value alone (empty when FILE has no stats line).
ut_stat() {
  local out
  out=$(ut_stats "$1" "$2")
  echo "${out#*=}"
}

# ut_stats_summary FILE: the counters worth reading, on one line.
ut_stats_summary() {
  ut_stats "$1" tcp_bytes_sent tcp_bytes_received rdma_bytes_sent rdma_bytes_received upgrade_attempts \
    upgrades_done upgrade_resets fallback_declined fallback_rejected fallback_no_listener fallback_timeout \
    fallback_cached_peer fallback_peer_closed fallback_no_request fallback_refused stream_resumes \
    udp_ud_sends udp_ud_receives udp_kernel_sends udp_kernel_receives
}

# True when --expect-rdma was given or VSOCK_EXPECT_RDMA=1.
ut_expect_rdma() {
  local arg
  for arg in "$@"; do [ "$arg" = --expect-rdma ] && return 0; done
  [ "${VSOCK_EXPECT_RDMA:-0}" = 1 ]
}

# ut_abs PATH: PATH made absolute when it names a file (the scripts cd to
# /tmp); a colon list (sanitizer runtime:library) is returned as given.
ut_abs() {
  if [ -e "$1" ]; then realpath "$1"; else echo "$1"; fi
}

# ut_free_port ADDR: a TCP port free on ADDR now (for a server that must
# listen on a port known beforehand).
ut_free_port() {
  python3 -c 'import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$1"
}

# ut_clock: the monotonic clock in seconds, as the library's debug lines
# show it ([s.µs]; /proc/uptime counts the same in a guest that was never
# suspended, to 10 ms).
ut_clock() { cut -d' ' -f1 /proc/uptime; }

# ut_times_after FILE REGEX T0: "N FIRST LAST": how many debug lines of
# FILE match REGEX, and the first and last of them in seconds after T0
# (ut_clock); "0 - -" when none does.
ut_times_after() {
  awk -v re="$2" -v t0="$3" '
    $0 ~ re && match($0, /\[[0-9]+\.[0-9]+\]/) {
      t = substr($0, RSTART + 1, RLENGTH - 2) - t0
      if (!n || t < first) first = t
      if (!n || t > last) last = t
      n++
    }
    END { if (n) printf "%d %.2f %.2f\n", n, first, last; else print "0 - -" }' "$1"
}
