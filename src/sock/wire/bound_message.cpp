#include "sock/wire/bound_message.hpp"

#include <cerrno>
#include <cstring>

#include "sock/wire/message_header.hpp"

namespace vsock::sock::wire {

void encode(const BoundMessage& message, uint8_t out[kBoundMessageSize]) {
  std::memset(out, 0, kBoundMessageSize);
  encode_message_header(out, kBoundMagic, message.nonce);
  std::memcpy(out + kMessageHeaderSize, message.token, kSwitchTokenSize);
  store_be64(out + kMessageHeaderSize + kSwitchTokenSize, message.tcp_read);
}

core::Result<BoundMessage> parse_bound_message(const void* data, size_t len) {
  using R = core::Result<BoundMessage>;
  if (data == nullptr || len < kBoundMessageSize) return R::fail(EPROTO);
  const uint8_t* in = static_cast<const uint8_t*>(data);
  BoundMessage message;
  if (!parse_message_header(in, kBoundMagic, &message.nonce)) return R::fail(EPROTO);
  std::memcpy(message.token, in + kMessageHeaderSize, kSwitchTokenSize);
  message.tcp_read = load_be64(in + kMessageHeaderSize + kSwitchTokenSize);
  return R::ok(message);
}

}  // namespace vsock::sock::wire
