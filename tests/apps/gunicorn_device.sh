#!/usr/bin/env bash
# gunicorn (Debian's package, unmodified, its defaults: a master that binds,
# then forks sync workers that accept on the inherited listener and serve one
# request per connection) under libvsock, with a small WSGI application
# (wsgi_bytes.py), over the verbs device; then the same without the library.
#
# Two clients, both under the library, each making one connection per
# request (HTTP/1.0, the connection ends with the answer):
# - ab (apache2-utils): VSOCK_APP_REQUESTS (default 200) sequential requests
#   of 4 KiB; every request answered in full.
# - http10_client.py: VSOCK_APP_CHECKED (default 20) sequential requests of
#   256 KiB, every byte of every answer checked.
#
# Passes when, with the library, at least 90% of each client's connections
# upgraded and at least 90% of the bytes each client sent and received went
# over RDMA (its VSOCK_STATS=1 counters: the request and its answer, not
# only the answer), no upgrade timed out, the workers claimed the
# connections (rendezvous), and the device's packet counter grew by at least
# one packet per 4 KiB received over RDMA. The times per request, kernel and
# libvsock, are in the MEASURED lines.
source "$(dirname "$0")/app_test_lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
app_require gunicorn ab "$APP_PYTHON"
app_init gunicorn-device
app_device_init
requests=${VSOCK_APP_REQUESTS:-200}
checked=${VSOCK_APP_CHECKED:-20}
small=4096 large=262144
counter=/sys/class/infiniband/${RXE_VM_DEV:-rxe0}/ports/1/hw_counters/sent_pkts
declare -A FIG=() PKTS=()

rxe_sent() { if [ -r "$counter" ]; then cat "$counter"; else echo 0; fi; }

# client_stats LOG WHAT COUNT: the client's counters into C_*; fails unless
# 90% of COUNT connections upgraded and 90% of its bytes went over RDMA.
client_stats() {
  local log=$1 what=$2 count=$3
  app_stats "$log" || app_fail "$what: no stats line"
  C_UP=${APP_STATS[upgrades_done]:-0}
  C_RS=${APP_STATS[rdma_bytes_sent]:-0} C_TS=${APP_STATS[tcp_bytes_sent]:-0}
  C_RR=${APP_STATS[rdma_bytes_received]:-0} C_TR=${APP_STATS[tcp_bytes_received]:-0}
  local name fallbacks=""
  for name in "${!APP_STATS[@]}"; do
    [[ $name == fallback_* && ${APP_STATS[$name]} -gt 0 ]] && fallbacks="$fallbacks $name=${APP_STATS[$name]}"
  done
  app_log "$what: upgraded $C_UP/$count; sent $C_RS B over RDMA, $C_TS over TCP; received $C_RR over RDMA," \
    "$C_TR over TCP;${fallbacks:- no fallbacks}"
  [ "${APP_STATS[fallback_timeout]:-0}" = 0 ] || app_fail "$what: ${APP_STATS[fallback_timeout]} upgrades timed out"
  [ $((C_UP * 10)) -ge $((count * 9)) ] || app_fail "$what: $C_UP of $count connections upgraded (under 90%)"
  [ $((C_RS * 10)) -ge $(((C_RS + C_TS) * 9)) ] || app_fail "$what: $C_RS of $((C_RS + C_TS)) bytes sent over RDMA"
  [ $((C_RR * 10)) -ge $(((C_RR + C_TR) * 9)) ] ||
    app_fail "$what: $C_RR of $((C_RR + C_TR)) bytes received over RDMA"
}

