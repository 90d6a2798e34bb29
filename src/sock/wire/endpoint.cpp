#include "sock/wire/endpoint.hpp"

#include <netinet/in.h>

#include <cerrno>
#include <cstring>

namespace vsock::sock::wire {
namespace {

// ::ffff:0:0/96, the prefix of an IPv4-mapped IPv6 address.
constexpr uint8_t kMappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

}  // namespace

bool operator==(const Endpoint& a, const Endpoint& b) {
  return a.port == b.port && std::memcmp(a.ip, b.ip, sizeof a.ip) == 0;
}

bool is_ipv4_mapped(const Endpoint& endpoint) {
  return std::memcmp(endpoint.ip, kMappedPrefix, sizeof kMappedPrefix) == 0;
}

FamilyEndpoint canonical_endpoint(uint8_t family, const Endpoint& endpoint) {
  FamilyEndpoint out{family, endpoint};
  if (family != kFamilyIpv6 || !is_ipv4_mapped(endpoint)) return out;
  out.family = kFamilyIpv4;
  std::memset(out.endpoint.ip, 0, sizeof out.endpoint.ip);
  std::memcpy(out.endpoint.ip, endpoint.ip + 12, 4);
  return out;
}

core::Result<FamilyEndpoint> endpoint_from_sockaddr(const sockaddr* addr, socklen_t len) {
  using R = core::Result<FamilyEndpoint>;
  // sa_family is the first member of every sockaddr: check that it is there
  // before reading it. Copies, not casts: the caller's buffer need not be
  // aligned for sockaddr_in6.
  if (addr == nullptr || len < static_cast<socklen_t>(sizeof(sa_family_t))) return R::fail(EINVAL);
  sa_family_t family;
  std::memcpy(&family, addr, sizeof family);
  FamilyEndpoint out;
  if (family == AF_INET) {
    if (len < static_cast<socklen_t>(sizeof(sockaddr_in))) return R::fail(EINVAL);
    sockaddr_in in4;
    std::memcpy(&in4, addr, sizeof in4);
    out.family = kFamilyIpv4;
    std::memcpy(out.endpoint.ip, &in4.sin_addr, 4);
    out.endpoint.port = ntohs(in4.sin_port);
    return R::ok(out);
  }
  if (family == AF_INET6) {
    if (len < static_cast<socklen_t>(sizeof(sockaddr_in6))) return R::fail(EINVAL);
    sockaddr_in6 in6;
    std::memcpy(&in6, addr, sizeof in6);
    std::memcpy(out.endpoint.ip, &in6.sin6_addr, 16);
    out.endpoint.port = ntohs(in6.sin6_port);
    return R::ok(canonical_endpoint(kFamilyIpv6, out.endpoint));
  }
  return R::fail(EAFNOSUPPORT);
}

core::Result<socklen_t> endpoint_to_sockaddr(uint8_t family, const Endpoint& endpoint, sockaddr_storage* out) {
  using R = core::Result<socklen_t>;
  std::memset(out, 0, sizeof *out);
  if (family == kFamilyIpv4) {
    sockaddr_in in4{};
    in4.sin_family = AF_INET;
    in4.sin_port = htons(endpoint.port);
    std::memcpy(&in4.sin_addr, endpoint.ip, 4);
    std::memcpy(out, &in4, sizeof in4);
    return R::ok(sizeof in4);
  }
  if (family == kFamilyIpv6) {
    sockaddr_in6 in6{};
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(endpoint.port);
    std::memcpy(&in6.sin6_addr, endpoint.ip, 16);
    std::memcpy(out, &in6, sizeof in6);
    return R::ok(sizeof in6);
  }
  return R::fail(EAFNOSUPPORT);
}

}  // namespace vsock::sock::wire
