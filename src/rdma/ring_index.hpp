// RingIndex: the byte arithmetic of a ring buffer, and nothing else (no
// memory, no device), so that every bound can be unit-tested.
//
// Positions are free-running 64-bit byte counters: `tail` counts bytes ever
// produced, `head` bytes ever consumed. used = tail - head is right across
// counter wrap-around (unsigned arithmetic), a full ring and an empty one
// are never confused, and offset = position & (capacity - 1) because the
// capacity is a power of two.
#pragma once
#include <cstdint>

#include "core/result.hpp"
#include "rdma/status.hpp"

namespace vsock::rdma {

// A contiguous piece of the ring: offset from the ring's start and length.
struct RingSpan {
  uint64_t offset = 0;
  uint64_t length = 0;
};

// A range of the ring is at most two pieces: up to the end, then from the
// start. `second.length` is 0 when the range does not wrap.
struct RingSpans {
  RingSpan first;
  RingSpan second;
  uint64_t total() const { return first.length + second.length; }
};

class RingIndex {
 public:
  // Immediate data is 32 bits wide and carries lengths: a ring may not be
  // larger than what one immediate can describe.
  static constexpr uint64_t kMaxCapacity = uint64_t{1} << 31;

  // `capacity` must be a power of two in [1, kMaxCapacity] (else EINVAL).
  // `start` is the initial head = tail; both sides of a ring may agree on any.
  static core::Result<RingIndex> create(uint64_t capacity, uint64_t start = 0);
  // The same head and tail over another capacity (a ring that grew: every
  // position keeps its meaning, its offset follows the new capacity).
  // EINVAL for a bad capacity, ERANGE if the bytes in use do not fit.
  core::Result<RingIndex> resized(uint64_t capacity) const;

  RingIndex() = default;  // capacity 0: every request fails

  uint64_t capacity() const { return capacity_; }
  uint64_t head() const { return head_; }
  uint64_t tail() const { return tail_; }
  uint64_t used() const { return tail_ - head_; }
  uint64_t space() const { return capacity_ - used(); }
  bool empty() const { return used() == 0; }
  bool full() const { return capacity_ != 0 && used() == capacity_; }
  uint64_t offset_of(uint64_t position) const { return position & mask_; }

  // Where the next `length` bytes at the tail go. EMSGSIZE if they can never
  // fit (length > capacity); EAGAIN if they do not fit now (wait for the
  // consumer). Does not move the tail: produce() does.
  core::Result<RingSpans> writable(uint64_t length) const;
  // Where the oldest `length` bytes at the head are; ERANGE if fewer are used.
  core::Result<RingSpans> readable(uint64_t length) const;
  // Everything between head and tail.
  RingSpans readable_all() const;

  // tail += length; ERANGE (and no change) if length > space().
  Status produce(uint64_t length);
  // head += length; ERANGE (and no change) if length > used().
  Status consume(uint64_t length);

  // Whether [offset, offset + length) lies inside the ring, without overflow.
  bool contains(uint64_t offset, uint64_t length) const;

 private:
  RingIndex(uint64_t capacity, uint64_t start) : capacity_(capacity), mask_(capacity - 1), head_(start), tail_(start) {}
  RingSpans spans_at(uint64_t position, uint64_t length) const;

  uint64_t capacity_ = 0;
  uint64_t mask_ = 0;
  uint64_t head_ = 0;
  uint64_t tail_ = 0;
};

}  // namespace vsock::rdma
