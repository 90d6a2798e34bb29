// One end of a TCP connection in the form the wire carries it, and the
// conversions from and to the kernel's sockaddrs.
//
// An IPv4 connection has one wire form whatever the socket's family: an
// AF_INET6 socket talking to an IPv4 peer sees IPv4-mapped addresses
// (::ffff:a.b.c.d), and those reduce to family 4. So a client on a
// dual-stack socket and a server on an AF_INET one (or the other way round)
// describe the same connection with the same bytes. The IPv6 scope id and
// flow label are not carried: a TCP 4-tuple is unique without them.
#pragma once
#include <sys/socket.h>

#include <cstdint>

#include "core/result.hpp"

namespace vsock::sock::wire {

// The family byte of the wire (not an AF_* value).
inline constexpr uint8_t kFamilyIpv4 = 4;
inline constexpr uint8_t kFamilyIpv6 = 6;

// Address bytes (network order; IPv4 uses the first 4, the rest are zero)
// and the port in host order.
struct Endpoint {
  uint8_t ip[16] = {};
  uint16_t port = 0;
};

bool operator==(const Endpoint& a, const Endpoint& b);
inline bool operator!=(const Endpoint& a, const Endpoint& b) { return !(a == b); }

// An endpoint together with its family, as read from one sockaddr.
struct FamilyEndpoint {
  uint8_t family = 0;
  Endpoint endpoint;
};

// Reduces a sockaddr (from getsockname/getpeername) to wire form, mapping
// IPv4-mapped IPv6 addresses to family 4. EINVAL if addr is null or len is
// shorter than its family's sockaddr; EAFNOSUPPORT for other families.
core::Result<FamilyEndpoint> endpoint_from_sockaddr(const sockaddr* addr, socklen_t len);

// The reverse: writes a sockaddr_in (family 4) or sockaddr_in6 (family 6)
// and returns its length. EAFNOSUPPORT for any other family byte.
core::Result<socklen_t> endpoint_to_sockaddr(uint8_t family, const Endpoint& endpoint, sockaddr_storage* out);

// True if a family-6 endpoint holds an IPv4-mapped address.
bool is_ipv4_mapped(const Endpoint& endpoint);

// The canonical form of (family, endpoint): family 6 with an IPv4-mapped
// address becomes family 4; anything else is returned unchanged.
FamilyEndpoint canonical_endpoint(uint8_t family, const Endpoint& endpoint);

}  // namespace vsock::sock::wire
