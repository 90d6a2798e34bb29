// Fuzz target: parse_resume_record (src/sock/wire/resume_record.hpp).
//
// Invariants: a rejection is always EPROTO; an accepted input is at least
// 32 bytes whose first 32 are exactly what encode() writes for the parsed
// record (one wire form), with resend_from <= ring_written; it is never also
// a valid Revert, Bound, Switch or UpgradeAccept.
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "fuzz_check.hpp"
#include "sock/wire/bound_message.hpp"
#include "sock/wire/resume_record.hpp"
#include "sock/wire/revert_message.hpp"
#include "sock/wire/switch_message.hpp"
#include "sock/wire/upgrade_accept.hpp"

using namespace vsock::sock::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vsock::core::Result<ResumeRecord> parsed = parse_resume_record(data, size);
  if (!parsed) {
    FUZZ_CHECK(parsed.error() == EPROTO);
    return 0;
  }
  FUZZ_CHECK(size >= kResumeRecordSize);
  FUZZ_CHECK(parsed.value().resend_from <= parsed.value().ring_written);
  uint8_t out[kResumeRecordSize];
  encode(parsed.value(), out);
  FUZZ_CHECK(std::memcmp(out, data, kResumeRecordSize) == 0);
  FUZZ_CHECK(!parse_resume_record(data, kResumeRecordSize - 1).has_value());
  FUZZ_CHECK(!parse_revert_message(data, size).has_value());
  FUZZ_CHECK(!parse_bound_message(data, size).has_value());
  FUZZ_CHECK(!parse_switch_message(data, size).has_value());
  FUZZ_CHECK(!parse_upgrade_accept(data, size).has_value());
  return 0;
}
