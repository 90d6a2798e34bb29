#!/usr/bin/env bash
# Connection set-up cost (issue 10): what one short connection costs —
# socket, connect, one 64 B request, its answer, close — for kernel TCP and
# for libvsock (both ends preloaded), the first connection of a process and
# the later ones, and how many of them went over RDMA. Reported, never
# asserted (docs/performance.md, "Connection set-up").
#
#   bash bench/setup_time.sh [BUILD_DIR]     (default build/default; builds nothing)
#
# Where no verbs device is active it runs itself in the Soft-RoCE VM
# (bench/on_device.sh). Per round and column (interleaved, order flipped
# every round): a fresh `vsock_bench server` and one `vsock_bench client
# --test tcp-conn --iters N` (a fresh process: its first connection is the
# first of a process). Both processes pinned to different vCPUs (server 0,
# client 1). From the client's own VSOCK_STATS=1 line: upgrades_done (of N
# connections) and the share of its request bytes that went over RDMA
# (rdma_bytes_sent against tcp_bytes_sent: a request written before the
# upgrade settled goes on TCP).
#
# Environment:
#   VSOCK_SETUP_CONNS     connections per run (default 100)
#   VSOCK_SETUP_ROUNDS    runs per column (default 3)
#   VSOCK_SETUP_COLUMNS   (default "kernel libvsock"; "libvsock+VAR=VALUE" adds settings;
#                         a path to another build's libvsock.so is a column of that library)
#   VSOCK_UPGRADE_TIMEOUT_MS  for the libvsock column (default 2000: under
#                         emulation a first upgrade can outlast the 200 ms
#                         default, and one that times out caches the peer,
#                         leaving every later connection of the run on TCP)
#   VSOCK_BENCH_ADDR      address (default $RXE_VM_IPADDR, else 127.0.0.1)
set -u
source_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$(cd "${1:-$source_dir/build/default}" 2>/dev/null && pwd) ||
  { echo "setup_time.sh: ${1:-build/default} not found: build first" >&2; exit 1; }
source "$source_dir/bench/on_device.sh"
bench_on_device "$source_dir/bench/setup_time.sh" "$build_dir"
source "$source_dir/bench/rounds.sh"

