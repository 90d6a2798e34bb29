// ReceiveRing: the registered ring a peer writes a stream into with RDMA
// WRITE (WITH IMMEDIATE). The only memory the library exposes to a peer:
// registered for remote write alone, deregistered with the ring.
//
// Flow: hand descriptor() to the peer; for each immediate the peer sends,
// on_peer_write(length) checks and accepts the bytes; read() (or readable()
// and consume()) hands them to the application; the consumed count goes
// back to the peer as credit (RemoteRing::on_credit on its side).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"
#include "rdma/memory_region.hpp"
#include "rdma/protection_domain.hpp"
#include "rdma/remote_ring.hpp"
#include "rdma/ring_index.hpp"
#include "rdma/status.hpp"

namespace vsock::rdma {

class ReceiveRing {
 public:
  // `capacity` must be a power of two, a multiple of the page size and at
  // most RingIndex::kMaxCapacity, so that the region is exactly the ring and
  // a peer's write can land nowhere else (EINVAL otherwise).
  static core::Result<ReceiveRing> create(const ProtectionDomain& pd, uint64_t capacity);

  ReceiveRing() = default;
  ReceiveRing(ReceiveRing&&) noexcept = default;
  ReceiveRing& operator=(ReceiveRing&&) noexcept = default;

  bool valid() const { return memory_.valid(); }
  RingDescriptor descriptor() const;
  const RingIndex& index() const { return index_; }
  uint64_t capacity() const { return index_.capacity(); }
  uint64_t available() const { return index_.used(); }
  const uint8_t* data() const { return memory_.data(); }
  const MemoryRegion& memory() const { return memory_; }

  // The peer says (in an immediate) that it wrote `length` more bytes at the
  // tail. EPROTO, and nothing accepted, if that exceeds the room it had: the
  // peer broke the credit protocol.
  Status on_peer_write(uint64_t length);
  // The bytes ready to read, as offsets into data().
  RingSpans readable() const { return index_.readable_all(); }
  Status consume(uint64_t length) { return index_.consume(length); }
  // Copies up to `max` bytes from the head into `out` and consumes them.
  // Returns how many were copied (0 when the ring is empty).
  size_t read(void* out, size_t max);
  // This (new, larger) ring takes over from `old`, whose writer has moved
  // here (docs/protocol.md §3.1): the same head and tail, and old's unread
  // bytes copied to their positions here. ERANGE if they do not fit.
  Status take_unread_from(const ReceiveRing& old);
  // The ring carries a new stream (a parked channel's next connection):
  // empty, positions from 0. Its memory and registration stay.
  void restart() { index_ = RingIndex::create(index_.capacity()).value(); }

 private:
  MemoryRegion memory_;
  RingIndex index_;
};

}  // namespace vsock::rdma
