#include "sock/dgram/datagram_socket.hpp"
#include "sock/socket_report.hpp"

#include <arpa/inet.h>
#include <linux/tcp.h>  // struct tcp_info with tcpi_bytes_acked/received (glibc's lacks them)
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "sock/stream/stream_socket.hpp"
#include "sys/real_calls.hpp"

namespace vsock::sock {

// The one hook in StreamSocket: a copy of what the stats show, under its
// lock (lock_call() makes a spinning blocking call let go, as for any
// other caller). The publisher's thread calls it, at most once per
// publication per socket.
void StreamSocket::snapshot(StreamSnapshot* out) {
  StreamLock held = lock_call();
  out->phase = upgrade_.phase();
  out->fallback = upgrade_.fallback_reason();
  out->kernel_only = kernel_only();
  out->reverted = writer_.reverted() || reader_.reverted();
  out->resumed = resumed_;
  out->has_channel = channel_ != nullptr;
  if (channel_ != nullptr) {
    const StreamCounters& counters = channel_->counters();
    out->rdma_bytes_sent = counters.bytes_written;
    out->rdma_bytes_received = counters.bytes_read;
    out->credit_stalls = counters.write_eagain;
    if (channel_->started()) out->rdma_in_flight = channel_->peer_in_flight();
    out->rdma_readable = channel_->readable_bytes();
  }
}

namespace {

core::KernelWhy why_of_fallback(FallbackReason reason) {
  switch (reason) {
    case FallbackReason::kNone: return core::KernelWhy::kUndecided;
    case FallbackReason::kDeclined: return core::KernelWhy::kDeclined;
    case FallbackReason::kRejected: return core::KernelWhy::kRejected;
    case FallbackReason::kNoListener: return core::KernelWhy::kNoListener;
    case FallbackReason::kUnreachable: return core::KernelWhy::kUnreachable;
    case FallbackReason::kTimeout: return core::KernelWhy::kTimeout;
    case FallbackReason::kLocalError: return core::KernelWhy::kLocalError;
    case FallbackReason::kPeerClosed: return core::KernelWhy::kPeerClosed;
    case FallbackReason::kTransportError: return core::KernelWhy::kTransportError;
    case FallbackReason::kRefused: return core::KernelWhy::kRefused;
    case FallbackReason::kNoRequest: return core::KernelWhy::kNoRequest;
    case FallbackReason::kNoResources: return core::KernelWhy::kNoResources;
  }
  return core::KernelWhy::kUndecided;
}

core::KernelWhy why_of_registry(KernelReason reason) {
  switch (reason) {
    case KernelReason::kUndecided: return core::KernelWhy::kUndecided;
    case KernelReason::kRule: return core::KernelWhy::kRule;
    case KernelReason::kNoDevice: return core::KernelWhy::kNoDevice;
    case KernelReason::kOption: return core::KernelWhy::kOption;
    case KernelReason::kCachedPeer: return core::KernelWhy::kCachedPeer;
  }
  return core::KernelWhy::kUndecided;
}

// Address and port of a sockaddr_storage into the row's fields.
void put_address(const sockaddr_storage& address, uint8_t* bytes, uint16_t* port) {
  if (address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(address);
    std::memcpy(bytes, &in.sin_addr, 4);
    *port = ntohs(in.sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
    std::memcpy(bytes, &in6.sin6_addr, 16);
    *port = ntohs(in6.sin6_port);
  }
}

}  // namespace

void classify_stream(const StreamSnapshot& s, KernelReason registry_reason, core::SocketPath* path,
                     core::KernelWhy* why) {
  *why = core::KernelWhy::kNone;
  switch (s.phase) {
    case UpgradePhase::kConnecting:
    case UpgradePhase::kAccepting:
    case UpgradePhase::kEstablished:
      *path = core::SocketPath::kUpgrading;
      return;
    case UpgradePhase::kSwitched:
      if (s.reverted || s.kernel_only) {
        *path = core::SocketPath::kReverted;
        *why = s.resumed ? core::KernelWhy::kRdmaFailed : core::KernelWhy::kHandedOff;
      } else {
        *path = core::SocketPath::kRdma;
      }
      return;
    case UpgradePhase::kFailed:
      *path = core::SocketPath::kFailed;
      return;
    case UpgradePhase::kFallback:
      *path = core::SocketPath::kKernel;
      // A decision of the socket's own (an option set after the upgrade
      // began) says more than the upgrade's "declined".
      *why = registry_reason != KernelReason::kUndecided ? why_of_registry(registry_reason) : why_of_fallback(s.fallback);
      return;
    case UpgradePhase::kKernel:
      break;
  }
  // No upgrade under way: a Revert before the switch completed, or none tried.
  if (s.reverted) {
    *path = core::SocketPath::kReverted;
    *why = core::KernelWhy::kHandedOff;
    return;
  }
  *path = core::SocketPath::kKernel;
  *why = why_of_registry(registry_reason);
}

bool report_socket(int fd, const SocketRef& ref, core::SocketRecord* row) {
  SocketState* state = ref.get();
  const uint64_t generation = state->generation.load(std::memory_order_acquire);
  std::memset(row, 0, sizeof *row);
  row->fd = fd;
  row->family = static_cast<uint8_t>(state->domain);
  row->protocol = state->type == SOCK_STREAM ? IPPROTO_TCP : IPPROTO_UDP;
  const SocketRole role = state->role.load(std::memory_order_relaxed);
  row->role = static_cast<uint8_t>(role);

  const KernelReason registry_reason = state->kernel_reason.load(std::memory_order_relaxed);
  core::SocketPath path = core::SocketPath::kKernel;
  core::KernelWhy why = why_of_registry(registry_reason);
  if (state->type == SOCK_DGRAM) {
    dgram::DatagramSocket* datagram = state->datagram.load(std::memory_order_acquire);
    dgram::DatagramSocket::Snapshot snapshot;
    if (datagram != nullptr) snapshot = datagram->snapshot();  // our ref keeps it alive
    if (snapshot.on_ud) {
      path = core::SocketPath::kRdma;
      why = core::KernelWhy::kNone;
    } else if (snapshot.left_ud && why == core::KernelWhy::kUndecided) {
      path = core::SocketPath::kReverted;
      why = core::KernelWhy::kHandedOff;
    } else if (why == core::KernelWhy::kUndecided) {
      why = core::KernelWhy::kDatagram;
    }
    row->rdma_bytes_sent = snapshot.ud_bytes_sent;
    row->rdma_bytes_received = snapshot.ud_bytes_received;
    row->rdma_readable = snapshot.queued;
  } else if (role == SocketRole::kListener) {
    path = core::SocketPath::kListening;
    why = core::KernelWhy::kNone;
  } else if (StreamSocket* stream = state->stream.load(std::memory_order_acquire)) {
    // Our SocketRef keeps the state's reference to the stream alive.
    StreamSnapshot snapshot;
    stream->snapshot(&snapshot);
    classify_stream(snapshot, registry_reason, &path, &why);
    row->rdma_bytes_sent = snapshot.rdma_bytes_sent;
    row->rdma_bytes_received = snapshot.rdma_bytes_received;
    row->rdma_in_flight = snapshot.rdma_in_flight;
    row->rdma_readable = snapshot.rdma_readable;
    row->credit_stalls = snapshot.credit_stalls;
  }
  row->path = static_cast<uint8_t>(path);
  row->why = static_cast<uint8_t>(why);

  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (sys::real().getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    put_address(address, row->local_addr, &row->local_port);
  address = {};
  length = sizeof address;
  if (sys::real().getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    put_address(address, row->peer_addr, &row->peer_port);
  if (state->type == SOCK_STREAM) {
    // What the kernel's TCP carried: on an upgraded connection, only what
    // went before the switch (and after a revert).
    tcp_info info{};
    socklen_t info_length = sizeof info;
    if (sys::real().getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &info_length) == 0 &&
        info_length >= offsetof(tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received) {
      // bytes_acked counts the sequence space the peer acknowledged: on
      // the side that connected it begins with our SYN (an accepted
      // socket starts past it), and a FIN adds one once we shut down.
      const uint64_t syn = role == SocketRole::kClient && info.tcpi_bytes_acked > 0 ? 1 : 0;
      row->tcp_bytes_sent = info.tcpi_bytes_acked - syn;
      row->tcp_bytes_received = info.tcpi_bytes_received;
    }
  }
  // The fd may have been closed and reused while we asked the kernel.
  SocketRef again = lookup_socket(fd);
  return again.get() == state && state->generation.load(std::memory_order_acquire) == generation;
}

}  // namespace vsock::sock
