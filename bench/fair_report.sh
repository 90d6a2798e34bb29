#!/usr/bin/env bash
# The fair table (markdown) from what bench/fair.sh wrote; computes every
# figure from that run's raw results, hard-codes none.
#
#   bash bench/fair_report.sh OUT_DIR [COMMIT]
#
# Latency cells come from every round trip of every round pooled
# (OUT_DIR/samples/ROW-COLUMN-SIZE.txt): p50 / p99 / p99.9; "rounds" gives
# the spread, the lowest and highest per-run p50. Throughput cells: the
# median over rounds (lowest–highest). Per-message costs (64 B rows), over
# both ends, messages = 2 per round trip:
#   socket columns: perf counts of the measured phases only (client per run,
#     server summed over the row's runs) / the messages of those runs;
#   verbs: system calls only, (each run's whole-run count - a 100 round-trip
#     run's) / (its messages - 200), summed over the rounds. perftest cannot
#     be told where its measured phase starts, and its set-up (device open,
#     registrations: seconds of CPU under TCG, a varying number of sleeps)
#     swamps a difference of CPU time or context switches (tried: negative
#     results); its system calls in set-up are the same from run to run.
# Ratios are the issue's (12, item 1), with each round's p50 ratio beside
# the latency ones (the host's load comes in phases: a round whose two runs
# both met a quiet host and one where both did not differ by 100x); where
# issue 3 set a figure
# (latency <= 1.2x verbs, throughput >= 0.8x verbs), it is marked ✓ / ✗.
set -uo pipefail
out=${1:?usage: fair_report.sh OUT_DIR [COMMIT]}
commit=${2:-unknown}
raw=$out/raw.txt
[ -s "$raw" ] || { echo "fair_report.sh: $raw missing or empty" >&2; exit 1; }
meta() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" "$out/meta.txt" | head -1; }
read -r -a columns <<<"$(sed -n 's/^columns=\(.*\) extra=.*/\1/p' "$out/meta.txt")"
read -r -a extra_columns <<<"$(sed -n 's/.* extra=\(.*\) rows=.*/\1/p' "$out/meta.txt")"
read -r -a rows <<<"$(sed -n 's/.* rows=\(.*\) rounds=.*/\1/p' "$out/meta.txt")"

# lines ROW COL SIZE -> the run lines of a cell
lines() { grep -E "^row=$1 col=$2 round=[0-9]+ .* size=$3 " "$raw"; }
field() { sed -n "s/.* $1=\([-0-9.]*\).*/\1/p"; }
wait_of() { lines "$1" "$2" "$3" | field_word wait | head -1; }
field_word() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }

# pct FILE Q -> the Q quantile of the pooled samples (as vsock_bench: index floor(Q n))
pct() {
  sort -g "$1" | awk -v q="$2" '{ v[NR - 1] = $1 } END { if (NR == 0) { print "-"; exit }
    i = int(q * NR); if (i > NR - 1) i = NR - 1; printf "%.0f", v[i] }'
}
lat_cell() {  # ROW COL SIZE -> "p50 / p99 / p99.9" or failed / -
  local f=$out/samples/$1-$2-$3.txt
  if [ -s "$f" ]; then echo "$(pct "$f" 0.5) / $(pct "$f" 0.99) / $(pct "$f" 0.999)"
  elif grep -qE "^row=$1 col=$2 .*FAILED test=[a-z]+-lat size=$3:" "$raw"; then echo "failed"
  else echo "-"; fi
}
p50() { local f=$out/samples/$1-$2-$3.txt; [ -s "$f" ] && pct "$f" 0.5 || echo "-"; }
p99() { local f=$out/samples/$1-$2-$3.txt; [ -s "$f" ] && pct "$f" 0.99 || echo "-"; }
spread() {  # ROW COL SIZE -> "lo–hi" of the per-run p50s, with the run count
  lines "$1" "$2" "$3" | field p50_us | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.0f–%.0f (%d)", v[1], v[NR], NR; else print "-" }'
}
nsamples() { local f=$out/samples/$1-$2-$3.txt; [ -s "$f" ] && wc -l <"$f" || echo 0; }

