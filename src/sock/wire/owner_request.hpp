// The request a fork() child sends to the process that owns a connection's
// RDMA path (docs/protocol.md §5.2), and its one-byte answer. A child that
// inherited a switched socket and uses it for the first time asks the owner
// to hand the connection back to TCP; it goes on on the kernel socket once
// answered. Local (a Unix socket between the two processes), but any local
// process of the same user could write it: parsed like peer data.
// Layout: the 16-byte message header ("VSKO", version, nonce), nothing more.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"

namespace vsock::sock::wire {

inline constexpr size_t kOwnerRequestSize = 16;

struct OwnerRequest {
  uint64_t nonce = 0;  // the connection's nonce (both ends and every fork child know it)
};

enum class OwnerAnswer : uint8_t {
  kOnTcp = 1,    // the connection went back to TCP (or was there already)
  kReset = 2,    // it could not go back byte-exact: the TCP connection was reset
  kNotHere = 3,  // the owner has no switched connection with this nonce (closed, or on TCP)
};

void encode(const OwnerRequest& request, uint8_t out[kOwnerRequestSize]);

// EPROTO unless `len` is exactly kOwnerRequestSize with the "VSKO" header
// of our version and a nonzero nonce (a seqpacket read is one message).
core::Result<OwnerRequest> parse_owner_request(const void* data, size_t len);

// EPROTO unless `len` is 1 and the byte is an OwnerAnswer.
core::Result<OwnerAnswer> parse_owner_answer(const void* data, size_t len);

}  // namespace vsock::sock::wire
