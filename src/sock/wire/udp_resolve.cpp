#include "sock/wire/udp_resolve.hpp"

#include <cerrno>
#include <cstring>

#include "sock/wire/message_header.hpp"

namespace vsock::sock::wire {

static_assert(kResolveRequestSize == kMessageHeaderSize);
static_assert(kResolveAnswerSize == kMessageHeaderSize + 8);

void encode(const ResolveRequest& request, uint8_t out[kResolveRequestSize]) {
  std::memset(out, 0, kResolveRequestSize);
  encode_message_header(out, kResolveMagic, request.nonce);
}

void encode(const ResolveAnswer& answer, uint8_t out[kResolveAnswerSize]) {
  std::memset(out, 0, kResolveAnswerSize);
  encode_message_header(out, kResolveMagic, answer.nonce);
  store_be64(out + kMessageHeaderSize, answer.cookie);
}

core::Result<ResolveRequest> parse_resolve_request(const void* data, size_t len) {
  using R = core::Result<ResolveRequest>;
  if (data == nullptr || len < kResolveRequestSize) return R::fail(EPROTO);
  ResolveRequest request;
  if (!parse_message_header(static_cast<const uint8_t*>(data), kResolveMagic, &request.nonce)) return R::fail(EPROTO);
  return R::ok(request);
}

core::Result<ResolveAnswer> parse_resolve_answer(const void* data, size_t len) {
  using R = core::Result<ResolveAnswer>;
  if (data == nullptr || len < kResolveAnswerSize) return R::fail(EPROTO);
  const uint8_t* in = static_cast<const uint8_t*>(data);
  ResolveAnswer answer;
  if (!parse_message_header(in, kResolveMagic, &answer.nonce)) return R::fail(EPROTO);
  answer.cookie = load_be64(in + kMessageHeaderSize);
  if (answer.cookie == 0) return R::fail(EPROTO);
  return R::ok(answer);
}

}  // namespace vsock::sock::wire
