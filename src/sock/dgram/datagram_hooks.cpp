#include "sock/dgram/datagram_hooks.hpp"

#include <netinet/in.h>
#include <netinet/udp.h>

#include <vector>

#include "core/config.hpp"
#include "core/log.hpp"
#include "core/rules.hpp"
#include "sock/dgram/datagram_socket.hpp"
#include "sock/registry.hpp"
#include "sys/real_calls.hpp"
#include "sys/reentry_guard.hpp"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace vsock::sock::dgram {
namespace {

DatagramSocket* datagram_of(SocketState* state) {
  return state == nullptr ? nullptr : state->datagram.load(std::memory_order_acquire);
}

// Whether the rules let a UDP socket at `address` (ours, bound) use UD.
bool rules_allow(const sockaddr* address) {
  const core::Config& config = core::config();
  core::Endpoint endpoint;
  endpoint.proto = core::Proto::kUdp;
  endpoint.program = program_invocation_short_name;
  endpoint.role = core::Role::kServer;
  endpoint.addr = address;
  return core::decide(config.rules, endpoint, config.settings.udp) == core::OffloadMode::kOffload;
}

// The fd table's walk takes a plain function: it collects here.
thread_local std::vector<DatagramSocket*>* t_found = nullptr;

void collect(int, const SocketRef& ref) {
  DatagramSocket* socket = ref->datagram.load(std::memory_order_acquire);
  if (socket == nullptr || socket->kernel_only()) return;
  for (DatagramSocket* seen : *t_found)
    if (seen == socket) return;  // dup'ed fds share it
  socket->retain();
  t_found->push_back(socket);
}

std::vector<DatagramSocket*> all_sockets() {
  std::vector<DatagramSocket*> found;
  t_found = &found;
  for_each_socket(collect);
  t_found = nullptr;
  return found;
}

}  // namespace

void on_datagram_created(SocketState* state) {
  if (state->type != SOCK_DGRAM || state->kernel_reason.load() != KernelReason::kUndecided) return;
  if (state->domain != AF_INET && state->domain != AF_INET6) return;
  state->datagram.store(new DatagramSocket(state->domain), std::memory_order_release);
}

void on_datagram_bound(int fd, SocketState* state) {
  DatagramSocket* socket = datagram_of(state);
  if (socket == nullptr) return;
  sockaddr_storage local{};
  socklen_t length = sizeof local;
  if (sys::real().getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) return;
  sys::ReentryGuard guard;
  if (!rules_allow(reinterpret_cast<sockaddr*>(&local))) {
    state->kernel_reason.store(KernelReason::kRule);
    socket->leave_ud();
    return;
  }
  socket->on_bound(fd, reinterpret_cast<sockaddr*>(&local), length);
}

void on_datagram_connected(int fd, SocketState* state, const sockaddr* peer, socklen_t length) {
  if (DatagramSocket* socket = datagram_of(state)) {
    sys::ReentryGuard guard;
    socket->on_connected(fd, peer, length);
  }
}

bool is_datagram_unsupported_option(int level, int name) {
  switch (level) {
    case SOL_SOCKET:
      // What a UD datagram has no answer for on receive (timestamps, the
      // overflow count), or what changes which socket receives (filters,
      // SO_REUSEPORT groups, a device binding).
      return name == SO_TIMESTAMP || name == SO_TIMESTAMPNS || name == SO_TIMESTAMPING || name == SO_RXQ_OVFL ||
             name == SO_ATTACH_FILTER || name == SO_ATTACH_BPF || name == SO_REUSEPORT ||
             name == SO_BINDTODEVICE || name == SO_MARK;
    case IPPROTO_IP:
      return name == IP_PKTINFO || name == IP_RECVTOS || name == IP_RECVTTL || name == IP_RECVOPTS ||
             name == IP_RETOPTS || name == IP_RECVORIGDSTADDR || name == IP_RECVERR || name == IP_OPTIONS ||
             name == IP_TRANSPARENT;
    case IPPROTO_IPV6:
      return name == IPV6_RECVPKTINFO || name == IPV6_RECVTCLASS || name == IPV6_RECVHOPLIMIT ||
             name == IPV6_RECVERR || name == IPV6_RECVORIGDSTADDR || name == IPV6_V6ONLY;
    case IPPROTO_UDP:
      // Corking and segmentation offload change what one sendmsg() sends.
      return name == UDP_CORK || name == UDP_SEGMENT || name == UDP_GRO;
    default:
      return false;
  }
}

void on_datagram_option(SocketState* state, int level, int name) {
  DatagramSocket* socket = datagram_of(state);
  if (socket == nullptr || socket->kernel_only() || !is_datagram_unsupported_option(level, name)) return;
  sys::ReentryGuard guard;
  VSOCK_LOG(kDebug, "udp: option %d/%d set: the socket leaves UD", level, name);
  state->kernel_reason.store(KernelReason::kOption);
  socket->leave_ud();
}

void leave_all_datagram_sockets() {
  sys::ReentryGuard guard;
  for (DatagramSocket* socket : all_sockets()) {
    socket->leave_ud();
    socket->release();
  }
}

void leave_datagram_fd(int fd) {
  SocketRef ref = lookup_socket(fd);
  if (DatagramSocket* socket = datagram_of(ref.get())) {
    sys::ReentryGuard guard;
    socket->leave_ud();
  }
}

void abandon_datagram_sockets_in_child() {
  sys::ReentryGuard guard;
  for (DatagramSocket* socket : all_sockets()) {
    socket->abandon_in_child();
    socket->release();
  }
}

void on_datagram_released(SocketState* state) {
  DatagramSocket* socket = state->datagram.exchange(nullptr, std::memory_order_acq_rel);
  if (socket == nullptr) return;
  sys::ReentryGuard guard;
  socket->on_last_close();
  socket->release();
}

}  // namespace vsock::sock::dgram
