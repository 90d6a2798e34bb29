// Revert (docs/protocol.md §5, src/sock/wire/revert_message.*): the byte
// layout against the document, round trips with padding, and every
// rejection rule; a Revert is never taken for a Switch or a Bound.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "sock/wire/bound_message.hpp"
#include "sock/wire/revert_message.hpp"
#include "sock/wire/switch_message.hpp"

namespace vsock::sock::wire {
namespace {

using Bytes = std::vector<uint8_t>;

RevertMessage sample() {
  RevertMessage m;
  m.nonce = 0x1122334455667788;
  m.ring_written = 0x0000000100000002;
  m.ring_consumed = 0x0000000000030004;
  return m;
}

Bytes encoded(const RevertMessage& m) {
  Bytes out(kRevertMessageSize);
  encode(m, out.data());
  return out;
}

TEST(RevertMessage, LayoutMatchesTheDocument) {
  const Bytes want = {
      'V', 'S', 'K', 'R', 4, 0, 0, 0,                  // magic, version, reserved
      0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // nonce
      0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02,  // bytes written into the peer's ring
      0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x04,  // bytes of the peer's ring consumed
  };
  ASSERT_EQ(want.size(), kRevertMessageSize);
  EXPECT_EQ(encoded(sample()), want);
}

TEST(RevertMessage, RoundTripsAndIgnoresTrailingBytes) {
  for (uint64_t count : {uint64_t{0}, uint64_t{1}, UINT64_MAX}) {
    RevertMessage m = sample();
    m.ring_written = count;
    m.ring_consumed = UINT64_MAX - count;
    Bytes bytes = encoded(m);
    bytes.resize(bytes.size() + 32, 0x5a);  // a receive slot is 64 bytes
    core::Result<RevertMessage> parsed = parse_revert_message(bytes.data(), bytes.size());
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(parsed.value(), m);
  }
}

TEST(RevertMessage, RejectsShortInputMagicVersionReserved) {
  Bytes good = encoded(sample());
  for (size_t len = 0; len < kRevertMessageSize; ++len)
    EXPECT_EQ(parse_revert_message(good.data(), len).error(), EPROTO) << len;
  EXPECT_EQ(parse_revert_message(nullptr, 64).error(), EPROTO);
  for (size_t i = 0; i < 8; ++i) {  // magic, version, each reserved byte
    Bytes bad = good;
    bad[i] ^= 0x01;
    EXPECT_EQ(parse_revert_message(bad.data(), bad.size()).error(), EPROTO) << i;
  }
}

TEST(RevertMessage, IsNeitherASwitchNorABound) {
  Bytes revert = encoded(sample());
  revert.resize(64, 0);
  EXPECT_FALSE(parse_switch_message(revert.data(), revert.size()).has_value());
  EXPECT_FALSE(parse_bound_message(revert.data(), revert.size()).has_value());
  Bytes bound(kBoundMessageSize);
  BoundMessage message;
  message.nonce = 7;
  encode(message, bound.data());
  bound.resize(64, 0);
  EXPECT_FALSE(parse_revert_message(bound.data(), bound.size()).has_value());
}

}  // namespace
}  // namespace vsock::sock::wire
