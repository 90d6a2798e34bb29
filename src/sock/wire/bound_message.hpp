// Bound: the server's first SEND on the queue pair (docs/protocol.md
// section 2). It says that the server's application has accept()ed the TCP
// connection the upgrade is for, so the connection's reader is a process
// that will read the ring. Until it arrives the client writes on TCP and may
// still fall back: a request answered while its connection waited in the
// kernel's backlog may be for a socket another process accepts (a forked
// worker sharing the listener), whose library never learns of the upgrade.
//
// It also carries the server's token: 16 random bytes that the client
// writes on TCP right after its switch point once its Switch is delivered.
// Only the TCP connection's real client can put them there, so the server
// takes nothing from the queue pair until it found them (§2, "Who may
// switch"): a request forged for somebody else's connection gets nowhere.
//
// The 16-byte message header (magic "VSKB", version, nonce), then the token.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"

namespace vsock::sock::wire {

inline constexpr size_t kSwitchTokenSize = 16;
inline constexpr size_t kBoundMessageSize = 16 + kSwitchTokenSize;

struct BoundMessage {
  uint64_t nonce = 0;
  uint8_t token[kSwitchTokenSize] = {};
};

void encode(const BoundMessage& message, uint8_t out[kBoundMessageSize]);

// A Bound received in a SEND of `len` bytes; bytes past it are ignored.
// EPROTO for fewer bytes, another magic, another version or nonzero
// reserved bytes. (The token is any 16 bytes.)
core::Result<BoundMessage> parse_bound_message(const void* data, size_t len);

}  // namespace vsock::sock::wire
