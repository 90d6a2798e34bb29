#!/usr/bin/env bash
# Instructions per round trip of a preloaded epoll server, counted with
# callgrind (issue 12 items 3 and 6: what the library's epoll path costs per
# message, in a count that does not move with host load). Reported, never
# asserted (docs/performance.md, "What a request costs redis-server's
# thread").
#
#   bash bench/callgrind_epoll.sh [BUILD_DIR ...]   (default build/default; builds nothing)
#
# For each build: `vsock_idle_epoll server` (one thread, one epoll set,
# echoes) under `valgrind --tool=callgrind`, and a native `vsock_idle_epoll
# client` with ACTIVE connections (default 20) taken in turn, 64 B round
# trips, both preloaded with that build's libvsock.so. Two server runs
# differ only in the client's round trips (ITERS_A, ITERS_B): the difference
# of the inclusive counts over ITERS_B - ITERS_A is one round trip's, the
# connections' set-up left out. The number of looks per round trip follows
# timing (spins, entries going quiet), so compare builds per look too: the
# "entry looks" column counts them (StreamSocket::poll_events calls per
# round trip).
#
# Environment:
#   VSOCK_CALLGRIND_ITERS    "ITERS_A ITERS_B" (default "200 1000")
#   VSOCK_CALLGRIND_ACTIVE   active connections (default 20)
#   VSOCK_BENCH_ADDR         address (default $RXE_VM_IPADDR, else 127.0.0.1)
set -uo pipefail
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
builds=()
for b in "${@:-$source_dir/build/default}"; do
  builds+=("$(cd "$b" 2>/dev/null && pwd)") || { echo "callgrind_epoll.sh: $b not found: build first" >&2; exit 1; }
done

source "$source_dir/bench/on_device.sh"
bench_on_device "$source_dir/bench/callgrind_epoll.sh" "${builds[@]}"

command -v valgrind >/dev/null || { echo "callgrind_epoll.sh: valgrind not installed" >&2; exit 1; }
addr=${VSOCK_BENCH_ADDR:-${RXE_VM_IPADDR:-127.0.0.1}}
read -r iters_a iters_b <<<"${VSOCK_CALLGRIND_ITERS:-200 1000}"
active=${VSOCK_CALLGRIND_ACTIVE:-20}
work=$(mktemp -d /tmp/vsock-callgrind-epoll.XXXXXX) || exit 1
source "$source_dir/bench/bench_server.sh"
trap 'bench_stop_server; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# What each row shows: the functions' inclusive counts (callgrind_annotate's
# names, matched as fixed strings).
functions=("PROGRAM TOTALS" "vsock::sock::epoll_wait_all" "vsock::sock::StreamSocket::recv(" "vsock::sock::StreamSocket::send("
  "vsock::sock::StreamSocket::poll_events" "vsock::sock::scan_awake" "vsock::sock::StreamSocket::readiness_locked"
  "vsock::sock::StreamSocket::progress_locked" "vsock::sock::StreamChannel::pump_sends")
labels=("whole server" "epoll_wait" "recv" "send" "poll_events (looks)" "scan_awake" "readiness_locked" "progress" "pump_sends")

# run_once BUILD ITERS OUT: one server under callgrind, one client; OUT gets the annotation.
run_once() {
  local build=$1 iters=$2 out=$3 lib=$1/lib/libvsock.so line
  # Under valgrind the server takes longer to start than bench_server.sh's default wait.
  BENCH_SERVER_WAIT_S=120 bench_start_server "$work/server.out" env LD_PRELOAD="$lib" VSOCK_UPGRADE_TIMEOUT_MS=60000 \
    valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" "$build/bench/vsock_idle_epoll" server --addr "$addr" \
    --port 0 || { echo "server: $(tail -2 "$work/server.out")" >&2; bench_stop_server; return 1; }
  line=$(env LD_PRELOAD="$lib" VSOCK_UPGRADE_TIMEOUT_MS=60000 timeout -k 5 600 "$build/bench/vsock_idle_epoll" client \
    --addr "$addr" --port "$server_port" --idle 0 --active "$active" --rounds "$iters" --warmup 20 --seconds 500 \
    --check-every 1000000 2>>"$work/client.err" | grep '^result ')
  bench_stop_server
  [ -n "$line" ] || { echo "client: $(tail -2 "$work/client.err")" >&2; return 1; }
  callgrind_annotate --inclusive=yes --threshold=100 "$work/cg.out" 2>/dev/null >"$out"
  callgrind_annotate --tree=caller --inclusive=yes --threshold=100 --auto=no "$work/cg.out" 2>/dev/null >"$out.tree"
}

calls_of() {  # TREE NAME -> how often NAME (its own line, as callgrind_annotate names it) was called
  awk -v RS= -v name="$2" '
    { n = split($0, lines, "\n"); own = 0; calls = 0
      for (i = 1; i <= n; i++) {
        if (index(lines[i], " * ") && index(lines[i], name)) own = 1
        if (index(lines[i], " < ") && match(lines[i], /\([0-9,]+x\)/)) {
          c = substr(lines[i], RSTART + 1, RLENGTH - 3); gsub(",", "", c); calls += c
        }
      }
      if (own) { print calls; exit } }' "$1"
}

count_of() {  # FILE NAME -> the first inclusive count of NAME
  grep -F -- "$2" "$1" | head -n 1 | awk '{ gsub(",", "", $1); print $1 + 0 }'
}

# Entry looks (poll_events calls) per round trip: timing moves their number,
# so per-look costs compare builds better than per-round-trip ones.
look_fn='vsock::sock::StreamSocket::poll_events(int, short, vsock::sock::Look) ['
header="| build | entry looks |"
rule="|---|---:|"
for l in "${labels[@]}"; do header+=" $l |"; rule+="---:|"; done
rows=()
for build in "${builds[@]}"; do
  run_once "$build" "$iters_a" "$work/a.txt" && run_once "$build" "$iters_b" "$work/b.txt" || { rows+=("| $build | failed |"); continue; }
  la=$(calls_of "$work/a.txt.tree" "$look_fn") lb=$(calls_of "$work/b.txt.tree" "$look_fn")
  row="| $build | $(awk -v a="${la:-0}" -v b="${lb:-0}" -v d=$((iters_b - iters_a)) 'BEGIN { printf "%.1f", (b - a) / d }') |"
  for f in "${functions[@]}"; do
    a=$(count_of "$work/a.txt" "$f") b=$(count_of "$work/b.txt" "$f")
    row+=" $(( (${b:-0} - ${a:-0}) / (iters_b - iters_a) )) |"
  done
  rows+=("$row")
  echo "callgrind_epoll.sh: $build done" >&2
done
echo "$header"
echo "$rule"
printf '%s\n' "${rows[@]}"
echo
echo "Instructions per 64 B round trip of the server (callgrind, inclusive; difference of runs of $iters_b and" \
  "$iters_a round trips over $active connections taken in turn), vsock_idle_epoll server and client at $addr, both preloaded." \
  "Entry looks: calls of StreamSocket::poll_events per round trip (an awake entry asked once per look)."
exit 0
