// Revert: the last SEND a side posts on the queue pair, when it hands the
// connection to another process (fork, vfork, SCM_RIGHTS: docs/protocol.md
// section 5). From then on that side reads and writes only the kernel TCP
// socket. It says how many bytes it wrote into the peer's ring in all (the
// peer reads its ring up to there, then TCP again) and how many of the
// peer's ring bytes its application consumed (the peer writes the rest
// again, on TCP: the ring that held them is given up).
// Layout: the 16-byte message header ("VSKR"), then the two counts.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"

namespace vsock::sock::wire {

inline constexpr size_t kRevertMessageSize = 32;

struct RevertMessage {
  uint64_t nonce = 0;          // the request's nonce
  uint64_t ring_written = 0;   // bytes the sender wrote into the peer's ring, in all
  uint64_t ring_consumed = 0;  // bytes of the peer's ring stream the sender's application read
};

bool operator==(const RevertMessage& a, const RevertMessage& b);

void encode(const RevertMessage& message, uint8_t out[kRevertMessageSize]);

// Reads a Revert from a received SEND of `len` bytes; bytes past
// kRevertMessageSize are ignored, fewer are EPROTO. EPROTO also for a magic
// other than "VSKR", a version other than 1 or nonzero reserved bytes. Any
// counts parse: only the receiver, which knows what it wrote and read, can
// tell whether they are plausible; the nonce is the caller's check too.
core::Result<RevertMessage> parse_revert_message(const void* data, size_t len);

}  // namespace vsock::sock::wire
