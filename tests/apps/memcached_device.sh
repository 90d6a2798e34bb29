#!/usr/bin/env bash
# memcached with libmemcached's load generators over the verbs device, both
# ends under libvsock: memcslap's set test, then its get test (which loads
# its keys first), each with VSOCK_APP_CONNECTIONS (default 10) threads of
# one connection and VSOCK_APP_REQUESTS (default 300) requests each; then
# memaslap (Debian: memcaslap), 2 threads driving 16 connections on libevent,
# 90% gets and 10% sets of 1 KiB values, 10% of them verified. memcached
# runs 2 worker threads on libevent (epoll). ctest runs it in the Soft-RoCE
# VM through tests/rxe/with-device.sh and tests/upgrade/on_device_address.sh.
#
# Passes when every run exits 0 and reports its time, memaslap saw no miss and
# no failed verification, memcached counted every set and every get as a hit
# (memcstat, run without the library), it exits 0 on SIGTERM, and the server
# and the clients upgraded every connection and moved at least 90% of
# memcached's own byte counts (bytes_read / bytes_written) over RDMA, both
# ways. Then the same against a memcached without the library; both figures
# (keys or operations per second) are printed as MEASURED lines.
source "$(dirname "$0")/app_test_lib.sh"
app_require memcached memcstat memcslap
aslap=memcaslap
command -v memaslap >/dev/null 2>&1 && aslap=memaslap
app_require "$aslap"
app_init memcached-device
app_device_init
threads=${VSOCK_APP_CONNECTIONS:-10}
requests=${VSOCK_APP_REQUESTS:-300}
aslap_conns=16 aslap_ops=4000
declare -A FIG=()

user_args=()
[ "$(id -u)" -eq 0 ] && user_args=(-u root) # memcached refuses root without -u

# mc_stat PORT NAME: one memcstat counter, without the library (not measured).
mc_stat() {
  env -u LD_PRELOAD timeout 30 memcstat --servers="$APP_ADDR:$1" | sed -n "s/^[[:space:]]*$2: *\([0-9]*\)$/\1/p"
}

# slap MODE PORT TEST: one memcslap run; FIG[MODE:TEST] = keys per second.
slap() {
  local mode=$1 port=$2 test=$3 out keys secs
  out=$APP_WORK/slap-$test-$mode.out
  app_preloaded "$APP_WORK/clients-$mode.log" memcslap --servers="$APP_ADDR:$port" --concurrency="$threads" \
    --execute-number="$requests" --test="$test" >"$out" || app_fail "memcslap --test=$test ($mode) failed"
  # "Time to get            3000 keys by   10 threads:     0.410 seconds."
  read -r keys secs <<<"$(sed -n "s/^Time to $test *\([0-9]*\) keys by .*: *\([0-9.]*\) seconds\.$/\1 \2/p" "$out")"
  [ "${keys:-0}" -eq $((threads * requests)) ] || app_fail "memcslap --test=$test ($mode): no result for $((threads * requests)) keys"
  FIG[$mode:$test]=$(awk -v k="$keys" -v s="$secs" 'BEGIN { printf "%.0f", (s > 0 ? k / s : 0) }')
  app_log "$test ($mode): $keys keys by $threads threads in $secs s, ${FIG[$mode:$test]} keys/s"
}

# aslap MODE PORT: one memaslap run; FIG[MODE:aslap] = operations per second;
# ASLAP_OPS = operations done.
aslap() {
  local mode=$1 port=$2 out field
  out=$APP_WORK/aslap-$mode.out
  app_preloaded "$APP_WORK/clients-$mode.log" "$aslap" -s "$APP_ADDR:$port" -T 2 -c "$aslap_conns" -x "$aslap_ops" \
    -X 1024 -v 0.1 >"$out" || app_fail "$aslap ($mode) failed"
  for field in get_misses verify_misses verify_failed; do
    grep -Eq "^$field: 0$" "$out" || app_fail "$aslap ($mode): $(grep "^$field:" "$out" || echo "no $field line")"
  done
  # "Run time: 0.1s Ops: 4992 TPS: 51292 Net_rate: 57.4M/s"
  read -r ASLAP_OPS tps <<<"$(sed -n 's/^Run time: .* Ops: \([0-9]*\) TPS: \([0-9]*\) .*/\1 \2/p' "$out")"
  [ "${ASLAP_OPS:-0}" -gt $((aslap_ops * 9 / 10)) ] || app_fail "$aslap ($mode): ${ASLAP_OPS:-no} operations done"
  FIG[$mode:aslap]=$tps
  app_log "$aslap ($mode): $ASLAP_OPS operations over $aslap_conns connections, $tps ops/s"
}

