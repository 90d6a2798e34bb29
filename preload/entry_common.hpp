// Shared by the extern "C" entry points: the real-call table, the registry,
// and a guard that keeps errno as the kernel left it while the library does
// its bookkeeping after a real call.
#pragma once
#include <cerrno>

#include "sock/registry.hpp"
#include "sys/real_calls.hpp"
#include "sys/reentry_guard.hpp"

// Every exported entry point is marked so; the version script exports it.
#define VSOCK_EXPORT extern "C" __attribute__((visibility("default")))

namespace vsock::preload {

class ErrnoKeeper {
 public:
  ErrnoKeeper() : saved_(errno) {}
  ~ErrnoKeeper() { errno = saved_; }

 private:
  int saved_;
};

using sys::real;

}  // namespace vsock::preload