# cost ROW COL KIND(sys|cs|cpu) -> per message (cpu: CPU s per 1M messages)
cost() {
  local row=$1 col=$2 kind=$3
  if [ "$col" = verbs ]; then
    [ "$kind" = sys ] || { echo "n/m"; return; }
    local base
    base=$(grep -E "^row=$row col=verbs round=base " "$raw" | head -1)
    [ -n "$base" ] || { echo "-"; return; }
    { echo "$base"; lines "$row" verbs 64; } | awk -v k="$kind" '
      { m = sys = cs = ms = ""
        for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "msgs") m = kv[2]; if (kv[1] == "w_sys") sys = kv[2]
          if (kv[1] == "w_cs") cs = kv[2]; if (kv[1] == "w_ms") ms = kv[2] }
        v = k == "sys" ? sys : k == "cs" ? cs : ms
        if (NR == 1) { bm = m; bv = v; next }
        if (v == "" || bv == "") next
        dm += m - bm; dv += v - bv }
      END { if (dm <= 0 || dv < 0) { print "-"; exit }
        if (k == "cpu") printf "%.0f", dv / dm * 1000; else printf "%.2f", dv / dm }'
    return
  fi
  local server
  server=$(grep -E "^row=$row col=$col round=server " "$raw" | head -1)
  { echo "server $server"; lines "$row" "$col" 64; } | awk -v k="$kind" '
    { c_sys = c_cs = c_ms = s_sys = s_cs = s_ms = m = cpu = pcpu = cs = pcs = ""
      for (i = 1; i <= NF; i++) { split($i, kv, "="); x[kv[1]] = kv[2] }
      if ($1 == "server") { ss = x["s_sys"]; scs = x["s_cs"]; sms = x["s_ms"]; delete x; next }
      n++; msgs += x["msgs"]
      if (x["c_sys"] != "") { csys += x["c_sys"]; ccs += x["c_cs"]; cms += x["c_ms"]; counted++ }
      rcpu += x["cpu_s"] + x["peer_cpu_s"]; rcs += x["ctxsw"] + x["peer_ctxsw"]
      delete x }
    END { if (msgs <= 0) { print "-"; exit }
      perf = counted == n && ss != ""
      if (k == "sys") { if (perf) printf "%.2f", (csys + ss) / msgs; else print "-" }
      else if (k == "cs") printf "%.2f", perf ? (ccs + scs) / msgs : rcs / msgs
      else printf "%.0f", perf ? (cms + sms) / msgs * 1000 : rcpu / msgs * 1e6 }'
}

# per_round ROW COL_A COL_B SIZE -> "r1, r2, ..." : each round's p50 ratio
# (the two columns' runs of one round are next to each other in time, so
# they share the host's load more than the pooled figures do)
per_round() {
  { lines "$1" "$2" "$4" | sed 's/^/A /'; lines "$1" "$3" "$4" | sed 's/^/B /'; } | awk '
    { r = p = ""; for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "round") r = kv[2]; if (kv[1] == "p50_us") p = kv[2] }
      if (r != "" && p != "") { v[$1, r] = p; rounds[r] = 1 } }
    END { n = 0; for (r in rounds) n++
      out = ""; for (r = 1; r <= n; r++) if ((("A", r) in v) && (("B", r) in v) && v["B", r] > 0)
        out = out (out == "" ? "" : ", ") sprintf("%.2f", v["A", r] / v["B", r])
      print (out == "" ? "-" : out) }'
}
ratio() {  # A B -> A / B with 2 decimals, or "-"
  awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'
}
mark() {  # RATIO TARGET(<=x | >=x | "") -> "RATIO ✓/✗"
  [ -n "$2" ] && [ "$1" != "-" ] || { echo "$1"; return; }
  awk -v r="$1" -v t="$2" 'BEGIN { v = substr(t, 3) + 0; ok = substr(t, 1, 2) == "<=" ? r + 0 <= v : r + 0 >= v
    printf "%s %s", r, ok ? "✓" : "✗" }'
}
human() { local s=$1; if ((s >= 1048576)); then echo "$((s / 1048576)) MiB"; elif ((s >= 1024)); then echo "$((s / 1024)) KiB"; else echo "$s B"; fi; }
where() {
  case "$1" in
    sep-*) echo "separate vCPUs (server 0, client 1)" ;;
    one-*) echo "one vCPU (both 0)" ;;
    tput | udp-*) echo "separate vCPUs (server 0, client 1)" ;;
  esac
}
wait_label() {  # ROW COL -> how that column waits in that row
  local w
  w=$(grep -E "^row=$1 col=$2 round=[0-9]+ " "$raw" | field_word wait | head -1)
  case "$w" in
    block) echo "blocking read()" ;;
    epoll) echo "epoll_wait() then read()" ;;
    poll) echo "poll() then read()" ;;
    busy-poll) [[ "$1" = udp-* ]] && echo "busy-poll (ib_send_lat -c UD)" || echo "busy-poll (ib_send_lat)" ;;
    cq-events) echo "CQ events (ib_send_lat -e)" ;;
    *) echo "-" ;;
  esac
}
has() { [[ " ${columns[*]} " == *" $1 "* ]]; }
has_row() { [[ " ${rows[*]} " == *" $1 "* ]]; }

