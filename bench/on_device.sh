# Sourced by the bench scripts that must run where a verbs device is.
# bench_on_device SCRIPT [ARG...]: returns when this machine (or the rxe VM
# we are in) has an ACTIVE verbs port; otherwise runs SCRIPT ARG... once in
# the Soft-RoCE VM (tests/rxe/with-device.sh) and does not return. In the
# guest: memlock unlimited, TMPDIR unset, cwd /tmp (the guest's writes
# outside the source tree are discarded).
bench_on_device() {
  [ "${RXE_VM:-0}" = 1 ] && return 0
  grep -qs ACTIVE /sys/class/infiniband/*/ports/*/state && return 0
  export VSOCK_RXE_TIMEOUT=${VSOCK_RXE_TIMEOUT:-1200}
  cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
  exec bash tests/rxe/with-device.sh bash -c 'ulimit -l unlimited 2>/dev/null; unset TMPDIR; cd /tmp && exec bash "$0" "$@"' \
    "$@"
}
