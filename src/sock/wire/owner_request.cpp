#include "sock/wire/owner_request.hpp"

#include <cerrno>
#include <cstring>

#include "sock/wire/message_header.hpp"

namespace vsock::sock::wire {

void encode(const OwnerRequest& request, uint8_t out[kOwnerRequestSize]) {
  std::memset(out, 0, kOwnerRequestSize);
  encode_message_header(out, kOwnerMagic, request.nonce);
}

core::Result<OwnerRequest> parse_owner_request(const void* data, size_t len) {
  using R = core::Result<OwnerRequest>;
  if (data == nullptr || len != kOwnerRequestSize) return R::fail(EPROTO);
  OwnerRequest request;
  if (!parse_message_header(static_cast<const uint8_t*>(data), kOwnerMagic, &request.nonce) || request.nonce == 0)
    return R::fail(EPROTO);
  return R::ok(request);
}

core::Result<OwnerAnswer> parse_owner_answer(const void* data, size_t len) {
  using R = core::Result<OwnerAnswer>;
  if (data == nullptr || len != 1) return R::fail(EPROTO);
  const uint8_t value = *static_cast<const uint8_t*>(data);
  if (value < static_cast<uint8_t>(OwnerAnswer::kOnTcp) || value > static_cast<uint8_t>(OwnerAnswer::kNotHere))
    return R::fail(EPROTO);
  return R::ok(static_cast<OwnerAnswer>(value));
}

}  // namespace vsock::sock::wire
