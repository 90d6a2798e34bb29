#!/bin/sh
# stream_perf.sh RC_PINGPONG STREAM_PERF [ROUND_TRIPS] [STREAM_MIB]
# Runs the raw verbs ping-pong (rdma_rc_pingpong) and then the same kind of
# measurement through StreamChannel (rdma_stream_perf) in one place — one
# boot of the Soft-RoCE VM under ctest — so the figures compare like with
# like. Figures under emulation mean something only as ratios.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 RC_PINGPONG STREAM_PERF [ROUND_TRIPS] [STREAM_MIB]" >&2; exit 2; }
trips=${3:-1000}
mib=${4:-32}
echo "== raw verbs: rdma_rc_pingpong $trips"
"$1" "$trips"
echo "== StreamChannel: rdma_stream_perf $trips $mib"
"$2" "$trips" "$mib"
