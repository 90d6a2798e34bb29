// Fuzz target: parse_resolve_request / parse_resolve_answer
// (src/sock/wire/udp_resolve.hpp), the private data of a UDP resolution.
//
// Invariants: a rejection is always EPROTO; an accepted input is at least
// the message's size and its first bytes are exactly what encode() writes
// back; an answer's cookie is never 0; one fewer byte is always refused.
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "fuzz_check.hpp"
#include "sock/wire/udp_resolve.hpp"

using namespace vsock::sock::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vsock::core::Result<ResolveRequest> request = parse_resolve_request(data, size);
  if (!request) {
    FUZZ_CHECK(request.error() == EPROTO);
  } else {
    FUZZ_CHECK(size >= kResolveRequestSize);
    uint8_t out[kResolveRequestSize];
    encode(request.value(), out);
    FUZZ_CHECK(std::memcmp(out, data, sizeof out) == 0);
    FUZZ_CHECK(!parse_resolve_request(data, kResolveRequestSize - 1).has_value());
  }
  vsock::core::Result<ResolveAnswer> answer = parse_resolve_answer(data, size);
  if (!answer) {
    FUZZ_CHECK(answer.error() == EPROTO);
    return 0;
  }
  FUZZ_CHECK(size >= kResolveAnswerSize);
  FUZZ_CHECK(answer.value().cookie != 0);
  FUZZ_CHECK(request.has_value());  // an answer starts with a valid request's bytes
  uint8_t out[kResolveAnswerSize];
  encode(answer.value(), out);
  FUZZ_CHECK(std::memcmp(out, data, sizeof out) == 0);
  FUZZ_CHECK(!parse_resolve_answer(data, kResolveAnswerSize - 1).has_value());
  return 0;
}
