// RingGrow and RingMoved: ring growth of the stream data path (docs/protocol.md
// section 3.1). A receive ring starts small and grows with the connection's
// traffic. The receiver of a direction registers a larger ring and sends
// RingGrow naming it. The writer copies the bytes it has not had credited
// into a larger send mirror and answers RingMoved{accepted, position = the
// ring tail it had posted}, in order after the DATA before it; every later
// byte it writes into the new ring, at position mod the new capacity. Or it
// refuses (accepted = false, position 0) and stays on the old ring. The
// receiver copies its unread bytes [head, position) into the new ring and
// drops the old one when RingMoved arrives.
// RingGrow: magic "VSKG" (4), version (1), reserved zero (3), the ring (16).
// RingMoved: magic "VSKM" (4), version (1), flags (1), reserved zero (2),
// position (8). All big-endian.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"
#include "rdma/remote_ring.hpp"

namespace vsock::sock::wire {

inline constexpr size_t kRingGrowMessageSize = 24;
inline constexpr size_t kRingMovedMessageSize = 16;

// RingMoved flags: bit 0, the writer moves to the new ring. Other bits are
// reserved (zero).
inline constexpr uint8_t kRingMovedAccepted = 0x01;

struct RingGrowMessage {
  rdma::RingDescriptor ring;  // the receiver's new, larger receive ring
};

bool operator==(const RingGrowMessage& a, const RingGrowMessage& b);

struct RingMovedMessage {
  bool accepted = false;  // the writer moves to the offered ring
  uint64_t position = 0;  // stream position (bytes written into this direction
                          // in all) from which it writes into the new ring
};

bool operator==(const RingMovedMessage& a, const RingMovedMessage& b);

// Writes the 24 wire bytes. The ring is not validated here: it is our own.
void encode(const RingGrowMessage& message, uint8_t out[kRingGrowMessageSize]);

// Reads a RingGrow from a received SEND of `len` bytes; bytes past
// kRingGrowMessageSize are ignored, fewer are EPROTO. EPROTO also for a
// magic other than "VSKG", a version other than 1, nonzero reserved bytes
// or a ring parse_ring refuses.
core::Result<RingGrowMessage> parse_ring_grow(const void* data, size_t len);

// Writes the 16 wire bytes.
void encode(const RingMovedMessage& message, uint8_t out[kRingMovedMessageSize]);

// Reads a RingMoved from a received SEND of `len` bytes; bytes past
// kRingMovedMessageSize are ignored, fewer are EPROTO. EPROTO also for a
// magic other than "VSKM", a version other than 1, unknown flag bits,
// nonzero reserved bytes, or a refusal whose position is not 0. Any
// position of an acceptance parses: only the receiver, which knows its
// ring's head and what it has received, can tell whether it is plausible.
core::Result<RingMovedMessage> parse_ring_moved(const void* data, size_t len);

// True when `len` >= 4 and the first 4 bytes are the magic of RingGrow or
// RingMoved: the stream channel takes these messages itself instead of
// passing them to the socket layer. Says nothing of whether they parse.
bool is_ring_resize_message(const void* data, size_t len);

}  // namespace vsock::sock::wire
