#!/usr/bin/env bash
# memcached + libmemcached's tools (memccp, memccat, memcstat) and a bash
# /dev/tcp text-protocol exchange, all under libvsock, on loopback.
source "$(dirname "$0")/app_test_lib.sh"
app_require memcached memccp memccat memcstat
app_init memcached

user_args=()
[ "$(id -u)" -eq 0 ] && user_args=(-u root)  # memcached refuses root without -u
app_start_server memcached tcp memcached "${user_args[@]}" -l "$APP_ADDR" -p @PORT@ -U 0 -t 2 -m 16
port=$APP_PORT
server=$APP_PID
servers="--servers=$APP_ADDR:$port"

# A 100 KiB file through memccp (binary protocol) and back through memccat.
blob="$APP_WORK/blob.bin"
head -c 102400 /dev/urandom >"$blob"
(cd "$APP_WORK" && app_preloaded "$APP_WORK/memc-tools.log" memccp "$servers" --binary blob.bin) ||
  app_fail "memccp failed"
app_preloaded "$APP_WORK/memc-tools.log" memccat "$servers" --binary blob.bin >"$APP_WORK/blob.back" ||
  app_fail "memccat failed"
# memccat prints a newline after each value.
cmp -s <(cat "$blob"; echo) "$APP_WORK/blob.back" || app_fail "memccat returned different bytes than memccp stored"
app_log "memccp/memccat round trip of 100 KiB ok"

app_preloaded "$APP_WORK/memc-tools.log" memcstat "$servers" >"$APP_WORK/memcstat.out" || app_fail "memcstat failed"
grep -Eq 'curr_items: *[1-9]' "$APP_WORK/memcstat.out" || app_fail "memcstat shows no stored item"
app_log "memcstat: $(grep -E 'curr_items|total_connections' "$APP_WORK/memcstat.out" | tr -s ' \n' ' ')"

# The text protocol from bash itself: /dev/tcp makes bash call socket() and
# connect(), so the library is loaded into that bash and sees the socket.
exchange=$(app_preloaded "$APP_WORK/bash-client.log" bash -c '
  exec 3<>"/dev/tcp/$1/$2" || exit 2
  printf "set vsock:bash 0 0 11\r\nhello world\r\nget vsock:bash\r\nquit\r\n" >&3
  timeout 10 cat <&3
' bash "$APP_ADDR" "$port") || app_fail "bash /dev/tcp exchange failed"
expected=$'STORED\r\nVALUE vsock:bash 0 11\r\nhello world\r\nEND\r'
[ "$exchange" = "$expected" ] || app_fail "bash /dev/tcp exchange returned: $(printf '%q' "$exchange")"
app_log "bash /dev/tcp set/get ok"

# memcached exits 0 on SIGTERM, so the library prints its stats.
app_stop_pid "$server" TERM 10
[ "$APP_STOP_STATUS" -eq 0 ] || app_fail "memcached exited with status $APP_STOP_STATUS"

app_expect_loaded "$APP_WORK/memcached.log" memcached
app_expect_loaded "$APP_WORK/memc-tools.log" "memccp/memccat/memcstat"
app_expect_loaded "$APP_WORK/bash-client.log" "bash /dev/tcp client"
echo "PASS: memcached"
