// FUZZ_CHECK: the invariant assertion of the fuzz targets. A violated
// invariant says which one on stderr, then traps, so libFuzzer saves the
// input as a crash artifact (assert() would vanish under -DNDEBUG).
#pragma once
#include <cstdio>

#define FUZZ_CHECK(cond)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "FUZZ_CHECK failed: %s at %s:%d\n", #cond, __FILE__, __LINE__); \
      __builtin_trap();                                                                    \
    }                                                                                      \
  } while (0)
