#!/bin/sh
# run_conformance.sh PROGRAM PRELOAD [ARGS...]
#
# Runs PROGRAM twice: on the kernel alone (no LD_PRELOAD), then with
# LD_PRELOAD=PRELOAD. Both runs must exit 0 and print the same stdout. Exit
# code 77 (skipped) from the kernel run is propagated; the preloaded run must
# then skip too. The second run must show, on stderr at VSOCK_LOG_LEVEL=info,
# that libvsock was really loaded. Only stdout is compared; when
# VSOCK_CONFORMANCE_STDERR names a file, the preloaded run's stderr (its log
# and, with VSOCK_STATS=1, its stats lines) is appended there for the caller.
set -u

if [ $# -lt 2 ]; then
  echo "usage: $0 PROGRAM PRELOAD [ARGS...]" >&2
  exit 2
fi
program=$1
preload=$2
shift 2
name=$(basename "$program")

work=$(mktemp -d "${TMPDIR:-/tmp}/conformance.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT INT TERM

show() {  # show LABEL FILE
  echo "---- $1 ----"
  cat "$2"
}

# Run 1: the kernel alone.
env -u LD_PRELOAD -u VSOCK_LOG_FILE "$program" "$@" >"$work/kernel.out" 2>"$work/kernel.err"
rc_kernel=$?
if [ $rc_kernel -ne 0 ] && [ $rc_kernel -ne 77 ]; then
  echo "$name: FAILED without LD_PRELOAD (exit $rc_kernel)"
  show "stdout (kernel)" "$work/kernel.out"
  show "stderr (kernel)" "$work/kernel.err"
  exit 1
fi

if grep -Eq '^libvsock\[' "$work/kernel.err"; then
  echo "$name: libvsock logged in the run without LD_PRELOAD"
  show "stderr (kernel)" "$work/kernel.err"
  exit 1
fi

# Run 2: under libvsock.
env -u VSOCK_LOG_FILE LD_PRELOAD="$preload" VSOCK_LOG_LEVEL=info "$program" "$@" >"$work/vsock.out" 2>"$work/vsock.err"
rc_vsock=$?
[ -n "${VSOCK_CONFORMANCE_STDERR:-}" ] && cat "$work/vsock.err" >>"$VSOCK_CONFORMANCE_STDERR"
status=0
if [ $rc_vsock -ne $rc_kernel ]; then
  echo "$name: exit $rc_kernel without LD_PRELOAD, $rc_vsock with LD_PRELOAD=$preload"
  status=1
fi
loaded_line='^libvsock\[[0-9]+\]: info: libvsock .* loaded'
if ! grep -Eq "$loaded_line" "$work/vsock.err"; then
  echo "$name: libvsock was not loaded with LD_PRELOAD=$preload (its 'loaded' log line is missing from stderr)"
  status=1
fi
if ! diff -u --label "kernel" --label "libvsock" "$work/kernel.out" "$work/vsock.out" >"$work/diff"; then
  echo "$name: transcripts differ"
  cat "$work/diff"
  status=1
fi
if [ $status -ne 0 ]; then
  show "stdout (libvsock)" "$work/vsock.out"
  show "stderr (libvsock)" "$work/vsock.err"
  exit 1
fi

cat "$work/kernel.out"
if [ $rc_kernel -eq 77 ]; then
  echo "$name: skipped"
  exit 77
fi
echo "$name: identical transcripts, both runs passed"
exit 0