for mode in libvsock kernel; do
  if [ "$mode" = libvsock ]; then app_library on; else app_library off; fi
  app_start_server "memcached-$mode" tcp memcached "${user_args[@]}" -l "$APP_ADDR" -p @PORT@ -U 0 -t 2 -m 64
  port=$APP_PORT server=$APP_PID
  slap "$mode" "$port" set
  slap "$mode" "$port" get
  gets=$(mc_stat "$port" cmd_get) sets=$(mc_stat "$port" cmd_set)
  aslap "$mode" "$port"
  # memcslap's get test first loads its $requests keys with sets.
  [ "${gets:-0}" -eq $((threads * requests)) ] && [ "${sets:-0}" -eq $((threads * requests + requests)) ] ||
    app_fail "memcached ($mode) counted ${gets:-no} gets and ${sets:-no} sets after memcslap," \
      "expected $((threads * requests)) and $((threads * requests + requests))"
  ops=$(($(mc_stat "$port" cmd_get) + $(mc_stat "$port" cmd_set) - gets - sets))
  [ "$ops" -eq "$ASLAP_OPS" ] || app_fail "memcached ($mode) counted $ops operations of $aslap, it reported $ASLAP_OPS"
  hits=$(mc_stat "$port" get_hits) misses=$(mc_stat "$port" get_misses)
  [ "${misses:-1}" -eq 0 ] || app_fail "memcached ($mode): ${misses:-no} get misses, $hits hits"
  in_bytes=$(mc_stat "$port" bytes_read) out_bytes=$(mc_stat "$port" bytes_written) conns=$(mc_stat "$port" total_connections)
  app_log "memcached ($mode): $sets sets, $hits hits, $conns connections, $in_bytes bytes in, $out_bytes bytes out"
  app_stop_pid "$server" TERM 15
  [ "$APP_STOP_STATUS" -eq 0 ] || app_fail "memcached ($mode) exited with status $APP_STOP_STATUS"
  if [ "$mode" = libvsock ]; then
    # memcslap: one connection per thread per run, and the get run's loading
    # one; memaslap: one per concurrency.
    upgrades=$((2 * threads + 1 + aslap_conns))
    app_expect_rdma "$APP_WORK/memcached-libvsock.log" memcached "$upgrades" received $((in_bytes / 10 * 9))
    app_expect_rdma "$APP_WORK/memcached-libvsock.log" memcached "$upgrades" sent $((out_bytes / 10 * 9))
    app_expect_rdma "$APP_WORK/clients-libvsock.log" "memcslap+$aslap" "$upgrades" sent $((in_bytes / 10 * 9))
    app_expect_rdma "$APP_WORK/clients-libvsock.log" "memcslap+$aslap" "$upgrades" received $((out_bytes / 10 * 9))
  fi
done

for test in set get; do
  echo "MEASURED memcslap --test=$test --concurrency=$threads --execute-number=$requests: keys/s" \
    "kernel ${FIG[kernel:$test]}, libvsock ${FIG[libvsock:$test]} on $APP_ADDR"
done
echo "MEASURED $aslap -T 2 -c $aslap_conns -x $aslap_ops -X 1024 (90% get): ops/s" \
  "kernel ${FIG[kernel:aslap]}, libvsock ${FIG[libvsock:aslap]} on $APP_ADDR"
echo "PASS: memcached over the device"
