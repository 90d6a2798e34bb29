// The stream immediate (docs/protocol.md §3): every type round-trips, every
// bit pattern a peer can send either parses to something in range or is
// EPROTO, and the network byte order is what goes on the wire.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>

#include "sock/stream/stream_immediate.hpp"

namespace vsock::sock {
namespace {

TEST(StreamImmediate, DataRoundTrips) {
  for (uint32_t length : {1u, 2u, 64u, 65536u, kImmediateValueMax}) {
    core::Result<uint32_t> word = data_immediate(length);
    ASSERT_TRUE(word.has_value()) << length;
    EXPECT_EQ(word.value() >> 30, 0u);
    core::Result<Immediate> parsed = parse_immediate(word.value());
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(parsed.value().type, ImmediateType::kData);
    EXPECT_EQ(parsed.value().value, length);
  }
}

TEST(StreamImmediate, CreditAndControlRoundTrip) {
  core::Result<uint32_t> credit = credit_immediate(16384);
  ASSERT_TRUE(credit.has_value());
  EXPECT_EQ(credit.value(), (1u << 30) | 16384u);
  EXPECT_EQ(parse_immediate(credit.value()).value().type, ImmediateType::kCredit);
  EXPECT_EQ(parse_immediate(credit.value()).value().value, 16384u);

  core::Result<uint32_t> fin = control_immediate(ControlCode::kFin);
  core::Result<uint32_t> reset = control_immediate(ControlCode::kReset);
  ASSERT_TRUE(fin.has_value() && reset.has_value());
  EXPECT_EQ(fin.value(), (2u << 30) | 1u);
  EXPECT_EQ(reset.value(), (2u << 30) | 2u);
  EXPECT_EQ(parse_immediate(fin.value()).value().type, ImmediateType::kControl);
  EXPECT_EQ(parse_immediate(reset.value()).value().value, 2u);

  core::Result<uint32_t> closed = control_immediate(ControlCode::kClosed);
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed.value(), (2u << 30) | 3u);
  EXPECT_EQ(parse_immediate(closed.value()).value().value, 3u);
}

TEST(StreamImmediate, SenderBugsAreEinval) {
  EXPECT_EQ(data_immediate(0).error(), EINVAL);
  EXPECT_EQ(data_immediate(kImmediateValueMax + 1).error(), EINVAL);
  EXPECT_EQ(credit_immediate(0).error(), EINVAL);
  EXPECT_EQ(credit_immediate(UINT32_MAX).error(), EINVAL);
  EXPECT_EQ(control_immediate(static_cast<ControlCode>(4)).error(), EINVAL);
  EXPECT_EQ(encode_immediate({static_cast<ImmediateType>(3), 1}).error(), EINVAL);
}

TEST(StreamImmediate, PeerViolationsAreEproto) {
  EXPECT_EQ(parse_immediate(0).error(), EPROTO);                   // zero-length DATA
  EXPECT_EQ(parse_immediate(1u << 30).error(), EPROTO);            // zero CREDIT
  EXPECT_EQ(parse_immediate(2u << 30).error(), EPROTO);            // CONTROL code 0
  EXPECT_EQ(parse_immediate((2u << 30) | 4).error(), EPROTO);      // unknown control code
  EXPECT_EQ(parse_immediate((2u << 30) | kImmediateValueMax).error(), EPROTO);
  EXPECT_EQ(parse_immediate(3u << 30).error(), EPROTO);            // type 3
  EXPECT_EQ(parse_immediate((3u << 30) | 5).error(), EPROTO);
  EXPECT_EQ(parse_immediate(UINT32_MAX).error(), EPROTO);
}

// Every type-3 word and every control word outside {1, 2} is refused; every
// other word parses back to exactly itself.
TEST(StreamImmediate, EveryWordIsRefusedOrRoundTrips) {
  uint64_t accepted = 0;
  for (uint64_t w = 0; w <= UINT32_MAX; w += 65521) {  // a prime stride visits every type and many values
    uint32_t word = static_cast<uint32_t>(w);
    core::Result<Immediate> parsed = parse_immediate(word);
    uint32_t type = word >> 30, value = word & kImmediateValueMax;
    bool valid = (type <= 1 && value != 0) || (type == 2 && (value == 1 || value == 2));
    ASSERT_EQ(parsed.has_value(), valid) << std::hex << word;
    if (!valid) {
      EXPECT_EQ(parsed.error(), EPROTO);
      continue;
    }
    ++accepted;
    EXPECT_LE(parsed.value().value, kImmediateValueMax);
    core::Result<uint32_t> again = encode_immediate(parsed.value());
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again.value(), word);
  }
  EXPECT_GT(accepted, 0u);
}

TEST(StreamImmediate, WireOrderIsNetworkOrder) {
  for (uint32_t word : {0u, 1u, 0x12345678u, 0x80000001u, UINT32_MAX}) {
    EXPECT_EQ(immediate_to_wire(word), htonl(word));
    EXPECT_EQ(immediate_from_wire(htonl(word)), word);
    EXPECT_EQ(immediate_from_wire(immediate_to_wire(word)), word);
  }
  const uint32_t wire = immediate_to_wire(0x80000001u);
  const auto* bytes = reinterpret_cast<const uint8_t*>(&wire);
  EXPECT_EQ(bytes[0], 0x80);  // the type bits travel first
  EXPECT_EQ(bytes[3], 0x01);
}

}  // namespace
}  // namespace vsock::sock
