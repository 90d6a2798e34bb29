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
// And where the client may switch: `tcp_read`, the client's TCP bytes the
// server had read when it sent this Bound, with nothing more waiting in its
// kernel socket. The client switches only when it has written exactly that
// many, so its token is the next byte on TCP for whichever process reads
// the socket next (§2, "Where the client switches"). The server sends
// Bound again, same token, each time it has caught up at a new count, until
// the client's Switch comes.
//
// The 16-byte message header (magic "VSKB", version, nonce), the token,
// then tcp_read (8 bytes, big-endian).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"

namespace vsock::sock::wire {

inline constexpr size_t kSwitchTokenSize = 16;
inline constexpr size_t kBoundMessageSize = 16 + kSwitchTokenSize + 8;

struct BoundMessage {
  uint64_t nonce = 0;
  uint8_t token[kSwitchTokenSize] = {};
  uint64_t tcp_read = 0;
};

void encode(const BoundMessage& message, uint8_t out[kBoundMessageSize]);

// A Bound received in a SEND of `len` bytes; bytes past it are ignored.
// EPROTO for fewer bytes, another magic, another version or nonzero
// reserved bytes. (The token and the count are any values: the client
// checks the count against what it wrote.)
core::Result<BoundMessage> parse_bound_message(const void* data, size_t len);

}  // namespace vsock::sock::wire
