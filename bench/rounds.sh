# Sourced by bench scripts that measure columns in interleaved rounds.
#
# bench_rounds NAME ROUNDS RAW COLUMN...: ROUNDS rounds of `run_one COLUMN`
# (the caller's function; its stdout is the result line) for every column,
# the order flipped every other round so that a host that slows down or
# speeds up weighs on all columns alike. Each result goes into RAW as
# "column=COLUMN LINE"; each round's line also to stderr, as NAME's.
bench_rounds() {
  local name=$1 rounds=$2 raw=$3 round c k line
  shift 3
  local columns=("$@") order
  for ((round = 0; round < rounds; round++)); do
    order=("${columns[@]}")
    if ((round % 2)); then
      order=()
      for ((k = ${#columns[@]} - 1; k >= 0; k--)); do order+=("${columns[k]}"); done
    fi
    for c in "${order[@]}"; do
      line=$(run_one "$c") && echo "column=$c $line" >>"$raw"
      echo "$name: round $((round + 1)) $c: ${line:-FAILED}" >&2
    done
  done
}

# field KEY: the values of KEY=number in the lines on stdin.
field() { sed -n "s/.* $1=\([0-9.-]*\).*/\1/p"; }

# median: of the numbers on stdin ("-" when none).
median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
