#include "sock/stream/stream_credit.hpp"

#include "sock/stream/stream_immediate.hpp"

namespace vsock::sock {

CreditReturn::CreditReturn(uint64_t ring_capacity)
    : capacity_(ring_capacity), threshold_(ring_capacity / 4 > 0 ? ring_capacity / 4 : 1) {}

void CreditReturn::grow_to(uint64_t ring_capacity) {
  capacity_ = ring_capacity;
  threshold_ = ring_capacity / 4 > 0 ? ring_capacity / 4 : 1;
}

uint64_t CreditReturn::due() const {
  if (unreported_ == 0) return 0;
  if (unreported_ < threshold_ && !writer_may_be_stalled_) return 0;
  return unreported_ < kImmediateValueMax ? unreported_ : kImmediateValueMax;
}

void CreditReturn::on_returned(uint64_t bytes) {
  if (bytes > unreported_) bytes = unreported_;
  unreported_ -= bytes;
  returned_ += bytes;
  // The writer now has room for new writes; if they fill the ring again,
  // on_ring_full() says so again.
  writer_may_be_stalled_ = false;
}

}  // namespace vsock::sock
