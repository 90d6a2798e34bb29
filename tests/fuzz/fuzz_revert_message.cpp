// Fuzz target: parse_revert_message (src/sock/wire/revert_message.hpp).
//
// Invariants: a rejection is always EPROTO; an accepted input is at least
// 32 bytes whose first 32 are exactly what encode() writes for the parsed
// message (one wire form); it is never also a valid Bound, Switch,
// UpgradeAccept or UpgradeRequest.
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "fuzz_check.hpp"
#include "sock/wire/bound_message.hpp"
#include "sock/wire/revert_message.hpp"
#include "sock/wire/switch_message.hpp"
#include "sock/wire/upgrade_accept.hpp"
#include "sock/wire/upgrade_request.hpp"

using namespace vsock::sock::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vsock::core::Result<RevertMessage> parsed = parse_revert_message(data, size);
  if (!parsed) {
    FUZZ_CHECK(parsed.error() == EPROTO);
    return 0;
  }
  FUZZ_CHECK(size >= kRevertMessageSize);
  uint8_t out[kRevertMessageSize];
  encode(parsed.value(), out);
  FUZZ_CHECK(std::memcmp(out, data, kRevertMessageSize) == 0);
  FUZZ_CHECK(!parse_revert_message(data, kRevertMessageSize - 1).has_value());
  FUZZ_CHECK(!parse_bound_message(data, size).has_value());
  FUZZ_CHECK(!parse_switch_message(data, size).has_value());
  FUZZ_CHECK(!parse_upgrade_accept(data, size).has_value());
  FUZZ_CHECK(!parse_upgrade_request(data, size).has_value());
  return 0;
}
