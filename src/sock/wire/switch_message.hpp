// Switch: the one two-sided SEND each side posts when it stops writing on
// TCP (docs/protocol.md section 2). It says how many bytes this side wrote
// on TCP in all, so the reader knows where the TCP stream ends and the ring
// begins, and it names the sender's own receive ring.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"
#include "rdma/remote_ring.hpp"

namespace vsock::sock::wire {

inline constexpr size_t kSwitchMessageSize = 40;

struct SwitchMessage {
  uint64_t nonce = 0;         // the request's nonce
  uint64_t tcp_bytes = 0;     // bytes the sender wrote on TCP since connect
  rdma::RingDescriptor ring;  // the sender's receive ring
};

bool operator==(const SwitchMessage& a, const SwitchMessage& b);
inline bool operator!=(const SwitchMessage& a, const SwitchMessage& b) { return !(a == b); }

// Writes the 40 wire bytes. The ring is not validated here: it is our own.
void encode(const SwitchMessage& message, uint8_t out[kSwitchMessageSize]);

// Reads a Switch from a received SEND of `len` bytes; bytes past
// kSwitchMessageSize are ignored, fewer are EPROTO. EPROTO also for: a magic
// other than "VSKS", a version other than 1, nonzero reserved bytes, a ring
// rdma::RemoteRing::create refuses. Any tcp_bytes parses: only the reader,
// which counts what it has received, can tell whether it is plausible; the
// nonce is the caller's check too.
core::Result<SwitchMessage> parse_switch_message(const void* data, size_t len);

}  // namespace vsock::sock::wire