for mode in libvsock kernel; do
  if [ "$mode" = libvsock ]; then app_library on; else app_library off; fi
  port=$(app_free_port)
  [ -n "$port" ] || app_fail "no free port found"
  app_log "starting gunicorn ($mode) on $APP_ADDR:$port, 2 workers"
  # The master's own timeout (--timeout) is its worker heartbeat: under
  # emulation a worker may be slow, not stuck.
  timeout -k 5 "${VSOCK_APP_SERVER_TIMEOUT:-300}" "${APP_ENV[@]}" gunicorn --workers 2 --timeout 120 \
    --bind "$APP_ADDR:$port" --chdir "$here" wsgi_bytes:application >>"$APP_WORK/gunicorn-$mode.log" 2>&1 </dev/null &
  server=$!
  APP_SERVER_PIDS+=("$server")
  app_wait_port tcp "$port" "$server" 60 || app_fail "gunicorn ($mode) did not listen on $port (see gunicorn-$mode.log)"
  # The workers boot after the master listens: a first request is served
  # once one of them accepts (not counted).
  warm=0
  for _ in $(seq 60); do
    if "$APP_PYTHON" "$here/http10_client.py" "$APP_ADDR" "$port" 1 1 >/dev/null 2>&1; then warm=1; break; fi
    sleep 0.5
  done
  [ "$warm" = 1 ] || app_fail "gunicorn ($mode) answered no request in 30 s (see gunicorn-$mode.log)"

  sent0=$(rxe_sent)
  out=$APP_WORK/ab-$mode.out
  app_preloaded "$APP_WORK/ab-$mode.log" ab -q -n "$requests" -c 1 "http://$APP_ADDR:$port/bytes/$small" >"$out" 2>&1 ||
    app_fail "ab ($mode) failed: $(tail -3 "$out" | tr '\n' ' ')"
  PKTS[$mode:ab]=$(($(rxe_sent) - sent0))
  complete=$(sed -n 's/^Complete requests: *\([0-9]*\)$/\1/p' "$out")
  failed=$(sed -n 's/^Failed requests: *\([0-9]*\)$/\1/p' "$out")
  FIG[$mode:ab]=$(sed -n 's/^Time per request: *\([0-9.]*\) \[ms\] (mean)$/\1/p' "$out")
  [ "${complete:-x}" = "$requests" ] && [ "${failed:-x}" = 0 ] ||
    app_fail "ab ($mode): ${complete:-?} of $requests complete, ${failed:-?} failed"
  grep -q '^Non-2xx responses' "$out" && app_fail "ab ($mode): non-2xx responses"
  app_log "ab ($mode): $complete requests of $small B, ${FIG[$mode:ab]} ms per request; the device sent ${PKTS[$mode:ab]} packets"

  sent0=$(rxe_sent)
  line=$(app_preloaded "$APP_WORK/checked-$mode.log" "$APP_PYTHON" "$here/http10_client.py" "$APP_ADDR" "$port" \
    "$checked" "$large") || app_fail "http10_client ($mode) failed: $(tail -2 "$APP_WORK/checked-$mode.log" | tr '\n' ' ')"
  PKTS[$mode:checked]=$(($(rxe_sent) - sent0))
  FIG[$mode:checked]=$(sed -n 's/.* mean_ms \([0-9.]*\) .*/\1/p' <<<"$line")
  app_log "http10_client ($mode): $line; the device sent ${PKTS[$mode:checked]} packets"
  app_stop_pid "$server" TERM 15

  if [ "$mode" = libvsock ]; then
    client_stats "$APP_WORK/ab-libvsock.log" ab "$requests"
    ab_up=$C_UP ab_rs=$C_RS ab_ts=$C_TS ab_rr=$C_RR ab_tr=$C_TR
    [ "${PKTS[libvsock:ab]}" -ge $((ab_rr / 4096)) ] ||
      app_fail "ab: the device sent ${PKTS[libvsock:ab]} packets for $ab_rr bytes received over RDMA"
    client_stats "$APP_WORK/checked-libvsock.log" http10_client "$checked"
    ck_up=$C_UP ck_rr=$C_RR ck_tr=$C_TR
    [ "${PKTS[libvsock:checked]}" -ge $((ck_rr / 4096)) ] ||
      app_fail "http10_client: the device sent ${PKTS[libvsock:checked]} packets for $ck_rr bytes received over RDMA"
    # The workers, not the master, served: they claimed the connections.
    app_stats "$APP_WORK/gunicorn-libvsock.log" || app_fail "gunicorn: no stats line"
    claims=${APP_STATS[rendezvous_claims]:-0}
    app_log "gunicorn: upgrades_done=${APP_STATS[upgrades_done]:-0} rendezvous_claims=$claims" \
      "rdma_bytes_sent=${APP_STATS[rdma_bytes_sent]:-0} tcp_bytes_sent=${APP_STATS[tcp_bytes_sent]:-0}"
    [ "$claims" -ge $(((ab_up + ck_up) * 9 / 10)) ] ||
      app_fail "gunicorn's workers claimed $claims connections of $((ab_up + ck_up)) upgraded"
    errors=$(grep -hE 'libvsock\[[0-9]+\]: error: ' "$APP_WORK"/*-libvsock.log | sort | uniq -c | head -n 5)
    [ -z "$errors" ] || app_fail "the library logged errors on a run that went well:"$'\n'"$errors"
  fi
done

echo "MEASURED gunicorn (2 sync workers) + ab -n $requests -c 1 ($small B, HTTP/1.0, one connection each): ms per" \
  "request kernel ${FIG[kernel:ab]}, libvsock ${FIG[libvsock:ab]} on $APP_ADDR; upgraded $ab_up/$requests; ab sent" \
  "$ab_rs B over RDMA, $ab_ts over TCP, received $ab_rr over RDMA, $ab_tr over TCP; rxe sent_pkts libvsock" \
  "${PKTS[libvsock:ab]}, kernel ${PKTS[kernel:ab]}"
echo "MEASURED gunicorn + http10_client $checked x $large B (every byte checked): ms per request kernel" \
  "${FIG[kernel:checked]}, libvsock ${FIG[libvsock:checked]}; upgraded $ck_up/$checked; received $ck_rr B over" \
  "RDMA, $ck_tr over TCP"
echo "PASS: gunicorn's pre-forked workers serve one-request connections over the device"
