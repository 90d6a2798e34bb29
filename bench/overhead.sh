#!/usr/bin/env bash
# The pass-through overhead of libvsock: p50 round trip of a 64-byte TCP
# ping-pong on loopback, with the library preloaded / without; and the cost of
# one recv(MSG_DONTWAIT) on an empty TCP socket, with / without.
#
# Usage: bench/overhead.sh [BUILD_DIR]      (default build/default)
#   VSOCK_BENCH_REPEAT (default 31) runs per side of VSOCK_BENCH_ITERS (default
#   5000) round trips each, alternating kernel and libvsock (order flipped every
#   round) so both sides see the same noise; server and client pinned to one
#   CPU (VSOCK_BENCH_LAT_CPUS, default "0 0"). Prints the run.sh table row, the
#   ratio of the median p50s, and the median of the per-round ratios.
set -uo pipefail
export TMPDIR=${TMPDIR:-/tmp}
[ -n "$TMPDIR" ] || export TMPDIR=/tmp
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
raw=$(mktemp /tmp/vsock-overhead.XXXXXX) || exit 1
trap 'rm -f "$raw"' EXIT

VSOCK_BENCH_COLUMNS="kernel libvsock" VSOCK_BENCH_ONLY="tcp-lat:64 tcp-call:0" \
  VSOCK_BENCH_REPEAT=${VSOCK_BENCH_REPEAT:-31} VSOCK_BENCH_ITERS=${VSOCK_BENCH_ITERS:-5000} \
  VSOCK_BENCH_RAW="$raw" bash "$here/run.sh" "$@" 2>/dev/null | grep -E '^\|' || exit 1

# summarize TEST FIELD: raw lines are "COLUMN result test=T ... FIELD=X ...",
# one kernel and one libvsock line per round.
summarize() {
  echo
  echo "== $1, $2"
  grep " test=$1 " "$raw" | awk -v field="$2" '
  { match($0, field "=[0-9.]+"); v = substr($0, RSTART + length(field) + 1, RLENGTH - length(field) - 1) + 0
    if ($1 == "kernel") k[++nk] = v; else if ($1 == "libvsock") l[++nl] = v }
  END {
    n = nk < nl ? nk : nl
    if (n == 0) { print "no results"; exit 1 }
    for (i = 1; i <= n; i++) r[i] = l[i] / k[i]
    printf "rounds: %d\n", n
    printf "kernel   per run: "; for (i = 1; i <= n; i++) printf "%.2f ", k[i]; print ""
    printf "libvsock per run: "; for (i = 1; i <= n; i++) printf "%.2f ", l[i]; print ""
    printf "medians: kernel %.2f, libvsock %.2f, ratio %.3f\n", med(k, n), med(l, n), med(l, n) / med(k, n)
    printf "median of per-round ratios (libvsock / kernel): %.3f\n", med(r, n)
  }
  function med(a, n,   b, i, j, t) {
    for (i = 1; i <= n; i++) b[i] = a[i]
    for (i = 2; i <= n; i++) for (j = i; j > 1 && b[j - 1] > b[j]; j--) { t = b[j]; b[j] = b[j - 1]; b[j - 1] = t }
    return n % 2 ? b[(n + 1) / 2] : (b[n / 2] + b[n / 2 + 1]) / 2
  }'
}
summarize tcp-lat p50_us
summarize tcp-call ns_per_call
