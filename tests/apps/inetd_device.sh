#!/usr/bin/env bash
# inetd_device.sh SERVER_SHAPES: openbsd-inetd (Debian's package,
# unmodified) under libvsock serving a "nowait" stream service whose handler
# is /bin/cat: inetd accepts, forks, and execs cat with the connection as
# its stdin and stdout; cat echoes. Its environment reaches cat (inetd -E:
# LD_PRELOAD is not laundered away), so the library loads fresh in each cat
# and must find the connection it inherited (docs/protocol.md §1.1, named
# boards). The client is `server_shapes client` under the library:
# VSOCK_APP_CONNECTIONS (default 20) sequential connections of
# VSOCK_APP_BYTES (default 1 MiB) echoed each, checked byte for byte.
#
# Passes when every byte came back, at least 90% of the connections
# upgraded and at least 90% of the bytes the client sent went over RDMA (its
# VSOCK_STATS=1 counters), and the device's packet counter (rxe sent_pkts)
# grew by at least one packet per 4 KiB the client sent over RDMA. Then the
# same without the library (where the counter stays still); both times per
# connection are in the MEASURED line.
source "$(dirname "$0")/app_test_lib.sh"
[ $# -ge 1 ] || app_fail "usage: inetd_device.sh SERVER_SHAPES"
shapes=$1
app_require /usr/sbin/inetd /bin/cat "$shapes"
app_init inetd-device
app_device_init
connections=${VSOCK_APP_CONNECTIONS:-20}
bytes=${VSOCK_APP_BYTES:-1048576}
counter=/sys/class/infiniband/${RXE_VM_DEV:-rxe0}/ports/1/hw_counters/sent_pkts
declare -A FIG=()

rxe_sent() { if [ -r "$counter" ]; then cat "$counter"; else echo 0; fi; }

# inetd_run MODE: inetd and the client; FIG[MODE] = ms per connection.
inetd_run() {
  local mode=$1 port conf inetd sent0 sent1 out
  port=$(app_free_port)
  [ -n "$port" ] || app_fail "no free port found"
  conf=$APP_WORK/inetd-$mode.conf
  # One service on the device's address; cat, not inetd's internal echo
  # (that runs in inetd itself, no exec).
  echo "$APP_ADDR:$port stream tcp nowait root /bin/cat cat" >"$conf"
  # -i: in the foreground; -E: the environment (LD_PRELOAD) reaches cat.
  # The library's log goes to a file: cat's stderr is the connection.
  app_log "starting inetd ($mode) on $APP_ADDR:$port"
  timeout -k 5 "${VSOCK_APP_SERVER_TIMEOUT:-300}" "${APP_ENV[@]}" VSOCK_LOG_FILE="$APP_WORK/inetd-$mode.log" \
    /usr/sbin/inetd -i -E "$conf" >>"$APP_WORK/inetd-$mode.out" 2>&1 </dev/null &
  inetd=$!
  APP_SERVER_PIDS+=("$inetd")
  app_wait_port tcp "$port" "$inetd" 15 || app_fail "inetd ($mode) did not listen on $port (see inetd-$mode.out)"
  echo "$port $inetd" >"$APP_WORK/port-$mode"
  out=$APP_WORK/client-$mode.out
  sent0=$(rxe_sent)
  app_preloaded "$APP_WORK/client-$mode.log" "$shapes" client "$APP_ADDR" "$APP_WORK/port-$mode" "$connections" \
    "$bytes" >"$out" || app_fail "client ($mode) failed: $(tr '\n' ' ' <"$out") $(tail -n 5 "$APP_WORK/client-$mode.log")"
  sent1=$(rxe_sent)
  SENT_PKTS=$((sent1 - sent0))
  FIG[$mode]=$(sed -n 's/^MEASURED .* mean_ms_per_connection=\([0-9.]*\)$/\1/p' "$out")
  app_log "client ($mode): $(cat "$out"); the device sent $SENT_PKTS packets"
  # Each cat ends with its connection (and logs its counters): wait up to
  # 5 s for the last before inetd goes. $inetd is timeout's pid.
  local daemon
  daemon=$(pgrep -P "$inetd" -x inetd | head -n1)
  for _ in $(seq 50); do
    [ -n "$daemon" ] && pgrep -P "$daemon" >/dev/null 2>&1 || break
    sleep 0.1
  done
  app_stop_pid "$inetd" TERM 10
}

app_library on
inetd_run libvsock
app_stats "$APP_WORK/client-libvsock.log" || app_fail "client: no stats line"
upgraded=${APP_STATS[upgrades_done]:-0}
rdma=${APP_STATS[rdma_bytes_sent]:-0} tcp=${APP_STATS[tcp_bytes_sent]:-0}
client_summary="upgrades_done=$upgraded upgrade_attempts=${APP_STATS[upgrade_attempts]:-0}"
client_summary="$client_summary upgrade_redirects=${APP_STATS[upgrade_redirects]:-0} rdma_bytes_sent=$rdma tcp_bytes_sent=$tcp"
for name in "${!APP_STATS[@]}"; do
  [[ $name == fallback_* && ${APP_STATS[$name]} -gt 0 ]] && client_summary="$client_summary $name=${APP_STATS[$name]}"
done
app_log "client: $client_summary"
rdma_pkts=$SENT_PKTS
# The handlers: every cat loaded the library and claimed its connection.
app_stats "$APP_WORK/inetd-libvsock.log" || app_fail "inetd/cat: no stats line in inetd-libvsock.log"
app_log "inetd and its cats: upgrades_done=${APP_STATS[upgrades_done]:-0}" \
  "rendezvous_claims=${APP_STATS[rendezvous_claims]:-0} rdma_bytes_sent=${APP_STATS[rdma_bytes_sent]:-0}" \
  "tcp_bytes_sent=${APP_STATS[tcp_bytes_sent]:-0}"
errors=$(grep -hE 'libvsock\[[0-9]+\]: error: ' "$APP_WORK/inetd-libvsock.log" "$APP_WORK/client-libvsock.log" |
  sort | uniq -c | head -n 5)
[ -z "$errors" ] || app_fail "the library logged errors on a run that went well:"$'\n'"$errors"

app_library off
inetd_run kernel
kernel_pkts=$SENT_PKTS

percent=$(((rdma * 100) / (rdma + tcp > 0 ? rdma + tcp : 1)))
echo "MEASURED openbsd-inetd nowait /bin/cat echo, $connections connections x $bytes bytes: ms per connection" \
  "kernel ${FIG[kernel]}, libvsock ${FIG[libvsock]} on $APP_ADDR; upgraded $upgraded/$connections;" \
  "client bytes sent over RDMA $rdma ($percent%), over TCP $tcp; rxe sent_pkts libvsock $rdma_pkts," \
  "kernel $kernel_pkts"
[ $((upgraded * 10)) -ge $((connections * 9)) ] || app_fail "$upgraded of $connections connections upgraded (under 90%)"
[ $((rdma * 10)) -ge $(((rdma + tcp) * 9)) ] || app_fail "$rdma of $((rdma + tcp)) bytes over RDMA (under 90%)"
[ "$rdma" -ge $((connections * bytes * 9 / 10)) ] || app_fail "rdma_bytes_sent=$rdma: under 90% of the bytes echoed"
[ "$rdma_pkts" -ge $((rdma / 4096)) ] ||
  app_fail "the device sent $rdma_pkts packets: too few for $rdma bytes over RDMA"
echo "PASS: openbsd-inetd's cat echoes over the device"
