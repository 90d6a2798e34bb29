// Reject (docs/protocol.md §1, src/sock/wire/reject_message.*): the byte
// layout against the document, round trips with the CM's padding, and
// every rejection rule of the parser.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "sock/wire/bound_message.hpp"
#include "sock/wire/reject_message.hpp"

namespace vsock::sock::wire {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes encoded(const RejectMessage& m) {
  Bytes out(kRejectMessageSize);
  encode(m, out.data());
  return out;
}

RejectMessage redirect_sample() {
  RejectMessage m;
  m.nonce = 0x1122334455667788;
  m.reason = RejectReason::kRedirect;
  m.port = 0xA1B2;
  return m;
}

TEST(RejectMessage, LayoutMatchesTheDocument) {
  const Bytes want = {
      'V', 'S', 'K', 'J', 4, 0, 0, 0,                  // magic, version, reserved
      0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // nonce
      3, 0, 0xA1, 0xB2,                                // reason, reserved, port
  };
  ASSERT_EQ(want.size(), kRejectMessageSize);
  EXPECT_EQ(encoded(redirect_sample()), want);
}

TEST(RejectMessage, RoundTripsEveryReasonWithPadding) {
  for (RejectReason reason :
       {RejectReason::kConnection, RejectReason::kPeer, RejectReason::kRedirect, RejectReason::kAfterData}) {
    RejectMessage m;
    m.nonce = 42;
    m.reason = reason;
    m.port = reason == RejectReason::kRedirect ? 7 : 0;
    Bytes bytes = encoded(m);
    bytes.resize(148, 0);  // an IB CM REJ
    core::Result<RejectMessage> parsed = parse_reject_message(bytes.data(), bytes.size());
    ASSERT_TRUE(parsed) << static_cast<int>(reason);
    EXPECT_EQ(parsed.value().nonce, 42u);
    EXPECT_EQ(parsed.value().reason, reason);
    EXPECT_EQ(parsed.value().port, m.port);
  }
}

void expect_refused(const Bytes& bytes) {
  core::Result<RejectMessage> parsed = parse_reject_message(bytes.data(), bytes.size());
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), EPROTO);
}

TEST(RejectMessage, RefusesWhatIsNotOne) {
  Bytes good = encoded(redirect_sample());
  expect_refused(Bytes(good.begin(), good.end() - 1));  // short
  Bytes bad = good;
  bad[3] = 'B';  // another magic
  expect_refused(bad);
  bad = good;
  bad[4] = 1;  // another version (the one before the token)
  expect_refused(bad);
  bad = good;
  bad[6] = 1;  // header reserved byte
  expect_refused(bad);
  bad = good;
  bad[17] = 1;  // reserved byte after the reason
  expect_refused(bad);
  for (uint8_t reason : {0, 5, 255}) {
    bad = good;
    bad[16] = reason;
    expect_refused(bad);
  }
  bad = good;
  bad[18] = bad[19] = 0;  // a redirect without a port
  expect_refused(bad);
  bad = good;
  bad[16] = 1;  // a port without a redirect
  expect_refused(bad);
  EXPECT_FALSE(parse_reject_message(nullptr, 20));
}

TEST(RejectMessage, IsNeverABound) {
  Bytes bytes = encoded(redirect_sample());
  EXPECT_FALSE(parse_bound_message(bytes.data(), bytes.size()));
}

}  // namespace
}  // namespace vsock::sock::wire
