// Fuzz target: parse_reject_message (src/sock/wire/reject_message.hpp).
//
// Invariants: a rejection is always EPROTO; an accepted input is at least
// 20 bytes whose first 20 are exactly what encode() writes for the parsed
// message; a redirect always names a port, nothing else does; a Reject is
// never also a valid Bound, Switch, Revert or UpgradeAccept.
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "fuzz_check.hpp"
#include "sock/wire/bound_message.hpp"
#include "sock/wire/reject_message.hpp"
#include "sock/wire/revert_message.hpp"
#include "sock/wire/switch_message.hpp"
#include "sock/wire/upgrade_accept.hpp"

using namespace vsock::sock::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vsock::core::Result<RejectMessage> parsed = parse_reject_message(data, size);
  if (!parsed) {
    FUZZ_CHECK(parsed.error() == EPROTO);
    return 0;
  }
  FUZZ_CHECK(size >= kRejectMessageSize);
  const RejectMessage& message = parsed.value();
  FUZZ_CHECK((message.reason == RejectReason::kRedirect) == (message.port != 0));
  uint8_t out[kRejectMessageSize];
  encode(message, out);
  FUZZ_CHECK(std::memcmp(out, data, kRejectMessageSize) == 0);
  FUZZ_CHECK(!parse_reject_message(data, kRejectMessageSize - 1).has_value());
  FUZZ_CHECK(!parse_bound_message(data, size).has_value());
  FUZZ_CHECK(!parse_switch_message(data, size).has_value());
  FUZZ_CHECK(!parse_revert_message(data, size).has_value());
  FUZZ_CHECK(!parse_upgrade_accept(data, size).has_value());
  return 0;
}
