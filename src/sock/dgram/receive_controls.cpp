#include "sock/dgram/receive_controls.hpp"

#include <netinet/in.h>
#include <sys/time.h>

#include <cstring>

#include "sock/dgram/option_names.hpp"

namespace vsock::sock::dgram {
namespace {

// The kernel's put_cmsg() on a user buffer: what fits, cut if need be.
class ControlWriter {
 public:
  explicit ControlWriter(msghdr& msg)
      : msg_(msg), next_(static_cast<uint8_t*>(msg.msg_control)), left_(msg.msg_control ? msg.msg_controllen : 0) {}

  void put(int level, int type, const void* data, size_t length) {
    if (left_ < sizeof(cmsghdr)) {
      msg_.msg_flags |= MSG_CTRUNC;
      return;
    }
    size_t cmsg_length = CMSG_LEN(length);
    if (left_ < cmsg_length) {
      msg_.msg_flags |= MSG_CTRUNC;
      cmsg_length = left_;
    }
    cmsghdr header{};
    header.cmsg_len = cmsg_length;
    header.cmsg_level = level;
    header.cmsg_type = type;
    std::memcpy(next_, &header, sizeof header);
    std::memcpy(next_ + (CMSG_DATA(&header) - reinterpret_cast<unsigned char*>(&header)), data,
                cmsg_length - CMSG_LEN(0));
    size_t used = CMSG_SPACE(length) < left_ ? CMSG_SPACE(length) : left_;
    next_ += used;
    left_ -= used;
  }

  void finish() {
    msg_.msg_controllen = msg_.msg_control ? static_cast<size_t>(next_ - static_cast<uint8_t*>(msg_.msg_control)) : 0;
  }

 private:
  msghdr& msg_;
  uint8_t* next_;
  size_t left_;
};

void put_int(ControlWriter& out, int level, int type, int value) { out.put(level, type, &value, sizeof value); }

void put_timestamp(ControlWriter& out, const ReceiveOptions& options, const timespec& received) {
  if (options.timestamp_ns) {
    out.put(SOL_SOCKET, options.timestamp_new ? SO_TIMESTAMPNS_NEW : SO_TIMESTAMPNS_OLD, &received, sizeof received);
    return;
  }
  // The old form is the ABI's timeval; the new one is two 64-bit fields,
  // the same bytes on a 64-bit ABI.
  struct {
    int64_t seconds;
    int64_t microseconds;
  } wide{received.tv_sec, received.tv_nsec / 1000};
  timeval narrow{received.tv_sec, static_cast<suseconds_t>(received.tv_nsec / 1000)};
  if (options.timestamp_new)
    out.put(SOL_SOCKET, SO_TIMESTAMP_NEW, &wide, sizeof wide);
  else
    out.put(SOL_SOCKET, SO_TIMESTAMP_OLD, &narrow, sizeof narrow);
}

void put_ipv4_controls(ControlWriter& out, const ReceiveOptions& options, const sockaddr_in& destination,
                       const ArrivalFacts& arrival, const ReceiverFacts& receiver) {
  if (options.ip_pktinfo) {
    in_pktinfo info{};
    info.ipi_ifindex = receiver.interface_index;
    info.ipi_spec_dst = destination.sin_addr;  // a unicast datagram's local address is its destination
    info.ipi_addr = destination.sin_addr;
    out.put(IPPROTO_IP, IP_PKTINFO, &info, sizeof info);
  }
  if (options.ip_ttl) put_int(out, IPPROTO_IP, IP_TTL, arrival.hop_limit);
  if (options.ip_tos) out.put(IPPROTO_IP, IP_TOS, &arrival.traffic_class, 1);
  if (options.ip_origdstaddr) {
    sockaddr_in original = destination;
    original.sin_port = htons(receiver.local_port);
    out.put(IPPROTO_IP, IP_ORIGDSTADDR, &original, sizeof original);
  }
}

}  // namespace

void write_receive_controls(msghdr& msg, const ReceiveOptions& options, const ArrivalFacts& arrival,
                            const ReceiverFacts& receiver) {
  ControlWriter out(msg);
  if (options.timestamp) put_timestamp(out, options, arrival.received);
  if (options.rxq_ovfl && receiver.drops != 0)
    out.put(SOL_SOCKET, SO_RXQ_OVFL, &receiver.drops, sizeof receiver.drops);
  const bool from_ipv4 = arrival.destination.ss_family == AF_INET;
  sockaddr_in destination4{};
  if (from_ipv4) std::memcpy(&destination4, &arrival.destination, sizeof destination4);
  if (receiver.domain == AF_INET) {
    if (from_ipv4) put_ipv4_controls(out, options, destination4, arrival, receiver);
    out.finish();
    return;
  }
  // An IPv6 socket: an IPv4 datagram's address appears as ::ffff:a.b.c.d.
  sockaddr_in6 destination6{};
  if (from_ipv4) {
    destination6.sin6_family = AF_INET6;
    destination6.sin6_addr.s6_addr[10] = 0xff;
    destination6.sin6_addr.s6_addr[11] = 0xff;
    std::memcpy(&destination6.sin6_addr.s6_addr[12], &destination4.sin_addr, 4);
  } else {
    std::memcpy(&destination6, &arrival.destination, sizeof destination6);
  }
  if (options.v6_pktinfo) {
    in6_pktinfo info{};
    info.ipi6_addr = destination6.sin6_addr;
    info.ipi6_ifindex = static_cast<unsigned>(receiver.interface_index);
    out.put(IPPROTO_IPV6, IPV6_PKTINFO, &info, sizeof info);
  }
  if (from_ipv4) {
    put_ipv4_controls(out, options, destination4, arrival, receiver);
  } else {
    if (options.v6_hoplimit) put_int(out, IPPROTO_IPV6, IPV6_HOPLIMIT, arrival.hop_limit);
    if (options.v6_tclass) put_int(out, IPPROTO_IPV6, IPV6_TCLASS, arrival.traffic_class);
    if (options.v6_origdstaddr) {
      sockaddr_in6 original = destination6;
      original.sin6_port = htons(receiver.local_port);
      original.sin6_scope_id = 0;  // global addresses only: rdma_cm gives no link-local UD paths
      out.put(IPPROTO_IPV6, IPV6_ORIGDSTADDR, &original, sizeof original);
    }
  }
  out.finish();
}

}  // namespace vsock::sock::dgram
