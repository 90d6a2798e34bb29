# pair_lib.sh - sourced by a command that two-hosts.sh runs on both hosts:
# how the two halves meet. Every mark is a file in $VSOCK_PAIR_DIR (shared
# read-write by both guests over 9p), written whole (a temp file renamed),
# so a half never reads a mark that is half written.
#
#   pair_role              prints a or b (RXE_VM_HOST)
#   pair_mark NAME [TEXT]  leaves mark NAME (this host's), holding TEXT
#   pair_wait NAME SECS    waits for the other host's mark NAME; prints its
#                          text; fails (status 1) after SECS, or at once when
#                          the other half has ended (its "exit" mark)
#   pair_done STATUS       leaves this host's "exit" mark (call it on exit)

pair_role() { echo "${RXE_VM_HOST:?not on a two-host bed (tests/rxe/two-hosts.sh)}"; }
pair_peer_role() { [ "$(pair_role)" = a ] && echo b || echo a; }

pair_mark() {
  local dir=${VSOCK_PAIR_DIR:?no VSOCK_PAIR_DIR} name="$(pair_role).$1"
  printf '%s\n' "${2:-}" > "$dir/.$name.tmp" && mv -f "$dir/.$name.tmp" "$dir/$name"
}

pair_wait() {
  local dir=${VSOCK_PAIR_DIR:?no VSOCK_PAIR_DIR} name secs=$2 i peer
  peer=$(pair_peer_role)
  name="$peer.$1"
  for ((i = 0; i < secs * 10; i++)); do
    if [ -e "$dir/$name" ]; then
      cat "$dir/$name"
      return 0
    fi
    if [ "$1" != exit ] && [ -e "$dir/$peer.exit" ]; then
      echo "pair_wait: host $peer ended (status $(cat "$dir/$peer.exit")) before its mark $1" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "pair_wait: no mark $1 from host $peer within ${secs}s" >&2
  return 1
}

pair_done() { pair_mark exit "$1"; }
