// UpgradeAccept: the private data of the server's rdma_accept
// (docs/protocol.md section 1): the echoed nonce and the server's receive
// ring, into which the client will write once it has switched.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"
#include "rdma/remote_ring.hpp"

namespace vsock::sock::wire {

inline constexpr size_t kUpgradeAcceptSize = 32;

// UpgradeAccept flag bits (byte 5). Unknown bits are kept and ignored.
// kAcceptFlagBound: the server's application has accept()ed the socket
// already, so Bound follows ESTABLISHED at once: a blocking connect()
// waits for it (bounded), and the client's first bytes go on the ring.
inline constexpr uint8_t kAcceptFlagBound = 0x01;

struct UpgradeAccept {
  uint64_t nonce = 0;
  rdma::RingDescriptor ring;  // the server's receive ring
  uint8_t flags = 0;
};

bool operator==(const UpgradeAccept& a, const UpgradeAccept& b);
inline bool operator!=(const UpgradeAccept& a, const UpgradeAccept& b) { return !(a == b); }

// Writes the 32 wire bytes. The ring is not validated here: it is our own.
void encode(const UpgradeAccept& accept, uint8_t out[kUpgradeAcceptSize]);

// Reads an accept from `len` bytes of private data; bytes past
// kUpgradeAcceptSize are ignored (the CM pads a REP to 196 bytes), fewer
// are EPROTO. EPROTO also for: a magic other than "VSK1", a version other
// than 1, nonzero reserved bytes (6 and 7; byte 5 holds the flags), a ring
// rdma::RemoteRing::create refuses.
// Whether the nonce is the one sent is the caller's check.
core::Result<UpgradeAccept> parse_upgrade_accept(const void* data, size_t len);

}  // namespace vsock::sock::wire
