// Fuzz target: parse_owner_request and parse_owner_answer
// (src/sock/wire/owner_request.hpp): what a fork child, or any local
// process of the same user, writes into an owner's inbox.
//
// Invariants: a rejection is always EPROTO; an accepted request is exactly
// 16 bytes that encode() writes back the same, with a nonzero nonce; it is
// never also a valid Revert; an accepted answer is one byte of 1..3.
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "fuzz_check.hpp"
#include "sock/wire/owner_request.hpp"
#include "sock/wire/revert_message.hpp"

using namespace vsock::sock::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vsock::core::Result<OwnerRequest> parsed = parse_owner_request(data, size);
  if (parsed) {
    FUZZ_CHECK(size == kOwnerRequestSize && parsed.value().nonce != 0);
    uint8_t out[kOwnerRequestSize];
    encode(parsed.value(), out);
    FUZZ_CHECK(std::memcmp(out, data, kOwnerRequestSize) == 0);
    FUZZ_CHECK(!parse_revert_message(data, size).has_value());
  } else {
    FUZZ_CHECK(parsed.error() == EPROTO);
  }
  vsock::core::Result<OwnerAnswer> answer = parse_owner_answer(data, size);
  if (answer) {
    FUZZ_CHECK(size == 1 && data[0] >= 1 && data[0] <= 3);
  } else {
    FUZZ_CHECK(answer.error() == EPROTO);
  }
  return 0;
}
