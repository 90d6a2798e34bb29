#include "sock/wire/bound_message.hpp"

#include <cerrno>
#include <cstring>

#include "sock/wire/message_header.hpp"

namespace vsock::sock::wire {

static_assert(kBoundMessageSize == kMessageHeaderSize);

void encode_bound(uint64_t nonce, uint8_t out[kBoundMessageSize]) {
  std::memset(out, 0, kBoundMessageSize);
  encode_message_header(out, kBoundMagic, nonce);
}

core::Result<uint64_t> parse_bound_message(const void* data, size_t len) {
  using R = core::Result<uint64_t>;
  if (data == nullptr || len < kBoundMessageSize) return R::fail(EPROTO);
  uint64_t nonce = 0;
  if (!parse_message_header(static_cast<const uint8_t*>(data), kBoundMagic, &nonce)) return R::fail(EPROTO);
  return R::ok(nonce);
}

}  // namespace vsock::sock::wire
