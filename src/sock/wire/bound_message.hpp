// Bound: the server's first SEND on the queue pair (docs/protocol.md
// section 2). It says that the server's application has accept()ed the TCP
// connection the upgrade is for, so the connection's reader is a process
// that will read the ring. Until it arrives the client writes on TCP and may
// still fall back: a request answered while its connection waited in the
// kernel's backlog may be for a socket another process accepts (a forked
// worker sharing the listener), whose library never learns of the upgrade.
// Only the 16-byte message header: magic "VSKB", version, nonce.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"

namespace vsock::sock::wire {

inline constexpr size_t kBoundMessageSize = 16;

void encode_bound(uint64_t nonce, uint8_t out[kBoundMessageSize]);

// The nonce of a Bound received in a SEND of `len` bytes; bytes past the
// header are ignored. EPROTO for fewer bytes, another magic, another
// version or nonzero reserved bytes.
core::Result<uint64_t> parse_bound_message(const void* data, size_t len);

}  // namespace vsock::sock::wire
