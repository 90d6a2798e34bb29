// UpgradeRequest: the private data of the client's rdma_cm connect request
// (docs/protocol.md section 1). It names the TCP connection to upgrade, as
// the client sees it, and carries the client's nonce.
#pragma once
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

#include "core/result.hpp"
#include "sock/wire/endpoint.hpp"

namespace vsock::sock::wire {

// 56 bytes, exactly the private data a TCP-port-space connect request can
// carry.
inline constexpr size_t kUpgradeRequestSize = 56;

// The client has written on TCP already: it asks again after a Reject of
// reason kAfterData (reject_message.hpp).
inline constexpr uint16_t kRequestFlagAfterData = 1;

struct UpgradeRequest {
  uint8_t family = 0;   // kFamilyIpv4 or kFamilyIpv6, for both endpoints
  uint16_t flags = 0;   // kRequestFlag*; unknown bits kept as received
  Endpoint client;      // the client's getsockname()
  Endpoint server;      // the client's getpeername()
  uint64_t nonce = 0;
};

bool operator==(const UpgradeRequest& a, const UpgradeRequest& b);
inline bool operator!=(const UpgradeRequest& a, const UpgradeRequest& b) { return !(a == b); }

// Writes the 56 wire bytes. No validation: a request from
// build_upgrade_request() always parses; for family 4 only the first 4
// address bytes are written, the rest are zero.
void encode(const UpgradeRequest& request, uint8_t out[kUpgradeRequestSize]);

// Reads a request from `len` bytes of private data. rdma_cm may deliver more
// than was sent (the CM pads it), so bytes past kUpgradeRequestSize are
// ignored; fewer are EPROTO. EPROTO also for: a magic other than "VSK1", a
// version other than 1, a family other than 4 or 6, a port 0, nonzero bytes
// in the reserved field or in the unused 12 bytes of an IPv4 address.
// Unknown flag bits are accepted (and kept): they are how a later version
// extends the request without breaking this one.
core::Result<UpgradeRequest> parse_upgrade_request(const void* data, size_t len);

// The client's side: the request for a connected socket, from its
// getsockname() (client) and getpeername() (server) results. IPv4-mapped
// IPv6 addresses become family 4. EINVAL for a short sockaddr, a port 0, or
// endpoints of different families; EAFNOSUPPORT for a non-IP family.
core::Result<UpgradeRequest> build_upgrade_request(const sockaddr* client, socklen_t client_len,
                                                   const sockaddr* server, socklen_t server_len, uint64_t nonce);

// The server's side: whether the request names the kernel connection whose
// getsockname() is `local` and getpeername() is `peer` (the server's local
// end is the client's server end). Compares canonical forms, so IPv4-mapped
// addresses on either side match plain IPv4 ones. False for any sockaddr
// that cannot be read.
bool upgrade_request_matches(const UpgradeRequest& request, const sockaddr* local, socklen_t local_len,
                             const sockaddr* peer, socklen_t peer_len);

}  // namespace vsock::sock::wire
