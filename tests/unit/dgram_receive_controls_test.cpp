// write_receive_controls (src/sock/dgram/receive_controls.hpp) against the
// kernel itself: a datagram over loopback is received by a kernel socket
// with the same options, and the control messages we write for the same
// facts must match it byte for byte (timestamps: type and length only),
// for every room from 0 bytes up, MSG_CTRUNC and msg_controllen included.
#include "sock/dgram/receive_controls.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace vsock::sock::dgram {
namespace {

constexpr uint8_t kTos = 0x28;
constexpr int kTtl = 17;

struct Controls {
  std::vector<uint8_t> bytes;
  int flags = 0;
};

class KernelPair {
 public:
  explicit KernelPair(int domain) : domain_(domain) {
    receiver_ = socket(domain, SOCK_DGRAM, 0);
    sender_ = socket(domain, SOCK_DGRAM, 0);
    sockaddr_storage local{};
    socklen_t length;
    if (domain == AF_INET) {
      auto* in = reinterpret_cast<sockaddr_in*>(&local);
      in->sin_family = AF_INET;
      in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      length = sizeof *in;
    } else {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&local);
      in6->sin6_family = AF_INET6;
      in6->sin6_addr = in6addr_loopback;
      length = sizeof *in6;
    }
    EXPECT_EQ(bind(receiver_, reinterpret_cast<sockaddr*>(&local), length), 0);
    address_length_ = sizeof address_;
    EXPECT_EQ(getsockname(receiver_, reinterpret_cast<sockaddr*>(&address_), &address_length_), 0);
    int tos = kTos, ttl = kTtl;
    if (domain == AF_INET) {
      EXPECT_EQ(setsockopt(sender_, IPPROTO_IP, IP_TOS, &tos, sizeof tos), 0);
      EXPECT_EQ(setsockopt(sender_, IPPROTO_IP, IP_TTL, &ttl, sizeof ttl), 0);
    } else {
      EXPECT_EQ(setsockopt(sender_, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof tos), 0);
      EXPECT_EQ(setsockopt(sender_, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &ttl, sizeof ttl), 0);
    }
  }
  ~KernelPair() {
    close(receiver_);
    close(sender_);
  }

  void enable(int level, int name) {
    int one = 1;
    ASSERT_EQ(setsockopt(receiver_, level, name, &one, sizeof one), 0) << level << "/" << name;
  }

  // One datagram through the kernel, received with `room` bytes of control.
  Controls kernel(size_t room) {
    EXPECT_EQ(sendto(sender_, "x", 1, 0, reinterpret_cast<sockaddr*>(&address_), address_length_), 1);
    return receive(room);
  }

  Controls receive(size_t room) {
    char data[8];
    iovec iov{data, sizeof data};
    alignas(cmsghdr) uint8_t control[512] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = room ? control : nullptr;
    msg.msg_controllen = room;
    EXPECT_EQ(recvmsg(receiver_, &msg, 0), 1);
    Controls out;
    out.bytes.assign(control, control + msg.msg_controllen);
    out.flags = msg.msg_flags & MSG_CTRUNC;
    return out;
  }

  // The same datagram's facts, as the hub would have them from a GRH.
  Controls ours(const ReceiveOptions& options, size_t room) {
    ArrivalFacts arrival;
    arrival.destination = address_;
    if (domain_ == AF_INET)
      reinterpret_cast<sockaddr_in*>(&arrival.destination)->sin_port = 0;
    else
      reinterpret_cast<sockaddr_in6*>(&arrival.destination)->sin6_port = 0;
    arrival.hop_limit = kTtl;
    arrival.traffic_class = kTos;
    clock_gettime(CLOCK_REALTIME, &arrival.received);
    ReceiverFacts receiver;
    receiver.domain = domain_;
    receiver.local_port = domain_ == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&address_)->sin_port)
                                             : ntohs(reinterpret_cast<sockaddr_in6*>(&address_)->sin6_port);
    receiver.interface_index = static_cast<int>(if_nametoindex("lo"));
    alignas(cmsghdr) uint8_t control[512] = {};
    msghdr msg{};
    msg.msg_control = room ? control : nullptr;
    msg.msg_controllen = room;
    write_receive_controls(msg, options, arrival, receiver);
    Controls out;
    out.bytes.assign(control, control + msg.msg_controllen);
    out.flags = msg.msg_flags & MSG_CTRUNC;
    return out;
  }

 private:
  int domain_;
  int receiver_ = -1;
  int sender_ = -1;
  sockaddr_storage address_{};
  socklen_t address_length_ = 0;
};

