// The private data of a UDP resolution (docs/protocol.md section 6.1): a
// SIDR request in rdma_cm's RDMA_PS_UDP to the destination's port, and the
// answer of the library that listens there. The request proves nothing and
// asks nothing but "is a libvsock socket here?" (magic, version, a nonce to
// echo); the answer names that socket's cookie. The UD QP number and qkey
// travel in SIDR's own fields, not here.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"

namespace vsock::sock::wire {

inline constexpr size_t kResolveRequestSize = 16;
inline constexpr size_t kResolveAnswerSize = 24;

struct ResolveRequest {
  uint64_t nonce = 0;
};

struct ResolveAnswer {
  uint64_t nonce = 0;   // the request's, echoed
  uint64_t cookie = 0;  // the socket bound to the port (never 0)
};

void encode(const ResolveRequest& request, uint8_t out[kResolveRequestSize]);
void encode(const ResolveAnswer& answer, uint8_t out[kResolveAnswerSize]);

// Each reads its message from `len` bytes of private data; bytes past the
// message are ignored (the CM pads to its field's size), fewer are EPROTO.
// EPROTO also for a magic other than "VSKU", a version other than 1,
// nonzero reserved bytes, and (answer) a cookie of 0. Whether the nonce is
// the one sent is the caller's check.
core::Result<ResolveRequest> parse_resolve_request(const void* data, size_t len);
core::Result<ResolveAnswer> parse_resolve_answer(const void* data, size_t len);

}  // namespace vsock::sock::wire
