#!/bin/bash
# The project's test command (README, .ci/run): installs what is missing,
# builds, and runs every test label, then the sanitizer passes:
#   default preset : unit, conformance, rdma (Soft-RoCE VM), apps, package (the .deb)
#   asan           : unit, conformance under ASan and UBSan in one build (not
#                    the fuzzers: they carry their own sanitizers)
#   tsan           : threads (the unit tests that race threads)
# After each preset: its slowest tests (so that CI's tail shows where the
# time went).
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
  # ctest -j starts the tests with the highest cost first, from the cost
  # data of the build's earlier runs. A fresh build has none and would run
  # the tests in the order they were added: the longest device tests come
  # last, and CI's run ended with one of them while the other job idled.
  # tests/ctest-cost.txt (seconds of a CI rehearsal, ctest's own format)
  # stands in until the build has its own.
  local cost=build/$preset/Testing/Temporary/CTestCostData.txt
  [ -e "$cost" ] || { mkdir -p "${cost%/*}" && cp tests/ctest-cost.txt "$cost"; }
  echo "=== preset $preset: ctest -L '$labels'"
  ctest --preset "$preset" -L "$labels" -j"$jobs" --timeout 900 --no-tests=error "$@"
  local rc=$?
  slowest "$preset"
  summary+=("$preset ($labels): $([ $rc = 0 ] && echo passed || echo FAILED) in $((SECONDS - t0)) s")
  [ $rc = 0 ] || status=1
}

# slowest PRESET: the ten longest tests of the preset's last run.
slowest() {
  local log=build/$1/Testing/Temporary/LastTest.log
  [ -r "$log" ] || return 0
  echo "=== preset $1: slowest tests"
  awk '/^Test time = / { t = $0; sub(/^Test time = */, "", t); sub(/ sec.*/, "", t); print t, name }
       /^[0-9]+\/[0-9]+ Test: / { name = $0; sub(/^[^:]*: /, "", name) }' "$log" |
    sort -rn | head -n 10 | awk '{ printf "  %8.1f s  %s\n", $1, $2 }'
}

run_preset default 'unit|conformance|rdma|apps|package'
if [ $quick = 0 ]; then
  # The fuzzers build themselves with clang's ASan+UBSan: run them once.
  run_preset asan 'unit|conformance' -LE fuzz
  run_preset tsan 'threads'
fi
echo "=== summary"
printf '  %s\n' "${summary[@]}"
exit $status