echo "Measured at commit \`$commit\`, $(meta date), in the Soft-RoCE guest ($(meta nproc) vCPUs, device $(meta dev), $(meta addr));" \
  "guest load average at start $(sed -n 's/.* load=\([^ ]*\) \([^ ]*\) \([^ ]*\).*/\1 \2 \3/p' "$out/meta.txt"); libvsock profile: $(meta profile);" \
  "$(meta rounds) rounds at 64 B, $(meta size_rounds) at larger sizes and for throughput, columns interleaved (order flipped every round); up to $(meta iters) round trips per latency run after up to $(meta warmup) warm-up, each run bounded to $(meta seconds) s; fair.sh took $(meta total_s) s."
if has_row sep-block || has_row one-block || has_row sep-epoll || has_row one-epoll; then
echo
echo "### 64 B ping-pong: latency and what each message costs"
echo
echo "| CPU placement | column: wait style | p50 / p99 / p99.9 (µs) | run p50s: low–high (runs) | round trips | CPU s / 1M msgs | syscalls / msg | ctx switches / msg |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for row in sep-block one-block sep-epoll one-epoll; do
  has_row "$row" || continue
  for c in "${columns[@]}" "${extra_columns[@]}"; do
    grep -qE "^row=$row col=$c " "$raw" || continue  # not run in this row
    echo "| $(where "$row") | $c: $(wait_label "$row" "$c") | $(lat_cell "$row" "$c" 64) | $(spread "$row" "$c" 64) | $(nsamples "$row" "$c" 64) |" \
      "$(cost "$row" "$c" cpu) | $(cost "$row" "$c" sys) | $(cost "$row" "$c" cs) |"
  done
done
echo
echo "Per message = both ends together, a round trip being two messages. Socket columns: perf stat over the measured phase only" \
  "(raw_syscalls:sys_enter, context-switches, task-clock; the client's counts and every server thread's); verbs: perftest's" \
  "whole-run system calls minus those of a 100-round-trip run of the same row (its CPU time and context switches are not measurable" \
  "that way: n/m, see bench/fair_report.sh). \`-\`: not counted (no perf, or a run not counted)."
fi

if has_row sep-block; then
  read -r -a sizes <<<"$(grep -E '^row=sep-block ' "$raw" | field size | sort -gu | tr '\n' ' ')"
  echo
  echo "### Latency by size: separate vCPUs (server 0, client 1); sockets blocking read(), verbs busy-polling ib_send_lat"
  echo
  header="| size |" rule="|---:|"
  for c in "${columns[@]}"; do header+=" $c p50 / p99 / p99.9 (µs) |"; rule+="---:|"; done
  if has libvsock && has verbs; then header+=" libvsock / verbs p50 |"; rule+="---:|"; fi
  echo "$header"
  echo "$rule"
  for s in "${sizes[@]}"; do
    line="| $(human "$s") |"
    for c in "${columns[@]}"; do line+=" $(lat_cell sep-block "$c" "$s") |"; done
    if has libvsock && has verbs; then line+=" $(ratio "$(p50 sep-block libvsock "$s")" "$(p50 sep-block verbs "$s")") |"; fi
    echo "$line"
  done
