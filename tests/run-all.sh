#!/bin/bash
# The project's test command (README, .ci/run): installs what is missing,
# builds, and runs every test label, then the sanitizer passes:
#   default preset : unit, conformance, rdma (Soft-RoCE VM), apps, package (the .deb)
#   asan, ubsan    : unit, conformance (not the fuzzers: they carry their own sanitizers)
#   tsan           : threads (the unit tests that race threads)
# Usage: tests/run-all.sh [--quick]      (--quick: default preset only)
# VSOCK_REQUIRE_DEVICE=1 turns a missing verbs device into a failure (CI).
set -uo pipefail
cd "$(dirname "$0")/.."
quick=0
for arg in "$@"; do
  case $arg in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run-all: unknown option $arg (try --help)" >&2; exit 2 ;;
  esac
done
export TMPDIR=/tmp  # an empty TMPDIR breaks some programs; the VM needs a real one

bash tools/install-deps.sh || exit 1
jobs=$(nproc 2>/dev/null || echo 2)
summary=()
status=0

run_preset() {  # preset label-regex [ctest options...]
  local preset=$1 labels=$2 t0=$SECONDS
  shift 2
  echo "=== preset $preset: configure + build"
  if ! cmake --preset "$preset" >/dev/null || ! cmake --build --preset "$preset" -j"$jobs" >/tmp/libvsock-build-$preset.log 2>&1; then
    tail -40 /tmp/libvsock-build-$preset.log
    summary+=("$preset: BUILD FAILED")
    status=1
    return
  fi
  echo "=== preset $preset: ctest -L '$labels'"
  ctest --preset "$preset" -L "$labels" -j"$jobs" --timeout 900 --no-tests=error "$@"
  local rc=$?
  summary+=("$preset ($labels): $([ $rc = 0 ] && echo passed || echo FAILED) in $((SECONDS - t0)) s")
  [ $rc = 0 ] || status=1
}

run_preset default 'unit|conformance|rdma|apps|package'
if [ $quick = 0 ]; then
  # The fuzzers build themselves with clang's ASan+UBSan: run them once.
  run_preset asan 'unit|conformance' -LE fuzz
  run_preset ubsan 'unit|conformance' -LE fuzz
  run_preset tsan 'threads'
fi
echo "=== summary"
printf '  %s\n' "${summary[@]}"
exit $status
