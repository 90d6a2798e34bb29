// Bound (docs/protocol.md §2, src/sock/wire/bound_message.*): the byte
// layout against the document (header, the 16-byte token, the count), a round
// trip with padding, and every rejection rule.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "sock/wire/bound_message.hpp"

namespace vsock::sock::wire {
namespace {

using Bytes = std::vector<uint8_t>;

BoundMessage sample() {
  BoundMessage m;
  m.nonce = 0x0102030405060708;
  for (size_t i = 0; i < kSwitchTokenSize; ++i) m.token[i] = static_cast<uint8_t>(0xf0 + i);
  m.tcp_read = 0x1112131415161718;
  return m;
}

TEST(BoundMessage, LayoutIsTheDocumentsOne) {
  Bytes out(kBoundMessageSize);
  encode(sample(), out.data());
  const Bytes expected = {'V',  'S',  'K',  'B',  4,    0,    0,    0,    1,    2,    3,
                          4,    5,    6,    7,    8,    0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5,
                          0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff,
                          0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18};
  EXPECT_EQ(out, expected);
}

TEST(BoundMessage, RoundTripsAndIgnoresPadding) {
  Bytes out(kBoundMessageSize);
  encode(sample(), out.data());
  out.resize(64, 0xaa);  // a receive slot is larger than the message
  core::Result<BoundMessage> parsed = parse_bound_message(out.data(), out.size());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed.value().nonce, sample().nonce);
  EXPECT_EQ(std::memcmp(parsed.value().token, sample().token, kSwitchTokenSize), 0);
  EXPECT_EQ(parsed.value().tcp_read, sample().tcp_read);
}

TEST(BoundMessage, RefusesShortWrongMagicVersionOrReserved) {
  Bytes good(kBoundMessageSize);
  encode(sample(), good.data());
  EXPECT_EQ(parse_bound_message(good.data(), kBoundMessageSize - 1).error(), EPROTO);  // a version-3 Bound is 32
  EXPECT_EQ(parse_bound_message(nullptr, kBoundMessageSize).error(), EPROTO);
  for (size_t i : {0, 3, 4, 5, 7}) {
    Bytes bad = good;
    bad[i] ^= 1;
    EXPECT_EQ(parse_bound_message(bad.data(), bad.size()).error(), EPROTO) << i;
  }
  for (uint8_t older : {1, 2, 3}) {
    Bytes before = good;
    before[4] = older;
    EXPECT_EQ(parse_bound_message(before.data(), before.size()).error(), EPROTO) << int{older};
  }
}

}  // namespace
}  // namespace vsock::sock::wire
