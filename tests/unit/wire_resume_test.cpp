// Resume (docs/protocol.md §5.1, src/sock/wire/resume_record.*): the byte
// layout against the document, round trips with the stream bytes that
// follow it on TCP, and every rejection rule; a Resume is never taken for
// a Revert, a Switch or a Bound.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "sock/wire/bound_message.hpp"
#include "sock/wire/resume_record.hpp"
#include "sock/wire/revert_message.hpp"
#include "sock/wire/switch_message.hpp"

namespace vsock::sock::wire {
namespace {

using Bytes = std::vector<uint8_t>;

ResumeRecord sample() {
  ResumeRecord r;
  r.nonce = 0x1122334455667788;
  r.resend_from = 0x0000000000030004;
  r.ring_written = 0x0000000100000002;
  return r;
}

Bytes encoded(const ResumeRecord& r) {
  Bytes out(kResumeRecordSize);
  encode(r, out.data());
  return out;
}

TEST(ResumeRecord, LayoutMatchesTheDocument) {
  const Bytes want = {
      'V', 'S', 'K', 'F', 4, 0, 0, 0,                  // magic, version, reserved
      0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // nonce
      0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x04,  // resend from
      0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02,  // ring bytes written
  };
  ASSERT_EQ(want.size(), kResumeRecordSize);
  EXPECT_EQ(encoded(sample()), want);
}

TEST(ResumeRecord, RoundTripsAndIgnoresTheStreamAfterIt) {
  for (uint64_t from : {uint64_t{0}, uint64_t{1}, UINT64_MAX}) {
    ResumeRecord r = sample();
    r.resend_from = from;
    r.ring_written = UINT64_MAX;
    Bytes bytes = encoded(r);
    bytes.resize(bytes.size() + 100, 0x5a);  // the resent bytes follow on TCP
    core::Result<ResumeRecord> parsed = parse_resume_record(bytes.data(), bytes.size());
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(parsed.value(), r);
  }
}

TEST(ResumeRecord, RejectsShortInputMagicVersionReservedAndAResendPastTheEnd) {
  Bytes good = encoded(sample());
  for (size_t len = 0; len < kResumeRecordSize; ++len)
    EXPECT_EQ(parse_resume_record(good.data(), len).error(), EPROTO) << len;
  EXPECT_EQ(parse_resume_record(nullptr, 64).error(), EPROTO);
  for (size_t i = 0; i < 8; ++i) {  // magic, version, each reserved byte
    Bytes bad = good;
    bad[i] ^= 0x01;
    EXPECT_EQ(parse_resume_record(bad.data(), bad.size()).error(), EPROTO) << i;
  }
  ResumeRecord past = sample();
  past.resend_from = past.ring_written + 1;
  Bytes bad = encoded(past);
  EXPECT_EQ(parse_resume_record(bad.data(), bad.size()).error(), EPROTO);
  past.resend_from = past.ring_written;  // nothing to resend: fine
  Bytes edge = encoded(past);
  EXPECT_TRUE(parse_resume_record(edge.data(), edge.size()).has_value());
}

TEST(ResumeRecord, IsNoOtherMessage) {
  Bytes resume = encoded(sample());
  resume.resize(64, 0);
  EXPECT_FALSE(parse_revert_message(resume.data(), resume.size()).has_value());
  EXPECT_FALSE(parse_switch_message(resume.data(), resume.size()).has_value());
  EXPECT_FALSE(parse_bound_message(resume.data(), resume.size()).has_value());
  RevertMessage revert;
  revert.nonce = 3;
  Bytes other(kRevertMessageSize);
  encode(revert, other.data());
  EXPECT_FALSE(parse_resume_record(other.data(), other.size()).has_value());
}

TEST(ResumeRecord, ItsHeaderAloneIsRecognisedForItsConnectionOnly) {
  const Bytes bytes = encoded(sample());
  EXPECT_TRUE(begins_resume_record(bytes.data(), 16, sample().nonce));
  EXPECT_TRUE(begins_resume_record(bytes.data(), bytes.size(), sample().nonce));
  EXPECT_FALSE(begins_resume_record(bytes.data(), 15, sample().nonce));  // not all of the header yet
  EXPECT_FALSE(begins_resume_record(bytes.data(), 16, sample().nonce + 1));
  EXPECT_FALSE(begins_resume_record(nullptr, 16, sample().nonce));
  Bytes urgent = bytes;
  urgent[0] = '!';  // anything else on TCP, e.g. an urgent byte read inline
  EXPECT_FALSE(begins_resume_record(urgent.data(), urgent.size(), sample().nonce));
  RevertMessage revert;
  revert.nonce = sample().nonce;
  Bytes other(kRevertMessageSize);
  encode(revert, other.data());
  EXPECT_FALSE(begins_resume_record(other.data(), other.size(), sample().nonce));
}

}  // namespace
}  // namespace vsock::sock::wire