// Timestamps differ in value: blank the data of SO_TIMESTAMP* messages.
void blank_timestamps(Controls& c) {
  size_t at = 0;
  while (at + sizeof(cmsghdr) <= c.bytes.size()) {
    cmsghdr header;
    std::memcpy(&header, c.bytes.data() + at, sizeof header);
    if (header.cmsg_len < sizeof header) break;
    if (header.cmsg_level == SOL_SOCKET && header.cmsg_type != SO_RXQ_OVFL) {
      size_t end = at + header.cmsg_len < c.bytes.size() ? at + header.cmsg_len : c.bytes.size();
      std::memset(c.bytes.data() + at + CMSG_LEN(0), 0, end - at - CMSG_LEN(0));
    }
    at += CMSG_ALIGN(header.cmsg_len);
  }
}

void expect_same_for_every_room(KernelPair& pair, const ReceiveOptions& options) {
  for (size_t room : {size_t{0}, size_t{8}, size_t{16}, size_t{20}, size_t{24}, size_t{32}, size_t{40}, size_t{48},
                      size_t{52}, size_t{56}, size_t{64}, size_t{72}, size_t{80}, size_t{96}, size_t{120},
                      size_t{512}}) {
    Controls kernel = pair.kernel(room);
    Controls ours = pair.ours(options, room);
    blank_timestamps(kernel);
    blank_timestamps(ours);
    EXPECT_EQ(ours.bytes, kernel.bytes) << "room " << room;
    EXPECT_EQ(ours.flags, kernel.flags) << "room " << room;
    // The comparison is not vacuous: with room, the kernel wrote something.
    if (room == 512) EXPECT_EQ(kernel.bytes.empty(), !options.any());
    if (room == 24 && options.any()) EXPECT_TRUE(kernel.flags & MSG_CTRUNC);
  }
}

TEST(ReceiveControls, NothingAskedWritesNothing) {
  KernelPair pair(AF_INET);
  expect_same_for_every_room(pair, ReceiveOptions{});
}

TEST(ReceiveControls, Ipv4AllAsTheKernel) {
  KernelPair pair(AF_INET);
  pair.enable(SOL_SOCKET, SO_TIMESTAMP);
  pair.enable(IPPROTO_IP, IP_PKTINFO);
  pair.enable(IPPROTO_IP, IP_RECVTTL);
  pair.enable(IPPROTO_IP, IP_RECVTOS);
  pair.enable(IPPROTO_IP, IP_RECVORIGDSTADDR);
  ReceiveOptions options;
  options.timestamp = true;
  options.ip_pktinfo = options.ip_ttl = options.ip_tos = options.ip_origdstaddr = true;
  expect_same_for_every_room(pair, options);
}

TEST(ReceiveControls, TimestampNsAndOverflowWithoutDrops) {
  KernelPair pair(AF_INET);
  pair.enable(SOL_SOCKET, SO_TIMESTAMPNS);
  pair.enable(SOL_SOCKET, SO_RXQ_OVFL);
  pair.enable(IPPROTO_IP, IP_RECVTTL);
  ReceiveOptions options;
  options.timestamp = options.timestamp_ns = true;
  options.rxq_ovfl = true;  // no drops: no message, as the kernel
  options.ip_ttl = true;
  expect_same_for_every_room(pair, options);
}

TEST(ReceiveControls, Ipv6AllAsTheKernel) {
  KernelPair pair(AF_INET6);
  pair.enable(IPPROTO_IPV6, IPV6_RECVPKTINFO);
  pair.enable(IPPROTO_IPV6, IPV6_RECVHOPLIMIT);
  pair.enable(IPPROTO_IPV6, IPV6_RECVTCLASS);
  pair.enable(IPPROTO_IPV6, IPV6_RECVORIGDSTADDR);
  ReceiveOptions options;
  options.v6_pktinfo = options.v6_hoplimit = options.v6_tclass = options.v6_origdstaddr = true;
  expect_same_for_every_room(pair, options);
}

TEST(ReceiveControls, OverflowCountIsWrittenWhenNonZero) {
  alignas(cmsghdr) uint8_t control[64] = {};
  msghdr msg{};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ReceiveOptions options;
  options.rxq_ovfl = true;
  ReceiverFacts receiver;
  receiver.drops = 7;
  write_receive_controls(msg, options, ArrivalFacts{}, receiver);
  ASSERT_EQ(msg.msg_controllen, CMSG_SPACE(sizeof(uint32_t)));
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->cmsg_level, SOL_SOCKET);
  EXPECT_EQ(c->cmsg_type, SO_RXQ_OVFL);
  uint32_t drops;
  std::memcpy(&drops, CMSG_DATA(c), sizeof drops);
  EXPECT_EQ(drops, 7u);
}

}  // namespace
}  // namespace vsock::sock::dgram
