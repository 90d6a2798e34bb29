#include "sock/stream/stream_send_queue.hpp"

#include <cerrno>

namespace vsock::sock {

SendQueueTracker::SendQueueTracker(uint32_t depth, uint32_t signal_every, bool keep_one_signaled, uint32_t reserve)
    : depth_(depth > 0 ? depth : 1),
      signal_every_(signal_every > 0 ? signal_every : 1),
      reserve_(reserve < depth_ ? reserve : depth_ - 1),
      keep_one_signaled_(keep_one_signaled) {}

bool SendQueueTracker::next_signaled(bool force) const {
  if (force) return true;
  if (unsignaled_run_ + 1 >= signal_every_) return true;
  if (outstanding() + 1 >= depth_ - reserve_) return true;
  return keep_one_signaled_ && signaled_outstanding_ == 0;
}

uint64_t SendQueueTracker::on_posted(bool signaled) {
  uint64_t sequence = posted_++;
  if (signaled) {
    ++signaled_outstanding_;
    unsignaled_run_ = 0;
  } else {
    ++unsignaled_run_;
  }
  return sequence;
}

core::Result<bool> SendQueueTracker::on_completed(uint64_t sequence) {
  if (sequence < completed_ || sequence >= posted_ || signaled_outstanding_ == 0)
    return core::Result<bool>::fail(EINVAL);
  completed_ = sequence + 1;
  --signaled_outstanding_;
  return core::Result<bool>::ok(true);
}

}  // namespace vsock::sock
