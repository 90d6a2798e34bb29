// The 16-byte ring descriptor that UpgradeAccept and Switch both carry:
// address (8), rkey (4), capacity (4), big-endian.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"
#include "rdma/remote_ring.hpp"

namespace vsock::sock::wire {

inline constexpr size_t kRingFieldSize = 16;

void encode_ring(const rdma::RingDescriptor& ring, uint8_t* out);

// Reads a descriptor and validates it with rdma::RemoteRing::create, the
// same rules the sender applies before it writes a byte (capacity a power of
// two, at most 2^31; address + capacity inside the 64-bit address space),
// so a descriptor that parses is always one a RemoteRing accepts. EPROTO
// otherwise.
core::Result<rdma::RingDescriptor> parse_ring(const uint8_t* in);

// Field-by-field equality (RingDescriptor itself has no operator==).
bool same_ring(const rdma::RingDescriptor& a, const rdma::RingDescriptor& b);

}  // namespace vsock::sock::wire
