#include "sock/blocking_mode.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "core/clock.hpp"
#include "sock/socket_state.hpp"
#include "sys/real_calls.hpp"

namespace vsock::sock {
namespace {

// SO_RCVTIMEO / SO_SNDTIMEO in ms as the kernel rounds a blocking wait, 0
// when unset (or when the kernel will not say).
int64_t timeout_option_ms(int fd, int option) {
  timeval tv{};
  socklen_t len = sizeof tv;
  if (sys::real().getsockopt(fd, SOL_SOCKET, option, &tv, &len) != 0) return 0;
  return static_cast<int64_t>(tv.tv_sec) * 1000 + (tv.tv_usec + 999) / 1000;
}

}  // namespace

void BlockingMode::assume(const std::atomic<uint8_t>& known_mode) {
  // Epochs before the bits: a change that clears a bit after this load
  // bumps the epoch after it too, and the next reader asks the kernel.
  const uint32_t flags_epoch = flags_epoch_.load(std::memory_order_seq_cst);
  const uint32_t timeouts_epoch = timeouts_epoch_.load(std::memory_order_seq_cst);
  const uint8_t mode = known_mode.load(std::memory_order_seq_cst);
  if (mode & kModeFlagsKnown) {
    nonblocking_ = (mode & kModeNonblocking) != 0;
    flags_seen_ = flags_epoch;
    flags_known_ = true;
  }
  if (mode & kModeTimeoutsZero) {
    receive_timeout_ms_ = 0;
    send_timeout_ms_ = 0;
    timeouts_seen_ = timeouts_epoch;
    timeouts_known_ = true;
  }
}

bool BlockingMode::nonblocking(int fd) {
  // The epoch is read before the kernel is asked: a change that lands
  // after this load bumps the epoch again, and the next call asks anew.
  const uint32_t epoch = flags_epoch_.load(std::memory_order_acquire);
  if (flags_known_ && flags_seen_ == epoch) return nonblocking_;
  int flags = sys::real().fcntl(fd, F_GETFL, nullptr);
  if (flags < 0) return false;  // not cached: the next call asks again
  nonblocking_ = (flags & O_NONBLOCK) != 0;
  flags_seen_ = epoch;
  flags_known_ = true;
  return nonblocking_;
}

int64_t BlockingMode::deadline_ms(int fd, bool receive) {
  const uint32_t epoch = timeouts_epoch_.load(std::memory_order_acquire);
  if (!timeouts_known_ || timeouts_seen_ != epoch) {
    receive_timeout_ms_ = timeout_option_ms(fd, SO_RCVTIMEO);
    send_timeout_ms_ = timeout_option_ms(fd, SO_SNDTIMEO);
    timeouts_seen_ = epoch;
    timeouts_known_ = true;
  }
  const int64_t timeout = receive ? receive_timeout_ms_ : send_timeout_ms_;
  return timeout == 0 ? -1 : core::monotonic_ms() + timeout;
}

}  // namespace vsock::sock
