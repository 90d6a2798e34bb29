#!/bin/bash
# run_hostile.sh HOSTILE_TARGET HOSTILE_PEER PRELOAD [MODE...]
#
# Hostile peers on the data path (issue 13, docs/protocol.md section 3). A
# preloaded server (hostile_target server) and a well-behaved preloaded
# client (hostile_target client: an echo exchange checked byte by byte)
# whose connection runs the whole time; meanwhile hostile_peer, which
# upgrades by hand with librdmacm/libibverbs, breaks the stream protocol
# once per mode, each on a connection of its own. For every mode: the
# server is alive, that connection ends as protocol.md says (reset, or the
# documented bound), no byte the peer may not deliver reaches the server's
# application. At the end: the good client's echo was byte-exact over RDMA
# all along, and the server counted the violations (stream_violations).
# hostile_peer writes the token of protocol version 2 (§2, "Who may
# switch") like a real client; its token modes break that rule instead,
# and the server counts those refusals (upgrade_tokens_refused).
source "$(dirname "$0")/upgrade_test_lib.sh"
[ $# -ge 3 ] || { echo "usage: $0 HOSTILE_TARGET HOSTILE_PEER PRELOAD [MODE...]"; exit 2; }
target=$(ut_abs "$1") hostile=$(ut_abs "$2") preload=$(ut_abs "$3")
shift 3
addr=$(ut_address)
[ "$addr" != 127.0.0.1 ] || { echo "SKIPPED: rdma_cm needs a device address (run through with-device.sh)"; exit 77; }

# Violations: the connection is reset at once (server: end=ECONNRESET).
# data-length, data-zero, credit-excess and credit-zero (a position that
# makes no sense, protocol.md §3) end RDMA only and resume on TCP; the
# hostile peer does not follow there, so they end in a reset as well.
reset_modes="data-length data-zero overflow credit-excess credit-zero credit-payload type3 control-zero
  control-unknown closed-first send-long flood-zero oob-end oob-before bad-rkey grow-smaller moved-unasked"
# A message (SEND) that fails its parser after the Switch: the upgrade's
# protocol error, reset with EPROTO (docs/architecture.md, UpgradeState);
# or, when a flood's messages fill the inbox before the application takes
# the first, the channel's violation: ECONNRESET.
message_modes="send-extra flood-send"
# Violations behind a FIN: the server may read the end of stream first,
# then the reset (end=eof then=ECONNRESET), never the data behind it.
fin_modes="data-after-fin second-fin"
# Not violations: bounded (no-credit), absorbed (flood-credit), never
# delivered (write-after-fin); and a peer whose queue pair failed on its
# side only, which resumes on TCP alone (resume-alone): the server must
# notice, resume too and read every byte once.
other_modes="no-credit flood-credit write-after-fin resume-alone"
# The token (§2): the command line on TCP before the Switch, then the token
# right after it (token-after-tcp: no rule broken, 1000 bytes on the ring),
# the token with its last byte changed and 500 bytes (token-wrong), or the
# end of TCP where it should be (token-missing), with 64 'Z' and a FIN on
# the ring. Refused Switches are no violations: the connection goes on on
# TCP, every byte of it (token-wrong: the 16 bytes too, 516 in all; the
# peer prints how many of them are not 'A'), nothing of the ring.
token_modes="token-after-tcp token-wrong token-missing"
modes="${*:-$reset_modes $message_modes $fin_modes $other_modes $token_modes}"

work=$(mktemp -d /tmp/vsock-hostile.XXXXXX) || exit 2
server="" good=""
cleanup() {
  [ -n "$good" ] && kill -0 "$good" 2>/dev/null && kill -KILL "$good"
  [ -n "$server" ] && kill -0 "$server" 2>/dev/null && kill -KILL "$server"
  rm -rf "$work"
}
trap cleanup EXIT
cd /tmp
show() { local f; for f in "$work"/*; do echo "---- $(basename "$f") ----"; tail -n 30 "$f"; done; }

env LD_PRELOAD="$preload" VSOCK_STATS=1 VSOCK_LOG_FILE="$work/server.stats" VSOCK_UPGRADE_TIMEOUT_MS=3000 \
  "$target" server "$addr" --timeout 870 >"$work/server.out" 2>"$work/server.err" &
server=$!
port=$(ut_wait_line "$work/server.out" '^listening [0-9]+' 30 "$server") || { show; ut_fail "server did not start"; }
echo "server (preloaded) on $addr:$port"

# The good client runs until the attacks are over (the stop file); its own
# bound (and the server's) outlast the attacks on a loaded host, where
# they took 400 s (CI, and three guests side by side here), and stay
# within the test's CTest timeout.
env LD_PRELOAD="$preload" VSOCK_STATS=1 VSOCK_LOG_FILE="$work/good.stats" VSOCK_UPGRADE_TIMEOUT_MS=3000 \
  "$target" client "$addr" "$port" "$work/stop" 850 >"$work/good.out" 2>&1 &
good=$!
sleep 1
kill -0 "$good" 2>/dev/null || { show; ut_fail "the good client ended before the attacks"; }

# The per-mode bookkeeping uses bash's builtins only: under TCG each
# program started in the guest costs 0.1-0.2 s, a dozen per mode was a
# minute of the test.
first_line() {  # first_line FILE REGEX: sets `found` to FILE's first line matching REGEX
  local l
  found=""
  while IFS= read -r l; do [[ $l =~ $2 ]] && { found=$l; return 0; }; done <"$1"
  return 1
}
declare -A field
parse_fields() {  # parse_fields LINE: field[key]=value for every key=value word of LINE
  local word
  field=()
  for word in $1; do [[ $word == *=* ]] && field[${word%%=*}]=${word#*=}; done
}
violations=0 refusals=0
for mode in $modes; do
  start=${EPOCHREALTIME/./}
  timeout -k 5 60 "$hostile" "$addr" "$port" "$mode" >"$work/hostile.$mode" 2>&1
  rc=$?
  [ $rc = 77 ] && { cat "$work/hostile.$mode"; exit 77; }
  [ $rc = 0 ] || { show; ut_fail "$mode: hostile_peer exit $rc"; }
  kill -0 "$server" 2>/dev/null || { show; ut_fail "$mode: the server died"; }
  kill -0 "$good" 2>/dev/null || { show; ut_fail "$mode: the good client's connection ended"; }
  line=""
  for ((i = 0; i < 200; i++)); do
    first_line "$work/server.out" "^conn [0-9]+ (read|push) $mode:" && line=$found && break
    sleep 0.1
  done
  [ -n "$line" ] || { show; ut_fail "$mode: the server's connection did not end within 20 s"; }
  ms=$(( (${EPOCHREALTIME/./} - start) / 1000 ))
  parse_fields "${line#*: }"
  bytes=${field[bytes]:-} foreign=${field[foreign]:-} end=${field[end]:-} then=${field[then]:-}
  first_line "$work/hostile.$mode" '^hostile '
  echo "$mode (${ms} ms): server: ${line#*: } | ${found#*:}"
  while IFS= read -r l; do [[ $l == "  "* ]] && echo "    $l"; done <"$work/hostile.$mode"
  expect_foreign=0
  if [ "$mode" = token-wrong ] && first_line "$work/hostile.$mode" 'expect bytes=[0-9]* foreign=([0-9]*)'; then
    [[ $found =~ expect\ bytes=[0-9]*\ foreign=([0-9]*) ]] && expect_foreign=${BASH_REMATCH[1]}
  fi
  [ "$foreign" = "$expect_foreign" ] ||
    { show; ut_fail "$mode: the server's application read $foreign byte(s) that are not 'A' (expected $expect_foreign)"; }
  case " ${reset_modes//$'\n'/ } " in *" $mode "*)
    [ "$end" = ECONNRESET ] || { show; ut_fail "$mode: expected a reset (ECONNRESET), got end=$end then=$then"; }
    violations=$((violations + 1))
    continue ;;
  esac
  case " $message_modes " in *" $mode "*)
    [ "$end" = EPROTO ] || [ "$end" = ECONNRESET ] ||
      { show; ut_fail "$mode: expected a reset (EPROTO or ECONNRESET), got end=$end then=$then"; }
    violations=$((violations + 1))
    continue ;;
  esac
  case " $fin_modes " in *" $mode "*)
    [ "$end" = ECONNRESET ] || [ "$end/$then" = eof/ECONNRESET ] ||
      { show; ut_fail "$mode: expected a reset (after the end of stream at most), got end=$end then=$then"; }
    violations=$((violations + 1))
    continue ;;
  esac
  pushed=${field[pushed]:-} stalled=${field[stalled]:-}
  case $mode in
    no-credit)
      # hostile_peer's ring is 64 KiB: write() takes no more than the
      # credit, then EAGAIN and no POLLOUT, like a full send buffer.
      [ "$stalled" = 1 ] && [ "${pushed:-0}" -gt 0 ] && [ "$pushed" -le 65536 ] ||
        { show; ut_fail "no-credit: expected the server's writes to stall within 64 KiB, got pushed=$pushed stalled=$stalled"; }
      [ "$end" = ECONNRESET ] || { show; ut_fail "no-credit: a peer gone without FIN should read as a reset, got $end"; } ;;
    flood-credit)
      [ "$pushed" = 16384 ] && [ "$stalled" = 0 ] && [ "$end" = eof ] ||
        { show; ut_fail "flood-credit: expected the push to complete and an orderly end, got $line"; } ;;
    resume-alone)
      [ "$bytes" = 1500 ] && [ "$end" = eof ] ||
        { show; ut_fail "resume-alone: expected 1000 ring bytes and 500 TCP bytes, each once, then the end, got $line"; } ;;
    write-after-fin)
      [ "$bytes" = 1000 ] && [ "$end" = eof ] && [ "$then" = eof ] ||
        { show; ut_fail "write-after-fin: expected exactly the 1000 accounted bytes, then the end, got $line"; } ;;
    token-after-tcp)
      [ "$bytes" = 1000 ] && [ "$end" = eof ] ||
        { show; ut_fail "token-after-tcp: expected the 1000 ring bytes after the token, then the end, got $line"; } ;;
    token-wrong)
      refusals=$((refusals + 1))
      [ "$bytes" = 516 ] && [ "$end" = eof ] ||
        { show; ut_fail "token-wrong: expected the 516 TCP bytes (the wrong token too) and the end, none of the ring's, got $line"; } ;;
    token-missing)
      refusals=$((refusals + 1))
      [ "$bytes" = 0 ] && [ "$end" = eof ] ||
        { show; ut_fail "token-missing: expected the end of TCP and nothing of the ring, got $line"; } ;;
  esac
done

touch "$work/stop"
ut_wait_pid "$good" 120 || { show; ut_fail "the good client failed"; }
good=""
echo "$(cat "$work/good.out")"
grep -q verified "$work/good.out" || { show; ut_fail "the good client's echo was not byte-exact"; }
good_rdma=$(ut_stat "$work/good.stats" rdma_bytes_sent)
echo "good client: $(ut_stats "$work/good.stats" rdma_bytes_sent rdma_bytes_received tcp_bytes_sent upgrades_done stream_violations)"
[ "${good_rdma:-0}" -gt 0 ] || { show; ut_fail "the good client's connection did not run on RDMA"; }
line=$(grep -E '^conn [0-9]+ echo good:' "$work/server.out")
echo "server side of it: ${line#*: }"
[ "$(sed -n 's/.* end=\([^ ]*\).*/\1/p' <<<"$line")" = eof ] || ut_fail "the server's echo connection did not end in order"

kill -TERM "$server"
ut_wait_pid "$server" 30 >/dev/null
server=""
counted=$(ut_stat "$work/server.stats" stream_violations)
refused=$(ut_stat "$work/server.stats" upgrade_tokens_refused)
echo "server: $(ut_stats "$work/server.stats" stream_violations upgrade_tokens_refused upgrades_done upgrade_resets \
  rdma_bytes_sent rdma_bytes_received)"
rss=$(grep -o 'rss_kb=[0-9]*' "$work/server.out" | cut -d= -f2 | tr '\n' ' ')
echo "server: rss_kb per connection end: $rss"
# No hostile mode may make the server grow: its resident size at the end
# of every connection stays within 16 MiB of that at the end of the first
# (a connection's rings are 2 MiB each way; no-credit pushed 1 MiB).
rss_first=${rss%% *} rss_max=$(printf '%s\n' $rss | sort -n | tail -n1)
[ $((rss_max - rss_first)) -lt 16384 ] ||
  ut_fail "the server's resident size grew from $rss_first to $rss_max kB over the hostile connections"
grep -c 'protocol violation' "$work/server.stats" | sed 's/^/server log: protocol violation lines: /'
# Exactly: no-credit, flood-credit, write-after-fin and resume-alone
# break no rule.
[ "${counted:-0}" -eq "$violations" ] ||
  { show; ut_fail "the server counted ${counted:-0} violations, $violations hostile connections broke the protocol"; }
# Exactly: every other connection (the good client's too) wrote its token.
[ "${refused:-0}" -eq "$refusals" ] ||
  { show; ut_fail "the server refused ${refused:-0} Switches for their token, $refusals hostile connections sent none"; }
echo "PASS: $violations violating connections reset and counted; $refusals Switches without their token refused and" \
  "counted; no-credit bounded; the good connection byte-exact throughout"
