#include "sock/wait/wait_sleep.hpp"

#include "core/clock.hpp"
#include "sys/real_calls.hpp"

namespace vsock::sock {

bool valid_timeout(const timespec* timeout) {
  return timeout == nullptr || (timeout->tv_sec >= 0 && timeout->tv_nsec >= 0 && timeout->tv_nsec < 1000000000L);
}

int64_t wait_deadline(const timespec* timeout) {
  if (timeout == nullptr) return -1;
  return core::monotonic_ms() + timeout->tv_sec * 1000 + (timeout->tv_nsec + 999999) / 1000000;
}

bool wait_expired(int64_t deadline) { return deadline >= 0 && core::monotonic_ms() >= deadline; }

void SleepSet::add_socket(ManagedSocket* socket, int fd, short events) {
  pollfd wake[ManagedSocket::kMaxWakeFds];
  int slice_ms = -1;
  int count = socket->wake_fds(fd, events, wake, &slice_ms);
  fds_.insert(fds_.end(), wake, wake + count);
  limit_slice(slice_ms);
}

int SleepSet::sleep(int64_t deadline, const sigset_t* mask) {
  int64_t ms = slice_ms_;
  if (deadline >= 0) {
    int64_t left = deadline - core::monotonic_ms();
    if (left < 0) left = 0;
    if (ms < 0 || left < ms) ms = left;
  }
  timespec pause{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000};
  return sys::real().ppoll(fds_.data(), fds_.size(), ms < 0 ? nullptr : &pause, mask);
}

}  // namespace vsock::sock
