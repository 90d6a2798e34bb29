// DatagramSocket's multicast send (the rest is datagram_socket.cpp): a
// datagram to an IPv4 group that udp_mcast_offload names goes over UD
// (MulticastOffload says how); anything else about it is the kernel's.
#include <netinet/in.h>

#include <cstring>

#include "sock/dgram/datagram_hub.hpp"
#include "sock/dgram/datagram_socket.hpp"
#include "sock/dgram/multicast_offload.hpp"

namespace vsock::sock::dgram {
namespace {

// As for unicast: flags a UD send honours as the kernel does.
constexpr int kUdMulticastSendFlags = MSG_DONTWAIT | MSG_NOSIGNAL | MSG_CONFIRM;

size_t message_length(const msghdr& msg) {
  size_t total = 0;
  for (size_t i = 0; i < msg.msg_iovlen; ++i) total += msg.msg_iov[i].iov_len;
  return total;
}

}  // namespace

bool DatagramSocket::send_multicast_over_ud(int fd, const msghdr& msg, int flags) {
  sockaddr_in group{};
  if (msg.msg_name != nullptr && msg.msg_namelen >= sizeof(sockaddr_in)) {
    if (static_cast<const sockaddr*>(msg.msg_name)->sa_family != AF_INET) return false;
    std::memcpy(&group, msg.msg_name, sizeof group);
  } else {
    std::lock_guard<std::mutex> held(mu_);  // a socket connected to a group
    if (!connected_ || peer_.ss_family != AF_INET) return false;
    std::memcpy(&group, &peer_, sizeof group);
  }
  const uint32_t address = ntohl(group.sin_addr.s_addr);
  if (!IN_MULTICAST(address) || !MulticastOffload::offloads(address)) return false;
  // Control data, flags UD cannot honour, IP_TOS/IP_TTL set, sizes UDP
  // refuses: the kernel's.
  if (msg.msg_controllen != 0 || (flags & ~kUdMulticastSendFlags) != 0) return false;
  if (send_through_kernel_.load(std::memory_order_acquire) || segment_size_.load(std::memory_order_relaxed) != 0)
    return false;
  const size_t length = message_length(msg);
  if (length > kMaxUdpPayload) return false;
  MulticastOffload* multicast = MulticastOffload::get();
  DatagramHub* hub = DatagramHub::get();
  if (multicast == nullptr || hub == nullptr) return false;
  wire::DatagramHeader header;
  {
    std::lock_guard<std::mutex> held(mu_);
    if (leaving_ || local_port(fd) == 0) return false;  // the kernel binds it on the first send
    attach_locked(fd);  // unicast replies to it come back over UD
    if (hub_ == nullptr) return false;
    header.source_port = port_;
    header.datagram_id = next_datagram_id_++;
  }
  header.type = wire::DatagramType::kData;
  header.destination_port = ntohs(group.sin_port);
  header.source_cookie = cookie_;
  if (!multicast->send(*hub, address, header, msg.msg_iov, static_cast<int>(msg.msg_iovlen), length)) return false;
  count_ud_sent(1, length);
  return true;
}

}  // namespace vsock::sock::dgram
