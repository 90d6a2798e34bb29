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

TEST(StreamImmediate, DataCarriesTheEndPositionsLow30Bits) {
  for (uint64_t position : {uint64_t{0}, uint64_t{1}, uint64_t{65536}, uint64_t{kImmediateValueMax},
                            uint64_t{1} << 30, (uint64_t{7} << 30) + 12345, UINT64_MAX}) {
    core::Result<uint32_t> word = data_immediate(position);
    ASSERT_TRUE(word.has_value()) << position;
    EXPECT_EQ(word.value() >> 30, 0u);
    core::Result<Immediate> parsed = parse_immediate(word.value());
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(parsed.value().type, ImmediateType::kData);
    EXPECT_EQ(parsed.value().value, position & kImmediateValueMax);
  }
}

// The receiver's side of a position (protocol version 3): the distance from
// where it stands, across the 2^30 wrap; what was already taken (an
// immediate delivered twice) is no distance at all.
TEST(StreamImmediate, DistanceToAPositionWrapsAndADuplicateIsZero) {
  EXPECT_EQ(distance_to(0, wire_position(100)), 100u);
  EXPECT_EQ(distance_to(1000, wire_position(1000)), 0u);  // delivered twice
  const uint64_t near_wrap = (uint64_t{3} << 30) - 10;
  EXPECT_EQ(distance_to(near_wrap, wire_position(near_wrap + 30)), 30u);
  EXPECT_EQ(distance_to(near_wrap, wire_position(near_wrap + kImmediateValueMax)), kImmediateValueMax);
  // An old position (a replay) lies almost 2^30 ahead: beyond any ring.
  EXPECT_EQ(distance_to(5000, wire_position(4000)), (uint64_t{1} << 30) - 1000);
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
  EXPECT_EQ(encode_immediate({ImmediateType::kData, kImmediateValueMax + 1}).error(), EINVAL);
  EXPECT_EQ(encode_immediate({ImmediateType::kCredit, UINT32_MAX}).error(), EINVAL);
  EXPECT_EQ(control_immediate(static_cast<ControlCode>(4)).error(), EINVAL);
  EXPECT_EQ(encode_immediate({static_cast<ImmediateType>(3), 1}).error(), EINVAL);
}

TEST(StreamImmediate, PeerViolationsAreEproto) {
  EXPECT_EQ(parse_immediate(2u << 30).error(), EPROTO);            // CONTROL code 0
  EXPECT_EQ(parse_immediate((2u << 30) | 4).error(), EPROTO);      // unknown control code
  EXPECT_EQ(parse_immediate((2u << 30) | kImmediateValueMax).error(), EPROTO);
  EXPECT_EQ(parse_immediate(3u << 30).error(), EPROTO);            // type 3
  EXPECT_EQ(parse_immediate((3u << 30) | 5).error(), EPROTO);
  EXPECT_EQ(parse_immediate(UINT32_MAX).error(), EPROTO);
  // Any position parses: whether it makes sense is the receiver's to say.
  EXPECT_TRUE(parse_immediate(0).has_value());
  EXPECT_TRUE(parse_immediate(1u << 30).has_value());
}

// Every type-3 word and every control word outside {1, 2, 3} is refused;
// every other word parses back to exactly itself.
TEST(StreamImmediate, EveryWordIsRefusedOrRoundTrips) {
  uint64_t accepted = 0;
  for (uint64_t w = 0; w <= UINT32_MAX; w += 65521) {  // a prime stride visits every type and many values
    uint32_t word = static_cast<uint32_t>(w);
    core::Result<Immediate> parsed = parse_immediate(word);
    uint32_t type = word >> 30, value = word & kImmediateValueMax;
    bool valid = type <= 1 || (type == 2 && value >= 1 && value <= 3);
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
