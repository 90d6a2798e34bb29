// Fuzz target: parse_bound_message (src/sock/wire/bound_message.hpp).
//
// Invariants: a rejection is always EPROTO; an accepted input is at least
// kBoundMessageSize bytes whose first kBoundMessageSize are exactly what
// encode() writes for its nonce and token; it is never also a valid Switch,
// UpgradeAccept or UpgradeRequest.
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "fuzz_check.hpp"
#include "sock/wire/bound_message.hpp"
#include "sock/wire/switch_message.hpp"
#include "sock/wire/upgrade_accept.hpp"
#include "sock/wire/upgrade_request.hpp"

using namespace vsock::sock::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vsock::core::Result<BoundMessage> parsed = parse_bound_message(data, size);
  if (!parsed) {
    FUZZ_CHECK(parsed.error() == EPROTO);
    return 0;
  }
  FUZZ_CHECK(size >= kBoundMessageSize);
  uint8_t out[kBoundMessageSize];
  encode(parsed.value(), out);
  FUZZ_CHECK(std::memcmp(out, data, kBoundMessageSize) == 0);
  FUZZ_CHECK(!parse_bound_message(data, kBoundMessageSize - 1).has_value());
  FUZZ_CHECK(!parse_switch_message(data, size).has_value());
  FUZZ_CHECK(!parse_upgrade_accept(data, size).has_value());
  FUZZ_CHECK(!parse_upgrade_request(data, size).has_value());
  return 0;
}