bench=$build_dir/bench/vsock_bench
libvsock=$build_dir/lib/libvsock.so
[ -x "$bench" ] && [ -f "$libvsock" ] || { echo "setup_time.sh: $bench or $libvsock missing: build first" >&2; exit 1; }
addr=${VSOCK_BENCH_ADDR:-${RXE_VM_IPADDR:-127.0.0.1}}
conns=${VSOCK_SETUP_CONNS:-100}
rounds=${VSOCK_SETUP_ROUNDS:-3}
read -r -a columns <<<"${VSOCK_SETUP_COLUMNS:-kernel libvsock}"
upgrade_ms=${VSOCK_UPGRADE_TIMEOUT_MS:-2000}
work=$(mktemp -d /tmp/vsock-setup.XXXXXX) || exit 1
source "$source_dir/bench/bench_server.sh"
trap 'bench_stop_server; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# column_env COLUMN WHO -> env assignments ("kernel", "libvsock" or the
# path of another build's libvsock.so, with optional "+VAR=VALUE" settings);
# WHO names the process's stats log.
column_env() {
  local name=${1%%+*} extra="" lib=$libvsock
  [[ "$1" == *+* ]] && extra=${1#*+} && extra=${extra//+/ }
  [[ "$name" == /*.so ]] && lib=$name
  case "$name" in
    kernel) echo "LD_PRELOAD= $extra" ;;
    *) echo "LD_PRELOAD=$lib VSOCK_STATS=1 VSOCK_LOG_FILE=$work/$2.log VSOCK_UPGRADE_TIMEOUT_MS=$upgrade_ms $extra" ;;
  esac
}

# One counter, summed over the stats lines of a log (the `timeout` that
# runs the process is preloaded too and prints its own, all zeros).
stat_of() {
  awk -v k="$2" '/stats:/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) n += kv[2] } }
    END { print n + 0 }' "$work/$1.log" 2>/dev/null
}

# run_one COLUMN -> the client's result line with upgraded= and rdma_share=
run_one() {
  local column=$1 line
  : >"$work/server.log"
  : >"$work/client.log"
  # shellcheck disable=SC2046
  bench_start_server "$work/server.out" env $(column_env "$column" server) timeout -k 5 300 "$bench" server \
    --addr "$addr" --port 0 --cpu 0 || { echo "$column: the server did not start" >&2; bench_stop_server; return 1; }
  # shellcheck disable=SC2046
  line=$(env $(column_env "$column" client) timeout -k 5 200 "$bench" client --test tcp-conn --size 64 \
    --addr "$addr" --port "$server_port" --iters "$conns" --seconds 120 --cpu 1 2>>"$work/errors" | grep '^result ')
  bench_stop_server
  [ -n "$line" ] || return 1
  if [ "$column" = kernel ]; then
    echo "$line upgraded=- rdma_share=-"
  else
    local up rdma tcp
    up=$(stat_of client upgrades_done) rdma=$(stat_of client rdma_bytes_sent) tcp=$(stat_of client tcp_bytes_sent)
    echo "$line upgraded=${up:-0} rdma_share=$(awk -v r="${rdma:-0}" -v t="${tcp:-0}" 'BEGIN { printf "%.3f", (r + t) ? r / (r + t) : 0 }')"
  fi
}


# cm_one: one rdma_cm connection between two fresh rdmacm-utils `cmtime`
# processes (server vCPU 0, client vCPU 1), what rdma_cm alone costs a
# program's first connection: the client's µs for resolving the address
# and the route, creating the QP, and connecting (REQ, REP, RTU: the
# server's accept included).
cm_one() {
  local port=$((20000 + RANDOM % 20000)) out=$work/cmtime.out
  timeout -k 5 60 taskset -c 0 cmtime -b "$addr" -p "$port" -c 1 >/dev/null 2>&1 &
  local server=$! tries
  for ((tries = 0; tries < 50; tries++)); do
    timeout -k 5 60 taskset -c 1 cmtime -s "$addr" -p "$port" -c 1 >"$out" 2>&1 && break
    sleep 0.1  # the server's listener is not there yet
  done
  wait "$server"
  awk -F: '{ step = $1; gsub(/ +$/, "", step); split($2, f, " ") }
    step == "resolve addr" || step == "resolve route" || step == "create qp" || step == "connect" { us[step] = f[4] }
    END { if (length(us) == 4) printf "cm_us=%.1f cm_connect_us=%.1f\n",
            us["resolve addr"] + us["resolve route"] + us["create qp"] + us["connect"], us["connect"] }' "$out"
}

raw=$work/raw.txt
bench_rounds setup_time.sh "$rounds" "$raw" "${columns[@]}"
cm_raw=$work/cm.txt
if command -v cmtime >/dev/null; then
  for ((round = 0; round < rounds; round++)); do
    line=$(cm_one) && echo "$line" >>"$cm_raw"
    echo "setup_time.sh: round $((round + 1)) rdma_cm (cmtime): ${line:-FAILED}" >&2
  done
fi

kernel_p50=$(grep '^column=kernel ' "$raw" | field p50_us | median)
kernel_first=$(grep '^column=kernel ' "$raw" | field first_us | median)
echo
echo "| column | first connection µs | later: p50 µs | p99 µs | p50 / kernel | first / kernel | upgraded / connections | request bytes over RDMA | later p50 µs: connect / exchange / close |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for c in "${columns[@]}"; do
  rows=$(grep "^column=$c " "$raw")
  [ -n "$rows" ] || { echo "| $c | failed | | | | | | | |"; continue; }
  first=$(field first_us <<<"$rows" | median) p50=$(field p50_us <<<"$rows" | median) p99=$(field p99_us <<<"$rows" | median)
  up=$(field upgraded <<<"$rows" | median) share=$(field rdma_share <<<"$rows" | median)
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0 && a != "-") printf "%.2f", a / b; else print "-" }'; }
  parts="$(field connect_p50_us <<<"$rows" | median) / $(field exchange_p50_us <<<"$rows" | median) / $(field close_p50_us <<<"$rows" | median)"
  echo "| $c | $first | $p50 | $p99 | $(ratio "$p50" "$kernel_p50") | $(ratio "$first" "$kernel_first") | ${up:--} / $conns | ${share:--} | $parts |"
done
echo
echo "$conns connections per run (socket, connect, 64 B request and answer, close; one after the other), medians of $rounds" \
  "runs per column, each a fresh server (vCPU 0) and client (vCPU 1) at $addr; libvsock: both ends preloaded," \
  "VSOCK_UPGRADE_TIMEOUT_MS=$upgrade_ms. upgraded: the client's upgrades_done; request bytes over RDMA: the client's" \
  "rdma_bytes_sent / (rdma_bytes_sent + tcp_bytes_sent), the Hello and the request of every connection." \
  "connect / exchange / close: medians of the runs' p50 of each part of a later connection (socket() to the Hello" \
  "written, the request and its answer, close())."
if [ -s "$cm_raw" ]; then
  cm=$(sed 's/^/x /' "$cm_raw" | field cm_us | median) cm_connect=$(sed 's/^/x /' "$cm_raw" | field cm_connect_us | median)
  echo
  echo "rdma_cm alone (rdmacm-utils cmtime, one connection between fresh processes, server vCPU 0, client vCPU 1," \
    "median of $rounds): $cm µs to resolve the address and the route, create the QP and connect; the connect" \
    "(REQ, REP, RTU) $cm_connect µs. Issue 10's first-connection target, first ≤ 2 × kernel first + one rdma_cm" \
    "connection ($(awk -v k="$kernel_first" -v c="$cm" 'BEGIN { printf "%.1f", 2 * k + c }') µs here):"
  for c in "${columns[@]}"; do
    [ "$c" = kernel ] && continue
    first=$(grep "^column=$c " "$raw" | field first_us | median)
    echo "$c first / target: $(awk -v f="$first" -v k="$kernel_first" -v c="$cm" \
      'BEGIN { if (f != "-" && 2 * k + c > 0) printf "%.2f", f / (2 * k + c); else print "-" }')"
  done
fi
[ -s "$work/errors" ] && { echo; echo "errors:"; sort "$work/errors" | uniq -c | sort -rn | head -n 5; }
exit 0
