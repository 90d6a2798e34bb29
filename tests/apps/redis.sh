#!/usr/bin/env bash
# redis-server + redis-cli + redis-benchmark, all under libvsock, on loopback.
# Checks a SET/GET round trip, that every benchmark test completes, and that
# the server counted exactly the benchmark's INCR and LPUSH requests.
source "$(dirname "$0")/app_test_lib.sh"
app_require redis-server redis-cli redis-benchmark
app_init redis

requests=5000
app_start_redis redis
port=$APP_PORT
server=$APP_PID

cli() { app_preloaded "$APP_WORK/cli.log" redis-cli -h "$APP_ADDR" -p "$port" "$@"; }

value="libvsock-$$-$RANDOM"
[ "$(cli SET vsock:key "$value")" = OK ] || app_fail "redis-cli SET did not answer OK"
got=$(cli GET vsock:key)
[ "$got" = "$value" ] || app_fail "redis-cli GET returned '$got', expected '$value'"
app_log "SET/GET round trip ok"

app_preloaded "$APP_WORK/benchmark.log" redis-benchmark -h "$APP_ADDR" -p "$port" -n "$requests" -c 8 \
  -t set,get,incr,lpush -q >"$APP_WORK/benchmark.out" || app_fail "redis-benchmark failed"
# -q prints one "NAME: N requests per second" line per test (after \r progress).
tr '\r' '\n' <"$APP_WORK/benchmark.out" | grep 'requests per second' | sort -u
for t in SET GET INCR LPUSH; do
  tr '\r' '\n' <"$APP_WORK/benchmark.out" | grep -Eq "^$t: [0-9.]+ requests per second" ||
    app_fail "redis-benchmark printed no result for $t"
done
# Without -r every INCR hits counter:__rand_int__ and every LPUSH mylist.
[ "$(cli GET counter:__rand_int__)" = "$requests" ] || app_fail "counter is not $requests after the INCR test"
[ "$(cli LLEN mylist)" = "$requests" ] || app_fail "mylist length is not $requests after the LPUSH test"
app_log "benchmark counted $requests INCR and $requests LPUSH"

# SIGTERM makes redis shut down cleanly (exit 0), so the library prints stats.
app_stop_pid "$server" TERM 15
[ "$APP_STOP_STATUS" -eq 0 ] || app_fail "redis-server exited with status $APP_STOP_STATUS"

app_expect_loaded "$APP_WORK/redis.log" redis-server
app_expect_loaded "$APP_WORK/cli.log" redis-cli
app_expect_loaded "$APP_WORK/benchmark.log" redis-benchmark
echo "PASS: redis"
