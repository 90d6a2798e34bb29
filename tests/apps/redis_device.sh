#!/usr/bin/env bash
# redis-server + redis-benchmark over the verbs device, both ends under
# libvsock: SET and GET with 50 clients (-c 50), first one request per round
# trip, then pipelined (-P 16), bounded request counts (VSOCK_APP_REQUESTS,
# default 2000, and 10 times that pipelined). redis-server runs its own epoll
# loop. ctest runs it in the Soft-RoCE VM through tests/rxe/with-device.sh
# and tests/upgrade/on_device_address.sh.
#
# Passes when every benchmark run prints its SET and GET results, the server
# counted exactly the SET and GET calls sent (INFO commandstats), it exits 0
# on SIGTERM, and the server and the benchmark upgraded every connection (50
# per test) and moved at least 90% of redis's own byte counts
# (total_net_input_bytes / total_net_output_bytes) over RDMA, both ways.
# Then the same runs against a server without the library; both figures
# (requests per second, p50 latency) are printed as MEASURED lines.
source "$(dirname "$0")/app_test_lib.sh"
app_require redis-server redis-cli redis-benchmark
app_init redis-device
app_device_init
requests=${VSOCK_APP_REQUESTS:-2000}
clients=50
pipeline=16
declare -A FIG=()

# info PORT SECTION FIELD: one value of redis INFO, without the library (this
# connection is not part of what is measured).
info() {
  env -u LD_PRELOAD timeout 30 redis-cli -h "$APP_ADDR" -p "$1" INFO "$2" | tr -d '\r' |
    sed -n "s/^$3:\(.*\)$/\1/p"
}

# bench MODE PORT LABEL N ARGS...: one redis-benchmark run of SET and GET;
# FIG[MODE:LABEL:TEST] = "rps p50_ms".
bench() {
  local mode=$1 port=$2 label=$3 n=$4 out t line
  shift 4
  out=$APP_WORK/bench-$label-$mode.csv
  app_preloaded "$APP_WORK/bench-$mode.log" redis-benchmark -h "$APP_ADDR" -p "$port" -n "$n" -c "$clients" \
    -t set,get --csv "$@" >"$out" || app_fail "redis-benchmark $label ($mode) failed"
  for t in SET GET; do
    # "SET","rps","avg","min","p50",...
    line=$(tr -d '"' <"$out" | awk -F, -v t="$t" '$1 == t { print $2, $5 }')
    [ -n "$line" ] || app_fail "redis-benchmark $label ($mode) printed no $t result"
    FIG[$mode:$label:$t]=$line
    app_log "$label $t ($mode): $n requests, rps p50_ms = $line"
  done
}

for mode in libvsock kernel; do
  if [ "$mode" = libvsock ]; then app_library on; else app_library off; fi
  app_start_redis "redis-$mode"
  port=$APP_PORT server=$APP_PID
  bench "$mode" "$port" plain "$requests"
  bench "$mode" "$port" pipelined $((requests * 10)) -P "$pipeline"
  expected=$((requests + requests * 10))
  for t in set get; do
    calls=$(info "$port" commandstats "cmdstat_$t" | sed -n 's/^calls=\([0-9]*\),.*/\1/p')
    [ "${calls:-0}" -eq "$expected" ] || app_fail "redis ($mode) counted ${calls:-no} $t calls, expected $expected"
  done
  app_log "redis ($mode) counted $expected SET and $expected GET calls"
  in_bytes=$(info "$port" stats total_net_input_bytes)
  out_bytes=$(info "$port" stats total_net_output_bytes)
  conns=$(info "$port" stats total_connections_received)
  app_log "redis ($mode): $conns connections, $in_bytes bytes in, $out_bytes bytes out"
  app_stop_pid "$server" TERM 15
  [ "$APP_STOP_STATUS" -eq 0 ] || app_fail "redis-server ($mode) exited with status $APP_STOP_STATUS"
  if [ "$mode" = libvsock ]; then
    # Two benchmark runs of two tests, 50 connections each; the INFO
    # connections ran without the library.
    upgrades=$((2 * 2 * clients))
    app_expect_rdma "$APP_WORK/redis-libvsock.log" "redis-server" "$upgrades" received $((in_bytes / 10 * 9))
    app_expect_rdma "$APP_WORK/redis-libvsock.log" "redis-server" "$upgrades" sent $((out_bytes / 10 * 9))
    app_expect_rdma "$APP_WORK/bench-libvsock.log" "redis-benchmark" "$upgrades" sent $((in_bytes / 10 * 9))
    app_expect_rdma "$APP_WORK/bench-libvsock.log" "redis-benchmark" "$upgrades" received $((out_bytes / 10 * 9))
  fi
done

for label in plain pipelined; do
  n=$requests pl=1
  [ "$label" = pipelined ] && n=$((requests * 10)) pl=$pipeline
  for t in SET GET; do
    read -r krps kp50 <<<"${FIG[kernel:$label:$t]}"
    read -r lrps lp50 <<<"${FIG[libvsock:$label:$t]}"
    echo "MEASURED redis-benchmark $t -c $clients -P $pl -n $n: requests/s (p50 ms)" \
      "kernel $krps ($kp50), libvsock $lrps ($lp50) on $APP_ADDR"
  done
done
echo "PASS: redis over the device"
