// The setsockopt() hook for multicast options on a UDP socket (declared in
// datagram_hooks.hpp): what the application passed is read here, in the
// forms Linux accepts, and handed to the process's MulticastOffload. The
// kernel has accepted the option already; these options never make a
// socket leave UD.
#include <netinet/in.h>

#include <cstring>
#include <vector>

#include "core/config.hpp"
#include "sock/dgram/datagram_hooks.hpp"
#include "sock/dgram/datagram_socket.hpp"
#include "sock/dgram/multicast_offload.hpp"
#include "sys/real_calls.hpp"
#include "sys/reentry_guard.hpp"

namespace vsock::sock::dgram {
namespace {

uint32_t host(in_addr address) { return ntohl(address.s_addr); }

// An IPv4 address in a sockaddr_storage (MCAST_* requests); false for
// another family (an IPv6 group is the kernel's alone).
bool ipv4_in(const sockaddr_storage& address, uint32_t* out) {
  if (address.ss_family != AF_INET) return false;
  *out = host(reinterpret_cast<const sockaddr_in*>(&address)->sin_addr);
  return true;
}

template <class T>
bool read_value(const void* value, socklen_t length, T* out) {
  if (value == nullptr || length < sizeof(T)) return false;
  std::memcpy(out, value, sizeof(T));
  return true;
}

// An int option as the kernel now holds it (the application may have
// passed an int or a byte).
bool kernel_int(int fd, int name, int* out) {
  socklen_t length = sizeof *out;
  return sys::real().getsockopt(fd, IPPROTO_IP, name, out, &length) == 0;
}

void membership(MulticastOffload& mc, uint64_t cookie, int name, const void* value, socklen_t length) {
  switch (name) {
    case IP_ADD_MEMBERSHIP:
    case IP_DROP_MEMBERSHIP: {
      ip_mreq request;  // ip_mreqn starts the same way
      if (!read_value(value, length, &request)) return;
      if (name == IP_ADD_MEMBERSHIP)
        mc.join(cookie, host(request.imr_multiaddr), 0);
      else
        mc.leave(cookie, host(request.imr_multiaddr), 0);
      return;
    }
    case IP_ADD_SOURCE_MEMBERSHIP:
    case IP_DROP_SOURCE_MEMBERSHIP:
    case IP_BLOCK_SOURCE:
    case IP_UNBLOCK_SOURCE: {
      ip_mreq_source request;
      if (!read_value(value, length, &request)) return;
      uint32_t group = host(request.imr_multiaddr), source = host(request.imr_sourceaddr);
      if (name == IP_ADD_SOURCE_MEMBERSHIP) mc.join(cookie, group, source);
      if (name == IP_DROP_SOURCE_MEMBERSHIP) mc.leave(cookie, group, source);
      if (name == IP_BLOCK_SOURCE || name == IP_UNBLOCK_SOURCE) mc.block(cookie, group, source, name == IP_BLOCK_SOURCE);
      return;
    }
    case MCAST_JOIN_GROUP:
    case MCAST_LEAVE_GROUP: {
      group_req request;
      uint32_t group;
      if (!read_value(value, length, &request) || !ipv4_in(request.gr_group, &group)) return;
      if (name == MCAST_JOIN_GROUP)
        mc.join(cookie, group, 0);
      else
        mc.leave(cookie, group, 0);
      return;
    }
    case MCAST_JOIN_SOURCE_GROUP:
    case MCAST_LEAVE_SOURCE_GROUP:
    case MCAST_BLOCK_SOURCE:
    case MCAST_UNBLOCK_SOURCE: {
      group_source_req request;
      uint32_t group, source;
      if (!read_value(value, length, &request) || !ipv4_in(request.gsr_group, &group) ||
          !ipv4_in(request.gsr_source, &source))
        return;
      if (name == MCAST_JOIN_SOURCE_GROUP) mc.join(cookie, group, source);
      if (name == MCAST_LEAVE_SOURCE_GROUP) mc.leave(cookie, group, source);
      if (name == MCAST_BLOCK_SOURCE || name == MCAST_UNBLOCK_SOURCE)
        mc.block(cookie, group, source, name == MCAST_BLOCK_SOURCE);
      return;
    }
    default:
      return;
  }
}

void source_filter(MulticastOffload& mc, uint64_t cookie, int name, const void* value, socklen_t length) {
  std::vector<uint32_t> sources;
  if (name == IP_MSFILTER) {
    ip_msfilter head;
    if (!read_value(value, length, &head)) return;
    const size_t count = head.imsf_numsrc;
    if (length < IP_MSFILTER_SIZE(count)) return;
    const auto* list = reinterpret_cast<const uint8_t*>(value) + offsetof(ip_msfilter, imsf_slist);
    for (size_t i = 0; i < count; ++i) {
      in_addr source;
      std::memcpy(&source, list + i * sizeof source, sizeof source);
      sources.push_back(host(source));
    }
    mc.set_filter(cookie, host(head.imsf_multiaddr), head.imsf_fmode == MCAST_INCLUDE, sources);
    return;
  }
  group_filter head;  // MCAST_MSFILTER
  uint32_t group;
  if (!read_value(value, length, &head) || !ipv4_in(head.gf_group, &group)) return;
  const size_t count = head.gf_numsrc;
  if (length < GROUP_FILTER_SIZE(count)) return;
  const auto* list = reinterpret_cast<const uint8_t*>(value) + offsetof(group_filter, gf_slist);
  for (size_t i = 0; i < count; ++i) {
    sockaddr_storage source;
    std::memcpy(&source, list + i * sizeof source, sizeof source);
    uint32_t address;
    if (ipv4_in(source, &address)) sources.push_back(address);
  }
  mc.set_filter(cookie, group, head.gf_fmode == MCAST_INCLUDE, sources);
}

// IP_MULTICAST_IF: an in_addr, an ip_mreq or an ip_mreqn, as Linux reads it.
void interface(MulticastOffload& mc, uint64_t cookie, const void* value, socklen_t length) {
  ip_mreqn request{};
  if (length >= sizeof(ip_mreqn)) {
    std::memcpy(&request, value, sizeof request);
  } else if (length >= sizeof(ip_mreq)) {
    ip_mreq short_request;
    std::memcpy(&short_request, value, sizeof short_request);
    request.imr_address = short_request.imr_interface;
  } else if (length >= sizeof(in_addr)) {
    std::memcpy(&request.imr_address, value, sizeof(in_addr));
  }
  mc.set_interface(cookie, request.imr_ifindex, request.imr_address);
}

}  // namespace

bool is_datagram_multicast_option(int level, int name) {
  if (level != IPPROTO_IP) return false;
  switch (name) {
    case IP_ADD_MEMBERSHIP: case IP_DROP_MEMBERSHIP:
    case IP_ADD_SOURCE_MEMBERSHIP: case IP_DROP_SOURCE_MEMBERSHIP:
    case IP_BLOCK_SOURCE: case IP_UNBLOCK_SOURCE: case IP_MSFILTER:
    case MCAST_JOIN_GROUP: case MCAST_LEAVE_GROUP:
    case MCAST_JOIN_SOURCE_GROUP: case MCAST_LEAVE_SOURCE_GROUP:
    case MCAST_BLOCK_SOURCE: case MCAST_UNBLOCK_SOURCE: case MCAST_MSFILTER:
    case IP_MULTICAST_LOOP: case IP_MULTICAST_TTL: case IP_MULTICAST_IF: case IP_MULTICAST_ALL:
      return true;
    default:
      return false;
  }
}

void on_datagram_multicast_option(int fd, SocketState* state, int level, int name, const void* value,
                                  socklen_t length) {
  if (!is_datagram_multicast_option(level, name) || core::config().settings.udp_mcast_offload.empty()) return;
  DatagramSocket* socket = state == nullptr ? nullptr : state->datagram.load(std::memory_order_acquire);
  if (socket == nullptr || socket->kernel_only()) return;
  sys::ReentryGuard guard;
  MulticastOffload* mc = MulticastOffload::get();
  if (mc == nullptr) return;
  const uint64_t cookie = socket->cookie();
  int current = 0;
  switch (name) {
    case IP_MULTICAST_LOOP:
      if (kernel_int(fd, name, &current)) mc->set_loop(cookie, current != 0);
      return;
    case IP_MULTICAST_TTL:
      if (kernel_int(fd, name, &current)) mc->set_ttl(cookie, current);
      return;
    case IP_MULTICAST_ALL:
      if (kernel_int(fd, name, &current)) mc->set_all(cookie, current != 0);
      return;
    case IP_MULTICAST_IF:
      interface(*mc, cookie, value, length);
      return;
    case IP_MSFILTER:
    case MCAST_MSFILTER:
      source_filter(*mc, cookie, name, value, length);
      return;
    default:
      membership(*mc, cookie, name, value, length);
  }
}

}  // namespace vsock::sock::dgram
