#include "rdma/ring_index.hpp"

#include <cerrno>

namespace vsock::rdma {

core::Result<RingIndex> RingIndex::create(uint64_t capacity, uint64_t start) {
  bool power_of_two = capacity != 0 && (capacity & (capacity - 1)) == 0;
  if (!power_of_two || capacity > kMaxCapacity) return core::Result<RingIndex>::fail(EINVAL);
  return core::Result<RingIndex>::ok(RingIndex(capacity, start));
}

// Splits [position, position + length) at the end of the ring. The caller
// guarantees length <= capacity, so there are at most two pieces.
RingSpans RingIndex::spans_at(uint64_t position, uint64_t length) const {
  RingSpans spans;
  if (length == 0) return spans;
  uint64_t offset = offset_of(position);
  uint64_t to_end = capacity_ - offset;
  spans.first = {offset, length < to_end ? length : to_end};
  if (length > to_end) spans.second = {0, length - to_end};
  return spans;
}

core::Result<RingIndex> RingIndex::resized(uint64_t capacity) const {
  core::Result<RingIndex> bigger = create(capacity, head_);
  if (!bigger) return bigger;
  if (used() > capacity) return core::Result<RingIndex>::fail(ERANGE);
  bigger.value().tail_ = tail_;
  return bigger;
}

core::Result<RingSpans> RingIndex::writable(uint64_t length) const {
  if (length > capacity_) return core::Result<RingSpans>::fail(EMSGSIZE);
  if (length > space()) return core::Result<RingSpans>::fail(EAGAIN);
  return core::Result<RingSpans>::ok(spans_at(tail_, length));
}

core::Result<RingSpans> RingIndex::readable(uint64_t length) const {
  if (length > used()) return core::Result<RingSpans>::fail(ERANGE);
  return core::Result<RingSpans>::ok(spans_at(head_, length));
}

RingSpans RingIndex::readable_all() const { return spans_at(head_, used()); }

Status RingIndex::produce(uint64_t length) {
  if (length > space()) return Status::fail(ERANGE);
  tail_ += length;
  return ok_status();
}

Status RingIndex::consume(uint64_t length) {
  if (length > used()) return Status::fail(ERANGE);
  head_ += length;
  return ok_status();
}

bool RingIndex::contains(uint64_t offset, uint64_t length) const {
  // offset < capacity first, so capacity - offset cannot underflow.
  return offset < capacity_ && length <= capacity_ - offset;
}

}  // namespace vsock::rdma
