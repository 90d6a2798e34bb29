#!/bin/bash
# Builds one libFuzzer target of tests/fuzz/ with clang (libFuzzer + ASan +
# UBSan) and runs it for a bounded time. ctest runs it as fuzz_<name>.
#
# Usage: run_fuzzer.sh [--build-only] <fuzz_name> <out-dir> [-- libFuzzer args...]
#   The binary, its growing corpus and any crash input go under <out-dir>.
#   VSOCK_FUZZ_SECONDS (default 15) and VSOCK_FUZZ_RUNS (default 2000000)
#   bound the run, whichever ends first; VSOCK_FUZZ_CXX picks the compiler.
#   Exits 77 (skipped) when clang++ or its libFuzzer runtime is missing.
#
# The targets link straight from source (no CMake target, no verbs): the
# wire parsers and the ring arithmetic are pure, and this list must stay so.
set -uo pipefail
build_only=0
if [ "${1:-}" = --build-only ]; then build_only=1; shift; fi
if [ $# -lt 2 ]; then sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; fi
name=$1 out=$2
shift 2
[ "${1:-}" = -- ] && shift

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
target=$here/$name.cpp
[ -f "$target" ] || { echo "run_fuzzer: no $target" >&2; exit 2; }
# The pure sources a target may use. Each must depend only on core/result.hpp,
# the wire/ headers and the ring arithmetic (no verbs, no logging).
lib_sources=("$src"/src/sock/wire/*.cpp "$src/src/rdma/ring_index.cpp" "$src/src/rdma/remote_ring.cpp" "$src/src/rdma/grh.cpp"
             "$src/src/sock/stream/stream_immediate.cpp" "$src/src/sock/stream/stream_credit.cpp"
             "$src/src/sock/stream/switch_reader.cpp" "$src/src/sock/upgrade/upgrade_matcher.cpp"
             "$src/src/sock/dgram/fragmenter.cpp" "$src/src/sock/dgram/reassembler.cpp")
# Anything that can change the binary: sources, the headers they may
# include, this script.
inputs=("$target" "$here"/*.hpp "${lib_sources[@]}" "$src"/src/sock/wire/*.hpp "$src"/src/sock/*.hpp "$src"/src/sock/dgram/*.hpp
        "$src"/src/rdma/*.hpp "$src"/src/core/*.hpp "$0")

cxx=${VSOCK_FUZZ_CXX:-clang++}
skip() { echo "SKIPPED: clang libFuzzer not available ($1)"; exit 77; }
command -v "$cxx" >/dev/null 2>&1 || skip "no $cxx"
mkdir -p "$out" || exit 1
flags=(-std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
       -Wall -Wextra -Wno-unused-parameter -I"$src/src" -I"$here")

# Does this clang link a libFuzzer program at all? (Debian: libclang-rt-NN-dev.)
# Remembered per compiler, so the probe costs once per build directory.
probe_ok=$out/.libfuzzer-ok-$(basename "$cxx")
if [ ! -f "$probe_ok" ]; then
  probe=$(mktemp -d "$out/.probe.XXXXXX") || exit 1
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/p.cpp"
  if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" >"$probe/log" 2>&1; then
    reason=$(head -3 "$probe/log" | tr '\n' ' ')
    rm -rf "$probe"
    skip "$cxx -fsanitize=fuzzer cannot link: $reason"
  fi
  rm -rf "$probe"
  touch "$probe_ok"
fi

binary=$out/$name
stale=0
if [ ! -x "$binary" ]; then
  stale=1
else
  for f in "${inputs[@]}"; do [ "$f" -nt "$binary" ] && { stale=1; break; }; done
fi
if [ $stale = 1 ]; then
  echo "run_fuzzer: building $binary"
  # Build beside, then rename: a concurrent run never sees half a binary.
  if ! "$cxx" "${flags[@]}" "$target" "${lib_sources[@]}" -o "$binary.tmp.$$"; then
    rm -f "$binary.tmp.$$"
    echo "run_fuzzer: $name does not build" >&2
    exit 1
  fi
  mv -f "$binary.tmp.$$" "$binary"
fi
[ $build_only = 1 ] && exit 0

# New inputs go to the first corpus directory (in the build tree, kept
# between runs); the committed seeds are only read.
corpus=$out/corpus/$name
artifacts=$out/artifacts/$name
mkdir -p "$corpus" "$artifacts"
seeds=()
[ -d "$here/corpus/$name" ] && seeds=("$here/corpus/$name")
seconds=${VSOCK_FUZZ_SECONDS:-15}
runs=${VSOCK_FUZZ_RUNS:-2000000}
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# libFuzzer's own failure code is 77, which ctest would read as "skipped".
"$binary" -max_total_time="$seconds" -runs="$runs" -max_len=1024 -timeout=10 \
  -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "$@" "$corpus" "${seeds[@]}"
rc=$?
if [ $rc != 0 ]; then
  [ $rc = 77 ] && rc=1
  echo "run_fuzzer: $name FAILED (exit $rc). Inputs that fail are in $artifacts/;"
  echo "  reproduce with: $binary <input>; once fixed, add the input to tests/fuzz/corpus/$name/"
fi
exit $rc