fi

tput_cell() {  # COL SIZE -> "median (lo–hi)"
  lines tput "$1" "$2" | field MBps | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "failed"; exit }
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; if (NR > 1) printf "%.1f (%.1f–%.1f)", m, v[1], v[NR]; else printf "%.1f", m }'
}
tput_median() { tput_cell "$1" "$2" | awk '{ print ($1 == "failed" ? "-" : $1) }'; }
if has_row tput; then
  read -r -a sizes <<<"$(grep -E '^row=tput ' "$raw" | field size | sort -gu | tr '\n' ' ')"
  echo
  echo "### Throughput (MB/s): separate vCPUs (server 0, client 1); sockets blocking write() streaming, verbs ib_write_bw"
  echo
  header="| size |" rule="|---:|"
  for c in "${columns[@]}"; do header+=" $c |"; rule+="---:|"; done
  if has libvsock && has verbs; then header+=" libvsock / ib_write_bw |"; rule+="---:|"; fi
  echo "$header"
  echo "$rule"
  for s in "${sizes[@]}"; do
    line="| $(human "$s") |"
    for c in "${columns[@]}"; do line+=" $(tput_cell "$c" "$s") |"; done
    if has libvsock && has verbs; then line+=" $(ratio "$(tput_median libvsock "$s")" "$(tput_median verbs "$s")") |"; fi
    echo "$line"
  done
  echo
  echo "Median of the runs (lowest–highest); MB = 10^6 bytes; ib_write_bw's MiB/s converted."
fi

# ---- UDP (rows udp-lat, udp-rate) ----
rate_cell() {  # COL FIELD -> "median (lo–hi)" of FIELD over the runs, in millions
  lines udp-rate "$1" 64 | field "$2" | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit }
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; if (NR > 1) printf "%.3f (%.3f–%.3f)", m, v[1], v[NR]; else printf "%.3f", m }'
}
rate_median() { rate_cell "$1" "$2" | awk '{ print $1 }'; }
if has_row udp-lat || has_row udp-rate || has_row mcast-lat; then
  echo
  echo "### UDP: separate vCPUs (server 0, client 1), every column pinned with the same taskset / sched_setaffinity"
  echo
fi
if has_row udp-lat; then
  echo "64 B UDP ping-pong (kernel and libvsock: vsock_bench udp-lat on a connected socket against the server's UDP thread," \
    "both waiting in poll() then recv()/recvfrom(); verbs: ib_send_lat -c UD, busy-polling):"
  echo
  echo "| column: wait style | p50 / p99 / p99.9 (µs) | run p50s: low–high (runs) | round trips |"
  echo "|---|---:|---:|---:|"
  for c in "${columns[@]}" "${extra_columns[@]}"; do
    grep -qE "^row=udp-lat col=$c " "$raw" || continue
    w=$(wait_label udp-lat "$c")
    [ "$c" = verbs ] || w="poll() then recv()"
    [ "$c" = libvsock:latency ] && w="poll() then recv(), latency profile (2 ms spin)"
    echo "| $c: $w | $(lat_cell udp-lat "$c" 64) | $(spread udp-lat "$c" 64) | $(nsamples udp-lat "$c" 64) |"
  done
  echo
fi
if has_row udp-rate; then
  echo "64 B message rate (kernel and libvsock: vsock_bench udp-rate, sendmmsg() of 32 datagrams per call on a connected" \
    "socket into a recvmmsg() sink (64 per call); verbs: ib_send_bw -c UD), millions of datagrams per second, median of the runs" \
    "(lowest–highest):"
  echo
  echo "| column | sent (M/s) | received (M/s) | lost (%) |"
  echo "|---|---:|---:|---:|"
  for c in "${columns[@]}"; do
    grep -qE "^row=udp-rate col=$c " "$raw" || continue
    if [ "$c" = verbs ]; then
      echo "| verbs: ib_send_bw -c UD | - | $(rate_cell verbs recv_mps) | - |"
    else
      echo "| $c | $(rate_cell "$c" send_mps) | $(rate_cell "$c" recv_mps) | $(rate_cell "$c" loss_pct) |"
    fi
  done
  echo
  echo "A sender faster than its receiver loses datagrams, on the kernel as over UD (no flow control: what overflows the"
  echo "receiver's SO_RCVBUF or receive queue is dropped); the received rate is the figure to compare."
  echo
