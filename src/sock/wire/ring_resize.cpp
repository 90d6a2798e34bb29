#include "sock/wire/ring_resize.hpp"

#include <cerrno>
#include <cstring>

#include "sock/wire/byte_order.hpp"
#include "sock/wire/protocol.hpp"
#include "sock/wire/ring_field.hpp"

namespace vsock::sock::wire {
namespace {

// Field offsets of docs/protocol.md section 3.1. Both messages start with
// magic (4) and version (1).
constexpr size_t kOffVersion = 4;
// RingGrow: reserved zero (3), then the ring.
constexpr size_t kOffGrowReserved = 5;
constexpr size_t kOffGrowRing = 8;
static_assert(kOffGrowRing + kRingFieldSize == kRingGrowMessageSize);
// RingMoved: flags (1), reserved zero (2), then the position.
constexpr size_t kOffMovedFlags = 5;
constexpr size_t kOffMovedReserved = 6;
constexpr size_t kOffMovedPosition = 8;
static_assert(kOffMovedPosition + 8 == kRingMovedMessageSize);

void encode_magic_version(uint8_t* out, uint32_t magic) {
  store_be32(out, magic);
  out[kOffVersion] = kProtocolVersion;
}

bool magic_version_match(const uint8_t* in, uint32_t magic) {
  return load_be32(in) == magic && in[kOffVersion] == kProtocolVersion;
}

}  // namespace

bool operator==(const RingGrowMessage& a, const RingGrowMessage& b) { return same_ring(a.ring, b.ring); }

bool operator==(const RingMovedMessage& a, const RingMovedMessage& b) {
  return a.accepted == b.accepted && a.position == b.position;
}

void encode(const RingGrowMessage& message, uint8_t out[kRingGrowMessageSize]) {
  std::memset(out, 0, kRingGrowMessageSize);
  encode_magic_version(out, kRingGrowMagic);
  encode_ring(message.ring, out + kOffGrowRing);
}

core::Result<RingGrowMessage> parse_ring_grow(const void* data, size_t len) {
  using R = core::Result<RingGrowMessage>;
  if (data == nullptr || len < kRingGrowMessageSize) return R::fail(EPROTO);
  const uint8_t* in = static_cast<const uint8_t*>(data);
  if (!magic_version_match(in, kRingGrowMagic) || !all_zero(in + kOffGrowReserved, 3)) return R::fail(EPROTO);
  core::Result<rdma::RingDescriptor> ring = parse_ring(in + kOffGrowRing);
  if (!ring) return R::fail(EPROTO);
  RingGrowMessage message;
  message.ring = ring.value();
  return R::ok(message);
}

void encode(const RingMovedMessage& message, uint8_t out[kRingMovedMessageSize]) {
  std::memset(out, 0, kRingMovedMessageSize);
  encode_magic_version(out, kRingMovedMagic);
  out[kOffMovedFlags] = message.accepted ? kRingMovedAccepted : 0;
  store_be64(out + kOffMovedPosition, message.position);
}

core::Result<RingMovedMessage> parse_ring_moved(const void* data, size_t len) {
  using R = core::Result<RingMovedMessage>;
  if (data == nullptr || len < kRingMovedMessageSize) return R::fail(EPROTO);
  const uint8_t* in = static_cast<const uint8_t*>(data);
  if (!magic_version_match(in, kRingMovedMagic) || !all_zero(in + kOffMovedReserved, 2)) return R::fail(EPROTO);
  const uint8_t flags = in[kOffMovedFlags];
  if ((flags & ~kRingMovedAccepted) != 0) return R::fail(EPROTO);
  RingMovedMessage message;
  message.accepted = (flags & kRingMovedAccepted) != 0;
  message.position = load_be64(in + kOffMovedPosition);
  // A refusal names no position: one form only.
  if (!message.accepted && message.position != 0) return R::fail(EPROTO);
  return R::ok(message);
}

bool is_ring_resize_message(const void* data, size_t len) {
  if (data == nullptr || len < 4) return false;
  const uint32_t magic = load_be32(static_cast<const uint8_t*>(data));
  return magic == kRingGrowMagic || magic == kRingMovedMagic;
}

}  // namespace vsock::sock::wire
