#!/usr/bin/env bash
# Instructions per call of the library's stream data path, counted with
# callgrind (docs/performance.md, "System calls per message"). Reported,
# never asserted. Instruction counts do not move with host load, unlike
# times on the emulated test bed.
#
#   bash bench/callgrind.sh [BUILD_DIR ...]   (default build/default; builds nothing)
#
# For each build: a vsock_bench server (native) and a client under
# `valgrind --tool=callgrind` ping-pong 64 B over rxe0, both preloaded with
# that build's libvsock.so and VSOCK_PROFILE (default latency). Two client
# runs differ only in the number of round trips (ITERS_A, ITERS_B); the
# difference of the inclusive instruction counts of StreamSocket::send and
# StreamSocket::recv, over ITERS_B - ITERS_A, is the cost of one call in the
# steady state. recv is also shown without StreamSocket::wait (the spin and
# the sleep: how long the reply takes, not what the call costs).
#
# Environment:
#   VSOCK_CALLGRIND_ITERS    "ITERS_A ITERS_B" (default "100 400")
#   VSOCK_CALLGRIND_PROFILE  (default latency)
#   VSOCK_BENCH_ADDR         address (default $RXE_VM_IPADDR, else 127.0.0.1)
set -uo pipefail
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
builds=()
for b in "${@:-$source_dir/build/default}"; do
  builds+=("$(cd "$b" 2>/dev/null && pwd)") || { echo "callgrind.sh: $b not found: build first" >&2; exit 1; }
done

source "$source_dir/bench/on_device.sh"
bench_on_device "$source_dir/bench/callgrind.sh" "${builds[@]}"

command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind not installed" >&2; exit 1; }
addr=${VSOCK_BENCH_ADDR:-${RXE_VM_IPADDR:-127.0.0.1}}
read -r iters_a iters_b <<<"${VSOCK_CALLGRIND_ITERS:-100 400}"
profile=${VSOCK_CALLGRIND_PROFILE:-latency}
work=$(mktemp -d /tmp/vsock-callgrind.XXXXXX) || exit 1
source "$source_dir/bench/bench_server.sh"
trap 'bench_stop_server; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# run BUILD ITERS OUT: one client run under callgrind; OUT gets the
# inclusive Ir of send, recv and wait ("send N" ... lines)
run() {
  local build=$1 iters=$2 out=$3
  local -a envs=("LD_PRELOAD=$build/lib/libvsock.so" "VSOCK_PROFILE=$profile" VSOCK_UPGRADE_TIMEOUT_MS=30000
    VSOCK_STATS=1 "VSOCK_LOG_FILE=$work/stats.log")
  : >"$work/stats.log"
  bench_start_server "$work/server.out" env "${envs[@]}" "$build/bench/vsock_bench" server --addr "$addr" --port 0 \
    --cpu 0 || { echo "server did not start" >&2; bench_stop_server; return 1; }
  rm -f "$work/cg.out"
  env "${envs[@]}" timeout -k 5 600 valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
    "$build/bench/vsock_bench" client --test tcp-lat --size 64 --addr "$addr" --port "$server_port" --iters "$iters" \
    --warmup 50 --seconds 500 --cpu 1 >"$work/client.out" 2>"$work/valgrind.err" </dev/null
  bench_stop_server
  grep -q '^result ' "$work/client.out" || { echo "client: $(tail -2 "$work/valgrind.err")" >&2; return 1; }
  grep -q 'upgrades_done=1' "$work/stats.log" || { echo "client stayed on TCP" >&2; return 1; }
  # One line per function: its own (the one naming the library's object),
  # not the lines of its inlined headers, and no source annotation (whose
  # call-site lines would count each function a second time).
  callgrind_annotate --inclusive=yes --threshold=100 --auto=no "$work/cg.out" 2>/dev/null | grep -F 'libvsock.so]' |
    awk '{ gsub(",", "", $1) }
      /vsock::sock::StreamSocket::send\(int, iovec const\*, int, int\)/ { print "send", $1 }
      /vsock::sock::StreamSocket::recv\(int, iovec const\*, int, int\)/ { print "recv", $1 }
      /vsock::sock::StreamSocket::wait\(/ { print "wait", $1 }' >"$out"
}

echo "| build | send: instructions / call | recv: instructions / call | recv without its wait |"
echo "|---|---:|---:|---:|"
for build in "${builds[@]}"; do
  run "$build" "$iters_a" "$work/a" && run "$build" "$iters_b" "$work/b" || { echo "| $build | failed | | |"; continue; }
  awk -v d=$((iters_b - iters_a)) -v b="$build" '
    FNR == NR { a[$1] += $2; next } { v[$1] += $2 }
    END { s = (v["send"] - a["send"]) / d; r = (v["recv"] - a["recv"]) / d; w = (v["wait"] - a["wait"]) / d
      printf "| %s | %.0f | %.0f | %.0f |\n", b, s, r, r - w }' "$work/a" "$work/b"
done
echo
echo "callgrind, client side, VSOCK_PROFILE=$profile; per call = (run of $iters_b - run of $iters_a round trips) / $((iters_b - iters_a)), inclusive Ir of StreamSocket::send / ::recv (one each per round trip)."
