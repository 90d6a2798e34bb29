// Per-thread re-entry guard. While the library itself is working (opening a
// device, talking to rdma_cm, reading its configuration), the libraries it
// calls may call read(), write(), ioctl(), socket()... Those land in our
// entry points again; with the guard held they go straight to the kernel.
#pragma once

namespace vsock::sys {

// initial-exec: no allocation on first access, usable from any context.
extern __thread int t_library_depth __attribute__((tls_model("initial-exec")));

inline bool in_library() { return t_library_depth > 0; }

class ReentryGuard {
 public:
  ReentryGuard() { ++t_library_depth; }
  ~ReentryGuard() { --t_library_depth; }
  ReentryGuard(const ReentryGuard&) = delete;
  ReentryGuard& operator=(const ReentryGuard&) = delete;
};

}  // namespace vsock::sys
