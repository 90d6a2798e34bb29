#include "sock/dgram/datagram_hooks.hpp"

#include <netinet/in.h>
#include <netinet/udp.h>

#include <vector>

#include "core/config.hpp"
#include "core/log.hpp"
#include "sock/dgram/datagram_hub.hpp"
#include "sock/dgram/datagram_socket.hpp"
#include "sock/dgram/multicast_offload.hpp"
#include "sock/dgram/option_names.hpp"
#include "sock/offload_rules.hpp"
#include "sock/registry.hpp"
#include "sys/real_calls.hpp"
#include "sys/reentry_guard.hpp"

namespace vsock::sock::dgram {
namespace {

// How long exit waits for datagrams still on the UD queue pair.
constexpr int kExitSendDrainMs = 1000;

DatagramSocket* datagram_of(SocketState* state) {
  return state == nullptr ? nullptr : state->datagram.load(std::memory_order_acquire);
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

// The socket leaves UD: its multicast memberships over UD end with it (the
// kernel's stay).
void leave_ud(DatagramSocket* socket) {
  socket->leave_ud();
  if (MulticastOffload* multicast = MulticastOffload::running()) multicast->forget(socket->cookie());
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
  auto* socket = new DatagramSocket(state->domain);
  state->datagram.store(socket, std::memory_order_release);
  note_route_changed();
  socket->assume_known_mode(state->known_mode);
}

void on_datagram_bound(int fd, SocketState* state) {
  DatagramSocket* socket = datagram_of(state);
  if (socket == nullptr) return;
  sockaddr_storage local{};
  socklen_t length = sizeof local;
  if (sys::real().getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) return;
  sys::ReentryGuard guard;
  if (!rules_offload(core::Proto::kUdp, reinterpret_cast<sockaddr*>(&local), core::Role::kServer)) {
    state->kernel_reason.store(KernelReason::kRule);
    leave_ud(socket);
    return;
  }
  socket->on_bound(fd, reinterpret_cast<sockaddr*>(&local), length);
  if (!core::config().settings.udp_mcast_offload.empty() && !socket->kernel_only())
    if (MulticastOffload* multicast = MulticastOffload::get())
      multicast->bound(socket->cookie(), reinterpret_cast<sockaddr*>(&local), length);
}

void on_datagram_connected(int fd, SocketState* state, const sockaddr* peer, socklen_t length) {
  if (DatagramSocket* socket = datagram_of(state)) {
    sys::ReentryGuard guard;
    socket->on_connected(fd, peer, length);
  }
}

namespace {

bool is_datagram_unsupported_option(int level, int name) {
  switch (level) {
    case SOL_SOCKET:
      // What a UD datagram has no answer for on receive (hardware
      // timestamps), or what changes which socket receives (filters,
      // SO_REUSEPORT groups, a device binding).
      return name == SO_TIMESTAMPING || name == SO_ATTACH_FILTER || name == SO_ATTACH_BPF || name == SO_REUSEPORT ||
             name == SO_BINDTODEVICE || name == SO_MARK;
    case IPPROTO_IP:
      return name == IP_RECVOPTS || name == IP_RETOPTS || name == IP_OPTIONS || name == IP_TRANSPARENT;
    case IPPROTO_IPV6:
      return name == IPV6_V6ONLY;
    case IPPROTO_UDP:
      // Corking joins sends into one datagram; GRO joins received ones.
      return name == UDP_CORK || name == UDP_GRO;
    default:
      return false;
  }
}

bool is_datagram_receive_control_option(int level, int name) {
  switch (level) {
    case SOL_SOCKET:
      return name == SO_TIMESTAMP_OLD || name == SO_TIMESTAMPNS_OLD || name == SO_TIMESTAMP_NEW ||
             name == SO_TIMESTAMPNS_NEW || name == SO_RXQ_OVFL;
    case IPPROTO_IP:
      return name == IP_PKTINFO || name == IP_RECVTTL || name == IP_RECVTOS || name == IP_RECVORIGDSTADDR;
    case IPPROTO_IPV6:
      return name == IPV6_RECVPKTINFO || name == IPV6_RECVHOPLIMIT || name == IPV6_RECVTCLASS ||
             name == IPV6_RECVORIGDSTADDR;
    default:
      return false;
  }
}

bool is_datagram_segment_option(int level, int name) { return level == IPPROTO_UDP && name == UDP_SEGMENT; }

bool is_datagram_receive_buffer_option(int level, int name) {
  return level == SOL_SOCKET && (name == SO_RCVBUF || name == SO_RCVBUFFORCE);
}

bool is_datagram_send_shape_option(int level, int name) {
  return (level == IPPROTO_IP && (name == IP_TOS || name == IP_TTL)) ||
         (level == IPPROTO_IPV6 && (name == IPV6_TCLASS || name == IPV6_UNICAST_HOPS));
}

}  // namespace

bool is_datagram_option(int level, int name) {
  return is_datagram_unsupported_option(level, name) || is_datagram_receive_control_option(level, name) ||
         is_datagram_send_shape_option(level, name) || is_datagram_segment_option(level, name) ||
         is_datagram_receive_buffer_option(level, name);
}

void on_datagram_option(int fd, SocketState* state, int level, int name) {
  DatagramSocket* socket = datagram_of(state);
  if (socket == nullptr || socket->kernel_only()) return;
  sys::ReentryGuard guard;
  if (is_datagram_receive_control_option(level, name)) {
    socket->receive_options_changed(fd);
  } else if (is_datagram_segment_option(level, name)) {
    socket->segment_size_changed(fd);  // each send is cut in datagrams of that size, over UD too
  } else if (is_datagram_receive_buffer_option(level, name)) {
    socket->receive_buffer_changed(fd);  // the UD queue's budget follows, as the kernel's limit does
  } else if (is_datagram_send_shape_option(level, name)) {
    VSOCK_LOG(kDebug, "udp: option %d/%d set: its datagrams are sent by the kernel (fd %d)", level, name, fd);
    socket->send_through_kernel();
  } else if (is_datagram_unsupported_option(level, name)) {
    VSOCK_LOG(kDebug, "udp: option %d/%d set: the socket leaves UD (fd %d)", level, name, fd);
    state->kernel_reason.store(KernelReason::kOption);
    leave_ud(socket);
  }
}

void leave_all_datagram_sockets() {
  sys::ReentryGuard guard;
  for (DatagramSocket* socket : all_sockets()) {
    leave_ud(socket);
    socket->release();
  }
}

void leave_datagram_fd(int fd) {
  SocketRef ref = lookup_socket(fd);
  if (DatagramSocket* socket = datagram_of(ref.get())) {
    sys::ReentryGuard guard;
    leave_ud(socket);
  }
}

void abandon_datagram_sockets_in_child() {
  sys::ReentryGuard guard;
  for (DatagramSocket* socket : all_sockets()) {
    socket->abandon_in_child();
    socket->release();
  }
}

void finish_datagrams_at_exit() {
  DatagramHub* hub = DatagramHub::running();
  if (hub == nullptr) return;
  sys::ReentryGuard guard;
  if (!hub->finish_sends(kExitSendDrainMs))
    VSOCK_LOG(kInfo, "udp: datagrams still queued on the UD queue pair at exit after %d ms", kExitSendDrainMs);
}

void on_datagram_released(SocketState* state) {
  DatagramSocket* socket = state->datagram.exchange(nullptr, std::memory_order_acq_rel);
  if (socket == nullptr) return;
  sys::ReentryGuard guard;
  socket->on_last_close();
  if (MulticastOffload* multicast = MulticastOffload::running()) multicast->forget(socket->cookie());
  socket->release();
}

}  // namespace vsock::sock::dgram
