// Where each fragment of a datagram sits (docs/protocol.md section 6). The
// header carries only the datagram's total length, the fragment count and
// the fragment's index; the offset and length follow from those three, so
// a receiver never trusts an offset the sender wrote, and two fragments of
// one datagram can only overlap by having the same index.
//
// The rule: a datagram of `total` bytes in `count` fragments is cut as
// evenly as it can be: every fragment holds total / count bytes, and the
// first total % count of them one byte more. So no fragment is empty
// (count <= total), except the one fragment of an empty datagram, and no
// fragment is longer than the longest a sender with any payload budget
// b >= ceil(total / count) could post.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"

namespace vsock::sock::wire {

// The largest UDP payload over IPv4 (65,535 - 20 IP - 8 UDP): what a kernel
// UDP socket accepts, so what a datagram on UD may hold.
inline constexpr uint32_t kMaxDatagramSize = 65507;

// The most fragments one datagram may have. The smallest path MTU of IB and
// RoCE is 256 bytes, which leaves 216 payload bytes after the 40-byte
// header: the largest datagram then needs 304 fragments. 512 leaves room
// for a budget down to 128 bytes and keeps a reassembler's per-datagram
// bookkeeping small.
inline constexpr uint32_t kMaxDatagramFragments = 512;

struct FragmentSpan {
  uint32_t offset = 0;  // where the fragment's payload starts in the datagram
  uint32_t length = 0;  // its payload bytes
};

// True if a datagram of `total` bytes may be sent in `count` fragments:
// total <= kMaxDatagramSize, 1 <= count <= kMaxDatagramFragments, and
// count <= total unless the datagram is empty (count 1).
bool fragment_layout_valid(uint32_t total, uint32_t count);

// The span of fragment `index`; EPROTO unless the layout is valid and
// index < count.
core::Result<FragmentSpan> fragment_span(uint32_t total, uint32_t count, uint32_t index);

}  // namespace vsock::sock::wire
