#include "sock/wait/kernel_epoll.hpp"

#include <errno.h>

#include <atomic>
#include <cstdint>

#include "sys/real_calls.hpp"

namespace vsock::sock {
namespace {

// Set at the first ENOSYS: the kernel has no epoll_pwait2, and never will
// in this process.
std::atomic<bool> g_no_pwait2{false};

}  // namespace

int epoll_timeout_ms(const timespec* timeout) {
  if (timeout == nullptr) return -1;
  const int64_t ms = static_cast<int64_t>(timeout->tv_sec) * 1000 + (timeout->tv_nsec + 999999) / 1000000;
  return ms > INT32_MAX ? INT32_MAX : static_cast<int>(ms);
}

int kernel_epoll_wait(int epfd, epoll_event* events, int max, const timespec* timeout, const sigset_t* mask) {
  const sys::RealCalls& real = sys::real();
  if (real.epoll_pwait2 != nullptr && !g_no_pwait2.load(std::memory_order_relaxed)) {
    const int n = real.epoll_pwait2(epfd, events, max, timeout, mask);
    if (n >= 0 || errno != ENOSYS) return n;
    g_no_pwait2.store(true, std::memory_order_relaxed);
  }
  // epoll_pwait2's own check: epoll_pwait would take a negative count as no limit.
  if (timeout != nullptr && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1000000000)) {
    errno = EINVAL;
    return -1;
  }
  return real.epoll_pwait(epfd, events, max, epoll_timeout_ms(timeout), mask);
}

}  // namespace vsock::sock
