// The monotonic clock the library measures deadlines and waits against.
#pragma once
#include <time.h>

#include <cstdint>

namespace vsock::core {

inline int64_t monotonic_us() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000 + now.tv_nsec / 1000;
}

inline int64_t monotonic_ms() { return monotonic_us() / 1000; }

}  // namespace vsock::core