fi
if has_row mcast-lat; then
  echo "64 B multicast, one to two (vsock_bench mcast-lat: the client on vCPU 1 sends to a group and waits for the unicast" \
    "answers of both receivers, two mcast-echo processes on vCPU 0; everyone waits in poll() then recv(); the libvsock" \
    "columns offload the group): the time until both answered. No verbs column: perftest has no one-to-many latency."
  echo
  echo "| column: wait style | p50 / p99 / p99.9 (µs) | run p50s: low–high (runs) | round trips |"
  echo "|---|---:|---:|---:|"
  for c in "${columns[@]}" "${extra_columns[@]}"; do
    grep -qE "^row=mcast-lat col=$c " "$raw" || continue
    w="poll() then recv()"
    [ "$c" = libvsock:latency ] && w="poll() then recv(), latency profile (2 ms spin)"
    echo "| $c: $w | $(lat_cell mcast-lat "$c" 64) | $(spread mcast-lat "$c" 64) | $(nsamples mcast-lat "$c" 64) |"
  done
  echo
fi
echo
echo "### The issue's ratios, from this run"
echo
echo "| ratio | placement, wait | libvsock | other | ratio | per round (p50s) | issue 3 target |"
echo "|---|---|---:|---:|---:|---:|---|"
if has libvsock && has verbs && has_row sep-block; then
  for l in libvsock "${extra_columns[@]}"; do
    [[ "$l" == libvsock* ]] || continue
    a=$(p50 sep-block "$l" 64) b=$(p50 sep-block verbs 64)
    echo "| $l / verbs, p50 64 B | separate vCPUs; blocking read() vs busy-poll | $a µs | $b µs | $(mark "$(ratio "$a" "$b")" "<=1.2") | $(per_round sep-block "$l" verbs 64) | ≤ 1.2 |"
    a=$(p99 sep-block "$l" 64) b=$(p99 sep-block verbs 64)
    echo "| $l / verbs, p99 64 B | separate vCPUs; blocking read() vs busy-poll | $a µs | $b µs | $(ratio "$a" "$b") | | |"
  done
fi
if has libvsock && has kernel && has_row one-block; then
  for l in "${extra_columns[@]}"; do
    [[ "$l" == libvsock* ]] || continue
    a=$(p50 one-block "$l" 64) b=$(p50 one-block kernel 64)
    echo "| $l / kernel TCP, p50 64 B | one vCPU; blocking read() both | $a µs | $b µs | $(ratio "$a" "$b") | $(per_round one-block "$l" kernel 64) | |"
  done
  a=$(p50 one-block libvsock 64) b=$(p50 one-block kernel 64)
  echo "| libvsock / kernel TCP, p50 64 B | one vCPU; blocking read() both | $a µs | $b µs | $(ratio "$a" "$b") | $(per_round one-block libvsock kernel 64) | |"
  if has verbs; then
    b=$(p50 one-block verbs 64)
    echo "| libvsock / verbs (ib_send_lat -e), p50 64 B | one vCPU; blocking read() vs CQ events | $a µs | $b µs | $(ratio "$a" "$b") | $(per_round one-block libvsock verbs 64) | |"
  fi
fi
for row in sep-block one-block sep-epoll one-epoll; do
  has_row "$row" && has libvsock || continue
  for other in verbs kernel; do
    has "$other" || continue
    a=$(cost "$row" libvsock sys) b=$(cost "$row" "$other" sys)
    echo "| syscalls / msg, libvsock / $other | $(where "$row"); $(wait_label "$row" libvsock) vs $(wait_label "$row" "$other") | $a | $b | $(ratio "$a" "$b") | | |"
  done
