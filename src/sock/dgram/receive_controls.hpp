// Receive control messages for datagrams that came over UD: what the
// kernel's UDP recvmsg() would have written into msg_control for the same
// datagram, in the kernel's order and with its truncation rules (pure).
//
// What a UD datagram can answer, and where the answer comes from:
//   SO_TIMESTAMP / SO_TIMESTAMPNS (old and new forms): the time the hub
//     took the datagram from the completion queue (CLOCK_REALTIME);
//   SO_RXQ_OVFL: the socket's drops when the datagram was queued (both
//     paths' drops: the caller adds the kernel's);
//   IP_PKTINFO / IPV6_PKTINFO: the destination address of the GRH, the
//     index of the interface that holds it;
//   IP_RECVTTL / IPV6_RECVHOPLIMIT: the GRH's TTL or hop limit;
//   IP_RECVTOS / IPV6_RECVTCLASS: the GRH's TOS byte or traffic class;
//   IP_RECVORIGDSTADDR / IPV6_RECVORIGDSTADDR: destination address and our
//     port.
// Order, as Linux's udp_recvmsg()/udpv6_recvmsg(): the socket-level ones
// (timestamp, then the drop count if non-zero), then the IP level:
// IPv4 socket: PKTINFO, TTL, TOS, ORIGDSTADDR; IPv6 socket: IPV6_PKTINFO,
// then for an IPv4 sender the IP_* ones above, for an IPv6 sender
// HOPLIMIT, TCLASS, ORIGDSTADDR.
//
// Room, as the kernel's put_cmsg(): a message that does not fit whole is
// written cut to the room left (header first; cmsg_len says the cut
// length) and MSG_CTRUNC is set; with less room than a header, nothing is
// written and MSG_CTRUNC is set. msg_controllen becomes the bytes used.
#pragma once
#include <sys/socket.h>

#include <cstdint>
#include <ctime>

namespace vsock::sock::dgram {

// Which receive options a socket has on (read from the kernel socket after
// each setsockopt of one of them, so the kernel's own rules decide, e.g.
// SO_TIMESTAMPNS turning SO_TIMESTAMP's form).
struct ReceiveOptions {
  bool timestamp = false;     // SO_TIMESTAMP(NS) in any form
  bool timestamp_ns = false;  // ... as a timespec
  bool timestamp_new = false; // ... the _NEW (64-bit time) cmsg types
  bool rxq_ovfl = false;
  bool ip_pktinfo = false;
  bool ip_ttl = false;
  bool ip_tos = false;
  bool ip_origdstaddr = false;
  bool v6_pktinfo = false;
  bool v6_hoplimit = false;
  bool v6_tclass = false;
  bool v6_origdstaddr = false;

  bool any() const {
    return timestamp || rxq_ovfl || ip_pktinfo || ip_ttl || ip_tos || ip_origdstaddr || v6_pktinfo || v6_hoplimit ||
           v6_tclass || v6_origdstaddr;
  }
};

// What the network said of one datagram (from the GRH and the hub).
struct ArrivalFacts {
  sockaddr_storage destination{};  // port 0; AF_INET for an IPv4 datagram
  uint8_t hop_limit = 0;
  uint8_t traffic_class = 0;
  timespec received{};
};

// The receiving socket's side of it.
struct ReceiverFacts {
  int domain = AF_INET;       // the socket's family
  uint16_t local_port = 0;    // host order
  int interface_index = 0;    // of the interface holding the destination
  uint32_t drops = 0;         // the socket's drop count when it was queued
};

// Writes the control messages `options` ask for into msg.msg_control /
// msg_controllen (see above); ORs MSG_CTRUNC into msg.msg_flags when cut.
void write_receive_controls(msghdr& msg, const ReceiveOptions& options, const ArrivalFacts& arrival,
                            const ReceiverFacts& receiver);

}  // namespace vsock::sock::dgram
