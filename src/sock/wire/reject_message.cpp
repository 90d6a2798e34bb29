#include "sock/wire/reject_message.hpp"

#include <cerrno>
#include <cstring>

#include "sock/wire/message_header.hpp"

namespace vsock::sock::wire {

void encode(const RejectMessage& message, uint8_t out[kRejectMessageSize]) {
  std::memset(out, 0, kRejectMessageSize);
  encode_message_header(out, kRejectMagic, message.nonce);
  out[16] = static_cast<uint8_t>(message.reason);
  store_be16(out + 18, message.port);
}

core::Result<RejectMessage> parse_reject_message(const void* data, size_t len) {
  using R = core::Result<RejectMessage>;
  if (data == nullptr || len < kRejectMessageSize) return R::fail(EPROTO);
  const auto* in = static_cast<const uint8_t*>(data);
  RejectMessage message;
  if (!parse_message_header(in, kRejectMagic, &message.nonce) || in[17] != 0) return R::fail(EPROTO);
  uint8_t reason = in[16];
  if (reason < static_cast<uint8_t>(RejectReason::kConnection) || reason > static_cast<uint8_t>(RejectReason::kAfterData))
    return R::fail(EPROTO);
  message.reason = static_cast<RejectReason>(reason);
  message.port = load_be16(in + 18);
  if ((message.reason == RejectReason::kRedirect) != (message.port != 0)) return R::fail(EPROTO);
  return R::ok(message);
}

}  // namespace vsock::sock::wire
