# bench_stats.sh - sourced by the bench scripts that read the library's
# VSOCK_STATS=1 lines (fork_cost.sh, connection_limits.sh, idle_epoll.sh).
#
#   bench_stats_of LOG NAME...  "NAME=VALUE " for each NAME, summed over every
#                               stats line of LOG (one per process), then
#                               every fallback_* counter that is not 0 (the
#                               reason a connection stayed on TCP)
bench_stats_of() {
  local log=$1
  shift
  awk -v want="$*" '/stats:/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] += kv[2] } }
    END { n = split(want, w, " "); for (i = 1; i <= n; i++) printf "%s=%d ", w[i], v[w[i]]
          for (k in v) if (k ~ /^fallback_/ && v[k] > 0) printf "%s=%d ", k, v[k] }' "$log" 2>/dev/null
}
