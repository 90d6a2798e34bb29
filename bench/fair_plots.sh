#!/usr/bin/env bash
# The fair table's plots (gnuplot, SVG) from what bench/fair.sh wrote:
#   DEST/fair-latency-cdf.svg  64 B round-trip CDF per column, one panel per
#                              CPU placement with blocking / busy-poll waits
#                              (rows sep-block and one-block)
#   DEST/fair-throughput.svg   streaming MB/s by write size per column (row tput)
#
#   bash bench/fair_plots.sh OUT_DIR DEST_DIR [TITLE_SUFFIX]
set -uo pipefail
out=${1:?usage: fair_plots.sh OUT_DIR DEST_DIR [TITLE_SUFFIX]}
dest=${2:?usage: fair_plots.sh OUT_DIR DEST_DIR [TITLE_SUFFIX]}
suffix=${3:-}
command -v gnuplot >/dev/null || { echo "fair_plots.sh: gnuplot not installed (gnuplot-nox)" >&2; exit 1; }
read -r -a columns <<<"$(sed -n 's/^columns=\(.*\) extra=.*/\1/p' "$out/meta.txt")"
read -r -a extra_columns <<<"$(sed -n 's/.* extra=\(.*\) rows=.*/\1/p' "$out/meta.txt")"
data=$out/plot
mkdir -p "$data" "$dest"

# CDF data: sorted round trips, cumulative fraction
panels=()
for row in sep-block one-block; do
  plots=()
  for c in "${columns[@]}" "${extra_columns[@]}"; do
    f=$out/samples/$row-$c-64.txt
    [ -s "$f" ] || continue
    # at most ~500 points a curve (and the last): the SVG stays small
    sort -g "$f" | awk -v n="$(wc -l <"$f")" 'BEGIN { k = int((n + 499) / 500) } NR % k == 0 || NR == n { print $1, NR / n }' \
      >"$data/cdf-$row-$c.dat"
    plots+=("'$data/cdf-$row-$c.dat' using 1:2 with steps lw 2 title '$c'")
  done
  ((${#plots[@]})) || continue
  case $row in
    sep-block) title="separate vCPUs: sockets blocking read(), verbs busy-poll" ;;
    one-block) title="one vCPU: sockets blocking read(), verbs CQ events (-e)" ;;
  esac
  panels+=("set title '$title'; plot $(IFS=,; echo "${plots[*]}")")
done
if ((${#panels[@]})); then
  {
    echo "set terminal svg size 1100,450 dynamic font 'sans,11'"
    echo "set output '$dest/fair-latency-cdf.svg'"
    echo "set multiplot layout 1,${#panels[@]} title '64 B TCP ping-pong round trip, CDF$suffix'"
    echo "set logscale x; set xlabel 'round trip (µs, log scale)'; set ylabel 'fraction of round trips'"
    echo "set yrange [0:1]; set grid; set key bottom right"
    printf '%s\n' "${panels[@]}"
    echo "unset multiplot"
  } | gnuplot || { echo "fair_plots.sh: gnuplot failed (latency)" >&2; exit 1; }
fi

# throughput by size: median over rounds per column
plots=()
for c in "${columns[@]}"; do
  grep -E "^row=tput col=$c round=[0-9]+ " "$out/raw.txt" |
    awk '{ s = m = ""; for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "size") s = kv[2]; if (kv[1] == "MBps") m = kv[2] }
      if (s != "" && m != "") print s, m }' | sort -k1,1g -k2,2g |
    awk '{ v[$1] = v[$1] " " $2; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
      END { for (i = 1; i <= n; i++) { k = split(substr(v[order[i]], 2), x, " ")
        printf "%s %s\n", order[i], k % 2 ? x[(k + 1) / 2] : (x[k / 2] + x[k / 2 + 1]) / 2 } }' >"$data/tput-$c.dat"
  [ -s "$data/tput-$c.dat" ] || continue
  title=$c
  [ "$c" = verbs ] && title="verbs (ib_write_bw)"
  plots+=("'$data/tput-$c.dat' using 1:2 with linespoints lw 2 pt 7 title '$title'")
done
if ((${#plots[@]})); then
  {
    echo "set terminal svg size 700,450 dynamic font 'sans,11'"
    echo "set output '$dest/fair-throughput.svg'"
    echo "set title 'TCP streaming, separate vCPUs (median of runs)$suffix'"
    echo "set logscale xy; set xlabel 'write size (bytes)'; set ylabel 'MB/s (10^6 B/s, log scale)'"
    echo "set grid; set key bottom right"
    echo "plot $(IFS=,; echo "${plots[*]}")"
  } | gnuplot || { echo "fair_plots.sh: gnuplot failed (throughput)" >&2; exit 1; }
fi
