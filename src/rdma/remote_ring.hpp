// RemoteRing: the sender's view of the ring its peer registered for it.
//
// The sender knows the ring's address, rkey and capacity (a RingDescriptor
// from the peer) and keeps its own RingIndex over it: the tail is what it
// has written, the head what the peer has said it consumed (credits). No
// memory and no device here either: the sender posts the RDMA WRITEs this
// class plans.
#pragma once
#include <cstdint>

#include "core/result.hpp"
#include "rdma/ring_index.hpp"
#include "rdma/status.hpp"

namespace vsock::rdma {

// What a receiver hands its peer so that the peer can write into its ring.
struct RingDescriptor {
  uint64_t address = 0;
  uint32_t rkey = 0;
  uint32_t capacity = 0;
};

// A piece of a planned write: where in the peer's memory, how long.
struct RemoteSpan {
  uint64_t address = 0;
  uint64_t length = 0;
};

struct RemoteWrite {
  RemoteSpan first;
  RemoteSpan second;  // length 0 unless the write wraps to the ring's start
};

class RemoteRing {
 public:
  // Validates a descriptor that came from the peer: EPROTO unless the
  // capacity is a power of two within RingIndex::kMaxCapacity and the ring
  // does not wrap the address space.
  static core::Result<RemoteRing> create(const RingDescriptor& peer);
  // The peer's larger ring (docs/protocol.md §3.1), validated as create()
  // does, with this ring's head and tail: every byte from the tail on goes
  // there. EPROTO if it is invalid or not larger.
  core::Result<RemoteRing> moved_to(const RingDescriptor& bigger) const;

  RemoteRing() = default;

  uint32_t rkey() const { return rkey_; }
  uint64_t capacity() const { return index_.capacity(); }
  uint64_t space() const { return index_.space(); }
  uint64_t in_flight() const { return index_.used(); }
  const RingIndex& index() const { return index_; }

  // Where the next `length` bytes go in the peer's memory (one piece, or two
  // when they wrap). EAGAIN: not enough credit now; EMSGSIZE: never fits.
  core::Result<RemoteWrite> plan(uint64_t length) const;
  // The planned bytes have been posted: move the tail.
  Status commit(uint64_t length);
  // The peer consumed `length` more bytes. EPROTO if that is more than is in
  // flight: a peer that says so is broken or hostile, and the connection
  // must be reset.
  Status on_credit(uint64_t length);

 private:
  uint64_t base_ = 0;
  uint32_t rkey_ = 0;
  RingIndex index_;
};

}  // namespace vsock::rdma
