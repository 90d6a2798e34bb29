#include "sock/wire/switch_message.hpp"

#include <cerrno>
#include <cstring>

#include "sock/wire/byte_order.hpp"
#include "sock/wire/message_header.hpp"
#include "sock/wire/ring_field.hpp"

namespace vsock::sock::wire {
namespace {

// Field offsets of docs/protocol.md section 2, after the shared header.
constexpr size_t kOffTcpBytes = kMessageHeaderSize;
constexpr size_t kOffRing = 24;
static_assert(kOffRing + kRingFieldSize == kSwitchMessageSize);

}  // namespace

bool operator==(const SwitchMessage& a, const SwitchMessage& b) {
  return a.nonce == b.nonce && a.tcp_bytes == b.tcp_bytes && same_ring(a.ring, b.ring);
}

void encode(const SwitchMessage& message, uint8_t out[kSwitchMessageSize]) {
  std::memset(out, 0, kSwitchMessageSize);
  encode_message_header(out, kSwitchMagic, message.nonce);
  store_be64(out + kOffTcpBytes, message.tcp_bytes);
  encode_ring(message.ring, out + kOffRing);
}

core::Result<SwitchMessage> parse_switch_message(const void* data, size_t len) {
  using R = core::Result<SwitchMessage>;
  if (data == nullptr || len < kSwitchMessageSize) return R::fail(EPROTO);
  const uint8_t* in = static_cast<const uint8_t*>(data);
  SwitchMessage message;
  if (!parse_message_header(in, kSwitchMagic, &message.nonce)) return R::fail(EPROTO);
  core::Result<rdma::RingDescriptor> ring = parse_ring(in + kOffRing);
  if (!ring) return R::fail(EPROTO);
  message.tcp_bytes = load_be64(in + kOffTcpBytes);
  message.ring = ring.value();
  return R::ok(message);
}

}  // namespace vsock::sock::wire
