#include "sock/upgrade/tcp_lookup.hpp"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstring>

#include "sys/real_calls.hpp"

namespace vsock::sock {
namespace {

// Fills one side of the diag id: IPv4 in word 0, or the 16 bytes (IPv4
// mapped into ::ffff:a.b.c.d when `mapped`).
void put_address(const wire::Endpoint& endpoint, bool ipv4, bool mapped, __be32 out[4]) {
  std::memset(out, 0, 16);
  if (!ipv4) {
    std::memcpy(out, endpoint.ip, 16);
  } else if (mapped) {
    uint8_t* bytes = reinterpret_cast<uint8_t*>(out);
    bytes[10] = bytes[11] = 0xff;
    std::memcpy(bytes + 12, endpoint.ip, 4);
  } else {
    std::memcpy(out, endpoint.ip, 4);
  }
}

// A sock_diag request for TCP sockets of `family` in `states` (a bit per
// TCP state) whose local port is `port`; the caller fills the rest of the id.
struct DiagQuery {
  nlmsghdr header;
  inet_diag_req_v2 body;
};

DiagQuery diag_query(uint8_t family, uint16_t flags, uint32_t states, uint16_t port) {
  DiagQuery query{};
  query.header.nlmsg_len = sizeof query;
  query.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  query.header.nlmsg_flags = flags;
  query.body.sdiag_family = family;
  query.body.sdiag_protocol = IPPROTO_TCP;
  query.body.idiag_states = states;
  query.body.id.idiag_sport = htons(port);
  return query;
}

bool lookup(int fd, const wire::UpgradeRequest& request, uint8_t family, bool mapped) {
  DiagQuery query = diag_query(family, NLM_F_REQUEST, ~0u, request.server.port);
  const bool ipv4 = request.family == wire::kFamilyIpv4;
  query.body.id.idiag_dport = htons(request.client.port);
  put_address(request.server, ipv4, mapped, query.body.id.idiag_src);
  put_address(request.client, ipv4, mapped, query.body.id.idiag_dst);
  query.body.id.idiag_cookie[0] = query.body.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sys::real().sendto(fd, &query, sizeof query, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
    return false;
  // The answer: one SOCK_DIAG_BY_FAMILY message (found) or NLMSG_ERROR.
  // The kernel's lookup falls back to a listening socket on the port, which
  // is not the connection.
  alignas(nlmsghdr) char answer[1024];
  ssize_t n = sys::real().recv(fd, answer, sizeof answer, 0);
  if (n < static_cast<ssize_t>(NLMSG_LENGTH(sizeof(inet_diag_msg)))) return false;
  const auto* reply = reinterpret_cast<const nlmsghdr*>(answer);
  if (reply->nlmsg_type != SOCK_DIAG_BY_FAMILY) return false;
  const auto* found = static_cast<const inet_diag_msg*>(NLMSG_DATA(reply));
  return found->idiag_state != TCP_LISTEN && found->id.idiag_dport == query.body.id.idiag_dport &&
         found->idiag_inode == 0;  // no file yet: nobody accepted it
}

}  // namespace

bool tcp_connection_in_backlog(const wire::UpgradeRequest& request) {
  int fd = sys::real().socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return false;
  bool found = false;
  if (request.family == wire::kFamilyIpv4)
    found = lookup(fd, request, AF_INET, false) || lookup(fd, request, AF_INET6, true);
  else if (request.family == wire::kFamilyIpv6)
    found = lookup(fd, request, AF_INET6, false);
  sys::real().close(fd);
  return found;
}

bool tcp_listening_on(const sockaddr* local, socklen_t length) {
  core::Result<wire::FamilyEndpoint> at = wire::endpoint_from_sockaddr(local, length);
  if (!at || local == nullptr) return false;
  // The socket's own family: a dual-stack listener on :: is AF_INET6.
  const int family = local->sa_family;
  if (family != AF_INET && family != AF_INET6) return false;
  int fd = sys::real().socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return false;
  // The port: the kernel may filter on it; we do too.
  DiagQuery query = diag_query(static_cast<uint8_t>(family), NLM_F_REQUEST | NLM_F_DUMP, 1u << TCP_LISTEN,
                               at.value().endpoint.port);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  bool found = false;
  if (sys::real().sendto(fd, &query, sizeof query, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) >= 0) {
    alignas(nlmsghdr) char answer[8192];
    bool done = false;
    for (int reads = 0; reads < 64 && !done && !found; ++reads) {  // bounded: listening sockets are few
      ssize_t n = sys::real().recv(fd, answer, sizeof answer, 0);
      if (n <= 0) break;
      int left = static_cast<int>(n);
      for (const auto* reply = reinterpret_cast<const nlmsghdr*>(answer); NLMSG_OK(reply, left);
           reply = NLMSG_NEXT(reply, left)) {
        if (reply->nlmsg_type == NLMSG_DONE || reply->nlmsg_type == NLMSG_ERROR) {
          done = true;
          break;
        }
        if (reply->nlmsg_type != SOCK_DIAG_BY_FAMILY || reply->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg)))
          continue;
        const auto* socket = static_cast<const inet_diag_msg*>(NLMSG_DATA(reply));
        if (socket->idiag_state != TCP_LISTEN || socket->id.idiag_sport != query.body.id.idiag_sport) continue;
        const size_t bytes = family == AF_INET ? 4 : 16;
        const void* ours = family == AF_INET
                               ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(local)->sin_addr)
                               : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(local)->sin6_addr);
        if (std::memcmp(socket->id.idiag_src, ours, bytes) == 0) {
          found = true;
          break;
        }
      }
    }
  }
  sys::real().close(fd);
  return found;
}

}  // namespace vsock::sock
