#include "sock/wire/datagram_header.hpp"

#include <cerrno>
#include <cstring>

#include "sock/wire/byte_order.hpp"
#include "sock/wire/protocol.hpp"

namespace vsock::sock::wire {
namespace {

// Field offsets of docs/protocol.md section 6.
constexpr size_t kOffVersion = 4;
constexpr size_t kOffType = 5;
constexpr size_t kOffFlags = 6;
constexpr size_t kOffReserved = 7;
constexpr size_t kOffSourcePort = 8;
constexpr size_t kOffDestinationPort = 10;
constexpr size_t kOffDatagramId = 12;
constexpr size_t kOffDestinationCookie = 16;
constexpr size_t kOffSourceCookie = 24;
constexpr size_t kOffFragmentIndex = 32;
constexpr size_t kOffFragmentCount = 34;
constexpr size_t kOffTotalLength = 36;
constexpr size_t kOffPayloadLength = 38;
static_assert(kOffPayloadLength + 2 == kDatagramHeaderSize);

bool known_type(uint8_t type) {
  return type == static_cast<uint8_t>(DatagramType::kData) || type == static_cast<uint8_t>(DatagramType::kUnreach) ||
         type == static_cast<uint8_t>(DatagramType::kRevoke) || type == static_cast<uint8_t>(DatagramType::kAnnounce);
}

// The rules a DATA header's addressing must follow (the layout is checked
// for every type before).
bool data_valid(const DatagramHeader& h) {
  if ((h.flags & kDatagramFlagNoLoop) && !(h.flags & kDatagramFlagMulticast)) return false;
  if (h.source_port == 0 || h.destination_port == 0 || h.source_cookie == 0) return false;
  const bool multicast = h.flags & kDatagramFlagMulticast;
  return multicast == (h.destination_cookie == 0);
}

bool control_valid(const DatagramHeader& h) {
  if (h.flags != 0 || h.fragment_count != 1 || h.total_length != 0) return false;
  if (h.source_port == 0 || h.source_cookie == 0) return false;
  if (h.type == DatagramType::kUnreach) return h.destination_port != 0 && h.destination_cookie != 0;
  if (h.type == DatagramType::kAnnounce)
    return h.datagram_id == 0 && h.destination_port != 0 && h.destination_cookie != 0;
  return h.datagram_id == 0 && (h.destination_port == 0) == (h.destination_cookie == 0);
}

}  // namespace

bool operator==(const DatagramHeader& a, const DatagramHeader& b) {
  return a.type == b.type && a.flags == b.flags && a.source_port == b.source_port &&
         a.destination_port == b.destination_port && a.datagram_id == b.datagram_id &&
         a.destination_cookie == b.destination_cookie && a.source_cookie == b.source_cookie &&
         a.fragment_index == b.fragment_index && a.fragment_count == b.fragment_count &&
         a.total_length == b.total_length && a.payload_length == b.payload_length;
}

void encode(const DatagramHeader& header, uint8_t out[kDatagramHeaderSize]) {
  std::memset(out, 0, kDatagramHeaderSize);
  store_be32(out, kDatagramMagic);
  out[kOffVersion] = kProtocolVersion;
  out[kOffType] = static_cast<uint8_t>(header.type);
  out[kOffFlags] = header.flags;
  store_be16(out + kOffSourcePort, header.source_port);
  store_be16(out + kOffDestinationPort, header.destination_port);
  store_be32(out + kOffDatagramId, header.datagram_id);
  store_be64(out + kOffDestinationCookie, header.destination_cookie);
  store_be64(out + kOffSourceCookie, header.source_cookie);
  store_be16(out + kOffFragmentIndex, header.fragment_index);
  store_be16(out + kOffFragmentCount, header.fragment_count);
  store_be16(out + kOffTotalLength, header.total_length);
  store_be16(out + kOffPayloadLength, header.payload_length);
}

core::Result<DatagramHeader> parse_datagram_header(const void* data, size_t len) {
  using R = core::Result<DatagramHeader>;
  if (data == nullptr || len < kDatagramHeaderSize) return R::fail(EPROTO);
  const uint8_t* in = static_cast<const uint8_t*>(data);
  if (load_be32(in) != kDatagramMagic || in[kOffVersion] != kProtocolVersion) return R::fail(EPROTO);
  if (!known_type(in[kOffType]) || in[kOffReserved] != 0) return R::fail(EPROTO);
  if (in[kOffFlags] & ~kDatagramKnownFlags) return R::fail(EPROTO);

  DatagramHeader h;
  h.type = static_cast<DatagramType>(in[kOffType]);
  h.flags = in[kOffFlags];
  h.source_port = load_be16(in + kOffSourcePort);
  h.destination_port = load_be16(in + kOffDestinationPort);
  h.datagram_id = load_be32(in + kOffDatagramId);
  h.destination_cookie = load_be64(in + kOffDestinationCookie);
  h.source_cookie = load_be64(in + kOffSourceCookie);
  h.fragment_index = load_be16(in + kOffFragmentIndex);
  h.fragment_count = load_be16(in + kOffFragmentCount);
  h.total_length = load_be16(in + kOffTotalLength);
  h.payload_length = load_be16(in + kOffPayloadLength);

  // The bytes received must be exactly the header and this fragment's
  // payload, and the payload exactly the span its index implies: nothing
  // after this reads a byte the sender did not account for.
  if (len - kDatagramHeaderSize != h.payload_length) return R::fail(EPROTO);
  core::Result<FragmentSpan> span = fragment_span(h.total_length, h.fragment_count, h.fragment_index);
  if (!span || span.value().length != h.payload_length) return R::fail(EPROTO);

  const bool valid = h.type == DatagramType::kData ? data_valid(h) : control_valid(h);
  if (!valid) return R::fail(EPROTO);
  return R::ok(h);
}

}  // namespace vsock::sock::wire
