#include "sock/wire/revert_message.hpp"

#include <cerrno>
#include <cstring>

#include "sock/wire/byte_order.hpp"
#include "sock/wire/message_header.hpp"

namespace vsock::sock::wire {
namespace {

// Field offsets of docs/protocol.md section 5, after the shared header.
constexpr size_t kOffRingWritten = kMessageHeaderSize;
constexpr size_t kOffRingConsumed = 24;
static_assert(kOffRingConsumed + 8 == kRevertMessageSize);

}  // namespace

bool operator==(const RevertMessage& a, const RevertMessage& b) {
  return a.nonce == b.nonce && a.ring_written == b.ring_written && a.ring_consumed == b.ring_consumed;
}

void encode(const RevertMessage& message, uint8_t out[kRevertMessageSize]) {
  std::memset(out, 0, kRevertMessageSize);
  encode_message_header(out, kRevertMagic, message.nonce);
  store_be64(out + kOffRingWritten, message.ring_written);
  store_be64(out + kOffRingConsumed, message.ring_consumed);
}

core::Result<RevertMessage> parse_revert_message(const void* data, size_t len) {
  using R = core::Result<RevertMessage>;
  if (data == nullptr || len < kRevertMessageSize) return R::fail(EPROTO);
  const uint8_t* in = static_cast<const uint8_t*>(data);
  RevertMessage message;
  if (!parse_message_header(in, kRevertMagic, &message.nonce)) return R::fail(EPROTO);
  message.ring_written = load_be64(in + kOffRingWritten);
  message.ring_consumed = load_be64(in + kOffRingConsumed);
  return R::ok(message);
}

}  // namespace vsock::sock::wire
