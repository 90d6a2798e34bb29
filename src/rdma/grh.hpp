// parse_grh: what the 40 bytes in front of every UD receive say about the
// datagram's sender, without any verbs call (pure, fuzzed: a peer and the
// network control these bytes).
//
// A UD receive buffer starts with a 40-byte slot that the device fills when
// the completion has IBV_WC_GRH (always on RoCE). Two layouts share it:
//
//  - IPv6 form (InfiniBand GRH, RoCE v1, RoCE v2 over IPv6): the 40-byte
//    IPv6 header itself: version 6, traffic class, flow label, payload
//    length, next header, hop limit, source GID (bytes 8..23), destination
//    GID (bytes 24..39).
//  - IPv4 form (RoCE v2 over IPv4): the first 20 bytes are not a header
//    (rxe zeroes them: rxe_resp.c build_rdma_network_hdr copies ip_hdr()
//    behind 20 reserved bytes, the kernel's union rdma_network_hdr), and
//    bytes 20..39 are the packet's IPv4 header.
//
// The completion does not say which form it is (the kernel's
// ib_wc.network_hdr_type does not reach ibv_wc), so the form is guessed
// from the bytes the way rdma-core's get_grh_header_version()
// (libibverbs/verbs.c) and the kernel's ib_get_rdma_header_version() do,
// so that our reading and ibv_create_ah_from_wc() always agree:
//   byte 0's high nibble is not 6: IPv4 form if byte 20 says version 4
//   (we also require IHL 5: only 20 bytes fit), else invalid;
//   it is 6: IPv4 form only if bytes 20..39 are an IPv4 header with IHL 5
//   and a correct header checksum, else IPv6 form.
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

#include "core/result.hpp"

namespace vsock::rdma {

// Bytes a UD receive buffer must keep in front of the payload, and that
// ibv_wc::byte_len counts on top of it.
inline constexpr size_t kGrhSize = 40;
// Where the IPv4 header starts in the IPv4 form.
inline constexpr size_t kGrhIpv4Offset = 20;

enum class GrhForm : uint8_t { kIpv6, kIpv4 };

struct GrhInfo {
  GrhForm form = GrhForm::kIpv6;
  // The sender's and the destination's address, port 0. An IPv4-mapped GID
  // (::ffff:a.b.c.d) is given as AF_INET a.b.c.d, any other as AF_INET6
  // (sin6_scope_id 0: the caller knows the interface).
  sockaddr_storage source{};
  sockaddr_storage destination{};
  // IPv4 TTL or IPv6 hop limit, as received (already decremented by routers).
  uint8_t hop_limit = 0;
  // IPv4 TOS byte (DSCP and ECN) or IPv6 traffic class.
  uint8_t traffic_class = 0;
  // IPv6 form only (0 in the IPv4 form).
  uint32_t flow_label = 0;
  // IPv6 next header (0x1B on InfiniBand, 17 for RoCE v2) or IPv4 protocol
  // (17: UDP); reported, not checked.
  uint8_t next_header = 0;
};

// Reads the GRH slot `grh` of `length` bytes (at least kGrhSize; more is
// ignored). EPROTO when it is too short or neither form.
core::Result<GrhInfo> parse_grh(const uint8_t* grh, size_t length);

// The length of a sockaddr that parse_grh() wrote (sizeof(sockaddr_in) or
// sizeof(sockaddr_in6)); 0 for an empty one.
socklen_t grh_address_length(const sockaddr_storage& address);

// Copies the GRH slot `grh` (kGrhSize bytes, of the form parse_grh() found)
// into `out` with its destination replaced by the IPv4 address `local`
// (network order): the IPv4 form's header gets the address and a correct
// checksum again, the IPv6 form the IPv4-mapped GID. For a datagram sent to
// a multicast group, ibv_create_ah_from_wc() finds no local GID for the
// group; as if sent to `local`, it makes the address handle back to the
// sender from this host's own GID.
void grh_with_destination(const uint8_t* grh, GrhForm form, uint32_t local, uint8_t* out);

// The IPv4 header checksum (RFC 791) of a 20-byte header whose checksum
// field (bytes 10..11) is taken as zero; big-endian, as on the wire.
uint16_t ipv4_header_checksum(const uint8_t* header);

}  // namespace vsock::rdma
