// The header every UD message carries, right after the 40-byte GRH the
// receive buffer starts with (docs/protocol.md section 6). One UD queue
// pair serves every datagram socket of a process (DESIGN decision 5); this
// header says which socket a message is for and from, and how a datagram
// larger than the path MTU was cut into fragments.
//
// Addresses, TTL (hop limit) and TOS (traffic class) are not here: the
// receiver takes them from the GRH, which the fabric fills in, never from
// bytes a peer chose.
//
// Types:
//   DATA     a datagram or one fragment of it; the payload follows the
//            header. Unicast: the destination cookie names the receiving
//            socket. Multicast (flag): the destination cookie is 0, the
//            group (the GRH's destination GID) and destination port pick
//            the sockets. No-loop (flag, multicast only): the sender's
//            IP_MULTICAST_LOOP was off, so its own process must drop it.
//   UNREACH  the ICMP port-unreachable stand-in: a DATA named a destination
//            cookie the receiver does not know (the socket closed, or the
//            process is another one now). Sent back to the DATA's sender:
//            source port and destination port swapped, destination cookie
//            = the DATA's source cookie (the socket to tell: ECONNREFUSED
//            if it is connected), source cookie = the cookie that was not
//            found, datagram id = the DATA's. No payload.
//   REVOKE   the sender's socket (source port, source cookie) closed or was
//            handed to another process: forget the path to it, the next
//            datagram to its address must be resolved again. Destination
//            cookie and port name the one peer socket told, or are both 0
//            for every socket of the receiving process. Datagram id 0. No
//            payload.
//   ANNOUNCE the sender's socket (source port, source cookie) sent to the
//            destination (destination port, destination cookie: the socket
//            its resolution answered with) through the kernel while that
//            resolution was under way: the receiver learns the path back
//            from it (QP number and address handle from the completion and
//            GRH) as from a DATA, and delivers nothing. At most one per
//            socket and destination resolution. Datagram id 0. No payload.
// Control messages (UNREACH, REVOKE, ANNOUNCE) have no flags and are one
// fragment of an empty datagram.
//
// A cookie is a per-socket identifier its process chooses; 0 is never a
// socket's cookie.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"
#include "sock/wire/fragment_layout.hpp"

namespace vsock::sock::wire {

inline constexpr size_t kDatagramHeaderSize = 40;

enum class DatagramType : uint8_t {
  kData = 1,
  kUnreach = 2,
  kRevoke = 3,
  kAnnounce = 4,
};

inline constexpr uint8_t kDatagramFlagMulticast = 0x01;
inline constexpr uint8_t kDatagramFlagNoLoop = 0x02;
inline constexpr uint8_t kDatagramKnownFlags = kDatagramFlagMulticast | kDatagramFlagNoLoop;

struct DatagramHeader {
  DatagramType type = DatagramType::kData;
  uint8_t flags = 0;
  uint16_t source_port = 0;
  uint16_t destination_port = 0;
  uint32_t datagram_id = 0;         // per sending socket; the fragments of one datagram share it
  uint64_t destination_cookie = 0;  // the receiving socket (0: multicast, or REVOKE to every socket)
  uint64_t source_cookie = 0;       // the sending socket
  uint16_t fragment_index = 0;
  uint16_t fragment_count = 1;
  uint16_t total_length = 0;    // the whole datagram's bytes (<= kMaxDatagramSize)
  uint16_t payload_length = 0;  // this fragment's bytes, after the header
};

bool operator==(const DatagramHeader& a, const DatagramHeader& b);

// Writes the header only; the caller puts payload_length bytes after it.
void encode(const DatagramHeader& header, uint8_t out[kDatagramHeaderSize]);

// Reads the header of a received UD message of `len` bytes (the GRH already
// taken off): the header, then exactly payload_length bytes. EPROTO for
// anything else: fewer bytes than the header, or a length other than
// header + payload_length; a magic other than "VSKD", a version other than
// 1; an unknown type; a nonzero reserved byte; an unknown flag, no-loop
// without multicast; a layout fragment_span refuses (count 0 or above
// kMaxDatagramFragments, index >= count, total above kMaxDatagramSize, more
// fragments than bytes) or a payload_length other than its span's length;
// DATA with a source port, destination port or source cookie of 0, or a
// destination cookie that is 0 for unicast or nonzero for multicast;
// control messages with flags, fragments or payload, a source port or
// cookie of 0; UNREACH with a destination port or cookie of 0; REVOKE with
// a datagram id, or with only one of destination port and cookie 0;
// ANNOUNCE with a datagram id, or a destination port or cookie of 0.
// With these rules a header has exactly one wire form.
core::Result<DatagramHeader> parse_datagram_header(const void* data, size_t len);

}  // namespace vsock::sock::wire