done
if has libvsock && has verbs && has_row tput; then
  for s in $(grep -E '^row=tput ' "$raw" | field size | sort -gu); do
    ((s >= 65536)) || continue
    a=$(tput_median libvsock "$s") b=$(tput_median verbs "$s")
    echo "| libvsock / ib_write_bw, $(human "$s") | separate vCPUs; blocking write() | $a MB/s | $b MB/s | $(mark "$(ratio "$a" "$b")" ">=0.8") | | ≥ 0.8 |"
  done
fi
if has libvsock && has verbs && has_row udp-lat; then
  for l in libvsock "${extra_columns[@]}"; do
    [[ "$l" == libvsock* ]] && grep -qE "^row=udp-lat col=$l " "$raw" || continue
    how="poll() vs busy-poll"
    [ "$l" = libvsock:latency ] && how="poll() spinning (latency profile) vs busy-poll"
    a=$(p50 udp-lat "$l" 64) b=$(p50 udp-lat verbs 64)
    echo "| $l / raw UD verbs, UDP p50 64 B | separate vCPUs; $how | $a µs | $b µs | $(mark "$(ratio "$a" "$b")" "<=1.2") | $(per_round udp-lat "$l" verbs 64) | ≤ 1.2 (issue 11) |"
    a=$(p99 udp-lat "$l" 64) b=$(p99 udp-lat verbs 64)
    echo "| $l / raw UD verbs, UDP p99 64 B | separate vCPUs; $how | $a µs | $b µs | $(ratio "$a" "$b") | | |"
  done
fi
if has libvsock && has kernel && has_row udp-lat; then
  a=$(p50 udp-lat libvsock 64) b=$(p50 udp-lat kernel 64)
  echo "| libvsock / kernel UDP, p50 64 B | separate vCPUs; poll() both | $a µs | $b µs | $(ratio "$a" "$b") | $(per_round udp-lat libvsock kernel 64) | |"
fi
if has libvsock && has kernel && has_row mcast-lat; then
  for l in libvsock "${extra_columns[@]}"; do
    [[ "$l" == libvsock* ]] && grep -qE "^row=mcast-lat col=$l " "$raw" || continue
    a=$(p50 mcast-lat "$l" 64) b=$(p50 mcast-lat kernel 64)
    echo "| $l / kernel UDP, multicast one-to-two p50 64 B | receivers on vCPU 0, sender on 1; poll() all | $a µs | $b µs | $(ratio "$a" "$b") | $(per_round mcast-lat "$l" kernel 64) | |"
  done
fi
if has libvsock && has kernel && has_row udp-rate; then
  a=$(rate_median libvsock recv_mps) b=$(rate_median kernel recv_mps)
  echo "| libvsock / kernel UDP, received datagrams/s, sendmmsg 64 B | separate vCPUs | $a M/s | $b M/s | $(mark "$(ratio "$a" "$b")" ">=2") | | ≥ 2 (issue 11) |"
fi
if has libvsock && has rsocket; then
  for row in sep-block one-block sep-epoll one-epoll; do
    has_row "$row" || continue
    a=$(cost "$row" libvsock cpu) b=$(cost "$row" rsocket cpu)
    echo "| CPU s / 1M msgs, libvsock / rsocket | $(where "$row"); $(wait_label "$row" libvsock) vs $(wait_label "$row" rsocket) | $a | $b | $(ratio "$a" "$b") | | |"
  done
fi

echo
summary="Path check (TCP segments / RDMA packets sent while the column ran, all rows):"
for c in "${columns[@]}"; do
  summary+=" $c $(grep -E "^row=[^ ]+ col=$c round=[0-9]+ " "$raw" | awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "=")
    if (kv[1] == "tcp_segs") t += kv[2]; if (kv[1] == "rdma_pkts") r += kv[2] } } END { printf "%d / %d", t, r }');"
done
echo "${summary%;}."
if grep -q ' FAILED ' "$raw"; then
  echo
  echo "Failed runs:"
  grep ' FAILED ' "$raw" | sed 's/^row=\([^ ]*\) col=\([^ ]*\) round=\([^ ]*\) FAILED /- \1, \2, round \3: /'
fi
exit 0
