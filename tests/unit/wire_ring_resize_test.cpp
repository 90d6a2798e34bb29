// RingGrow and RingMoved (docs/protocol.md §3.1, src/sock/wire/ring_resize.*):
// the byte layouts, round trips with padding, every rejection rule, and
// is_ring_resize_message against the other messages' magics.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "sock/wire/byte_order.hpp"
#include "sock/wire/protocol.hpp"
#include "sock/wire/revert_message.hpp"
#include "sock/wire/ring_resize.hpp"
#include "sock/wire/switch_message.hpp"

namespace vsock::sock::wire {
namespace {

using Bytes = std::vector<uint8_t>;

RingGrowMessage sample_grow() {
  RingGrowMessage m;
  m.ring.address = 0x00007f0012340000;
  m.ring.rkey = 0xdeadbeef;
  m.ring.capacity = 1u << 20;
  return m;
}

RingMovedMessage sample_moved() {
  RingMovedMessage m;
  m.accepted = true;
  m.position = 0x0000000100000002;
  return m;
}

Bytes encoded(const RingGrowMessage& m) {
  Bytes out(kRingGrowMessageSize);
  encode(m, out.data());
  return out;
}

Bytes encoded(const RingMovedMessage& m) {
  Bytes out(kRingMovedMessageSize);
  encode(m, out.data());
  return out;
}

TEST(RingGrowMessage, LayoutMatchesTheDocument) {
  const Bytes want = {
      'V', 'S', 'K', 'G', 4, 0, 0, 0,                  // magic, version, reserved
      0x00, 0x00, 0x7f, 0x00, 0x12, 0x34, 0x00, 0x00,  // ring address
      0xde, 0xad, 0xbe, 0xef,                          // rkey
      0x00, 0x10, 0x00, 0x00,                          // capacity
  };
  ASSERT_EQ(want.size(), kRingGrowMessageSize);
  EXPECT_EQ(encoded(sample_grow()), want);
}

TEST(RingGrowMessage, RoundTripsAndIgnoresTrailingBytes) {
  for (uint32_t capacity : {1u, 4096u, 1u << 20, 0x80000000u}) {
    RingGrowMessage m = sample_grow();
    m.ring.capacity = capacity;
    Bytes bytes = encoded(m);
    bytes.resize(bytes.size() + 40, 0x5a);  // a receive slot is 64 bytes
    core::Result<RingGrowMessage> parsed = parse_ring_grow(bytes.data(), bytes.size());
    ASSERT_TRUE(parsed.has_value()) << capacity;
    EXPECT_EQ(parsed.value(), m);
    EXPECT_EQ(parse_ring_grow(bytes.data(), kRingGrowMessageSize).value(), m);
  }
}

TEST(RingGrowMessage, RejectsShortInputMagicVersionReserved) {
  Bytes good = encoded(sample_grow());
  for (size_t len = 0; len < kRingGrowMessageSize; ++len)
    EXPECT_EQ(parse_ring_grow(good.data(), len).error(), EPROTO) << len;
  EXPECT_EQ(parse_ring_grow(nullptr, 64).error(), EPROTO);
  for (size_t i = 0; i < 8; ++i) {  // magic, version, each reserved byte
    Bytes bad = good;
    bad[i] ^= 0x01;
    EXPECT_EQ(parse_ring_grow(bad.data(), bad.size()).error(), EPROTO) << i;
  }
}

TEST(RingGrowMessage, RejectsARingRemoteRingWouldRefuse) {
  struct Case {
    uint64_t address;
    uint32_t capacity;
  };
  const Case bad_rings[] = {
      {0x10000, 0},                          // empty
      {0x10000, 3000},                       // not a power of two
      {0x10000, 0xc0000000u},                // above 2^31
      {UINT64_MAX - 4096 + 1, 4096},         // ends at 2^64
      {UINT64_MAX - 100, 4096},              // wraps the address space
  };
  for (const Case& c : bad_rings) {
    RingGrowMessage m = sample_grow();
    m.ring.address = c.address;
    m.ring.capacity = c.capacity;
    Bytes bytes = encoded(m);
    EXPECT_EQ(parse_ring_grow(bytes.data(), bytes.size()).error(), EPROTO) << c.address << " " << c.capacity;
  }
}

TEST(RingMovedMessage, LayoutMatchesTheDocument) {
  const Bytes want = {
      'V', 'S', 'K', 'M', 4, 0x01, 0, 0,               // magic, version, flags (accepted), reserved
      0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02,  // position
  };
  ASSERT_EQ(want.size(), kRingMovedMessageSize);
  EXPECT_EQ(encoded(sample_moved()), want);
  const Bytes refusal = {'V', 'S', 'K', 'M', 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(encoded(RingMovedMessage{}), refusal);
}

TEST(RingMovedMessage, RoundTripsAndIgnoresTrailingBytes) {
  std::vector<RingMovedMessage> cases = {RingMovedMessage{}};
  for (uint64_t position : {uint64_t{0}, uint64_t{1}, uint64_t{1} << 32, UINT64_MAX}) {
    RingMovedMessage m;
    m.accepted = true;
    m.position = position;
    cases.push_back(m);
  }
  for (const RingMovedMessage& m : cases) {
    Bytes bytes = encoded(m);
    bytes.resize(bytes.size() + 48, 0x5a);
    core::Result<RingMovedMessage> parsed = parse_ring_moved(bytes.data(), bytes.size());
    ASSERT_TRUE(parsed.has_value()) << m.accepted << " " << m.position;
    EXPECT_EQ(parsed.value(), m);
    EXPECT_EQ(parse_ring_moved(bytes.data(), kRingMovedMessageSize).value(), m);
  }
}

TEST(RingMovedMessage, RejectsShortInputMagicVersionReserved) {
  Bytes good = encoded(sample_moved());
  for (size_t len = 0; len < kRingMovedMessageSize; ++len)
    EXPECT_EQ(parse_ring_moved(good.data(), len).error(), EPROTO) << len;
  EXPECT_EQ(parse_ring_moved(nullptr, 64).error(), EPROTO);
  for (size_t i : {0, 1, 2, 3, 4, 6, 7}) {  // magic, version, each reserved byte
    Bytes bad = good;
    bad[i] ^= 0x01;
    EXPECT_EQ(parse_ring_moved(bad.data(), bad.size()).error(), EPROTO) << i;
  }
}

TEST(RingMovedMessage, RejectsUnknownFlagBits) {
  for (int bit = 1; bit < 8; ++bit) {
    for (bool accepted : {false, true}) {
      RingMovedMessage m;
      m.accepted = accepted;
      Bytes bytes = encoded(m);
      bytes[5] |= static_cast<uint8_t>(1u << bit);
      EXPECT_EQ(parse_ring_moved(bytes.data(), bytes.size()).error(), EPROTO) << bit << " " << accepted;
    }
  }
}

TEST(RingMovedMessage, RejectsARefusalWithAPosition) {
  for (uint64_t position : {uint64_t{1}, uint64_t{1} << 40, UINT64_MAX}) {
    Bytes bytes = encoded(RingMovedMessage{});
    store_be64(bytes.data() + 8, position);
    EXPECT_EQ(parse_ring_moved(bytes.data(), bytes.size()).error(), EPROTO) << position;
  }
}

TEST(RingResizeMessages, AreNotTakenForEachOther) {
  Bytes grow = encoded(sample_grow());
  Bytes moved = encoded(sample_moved());
  moved.resize(kRingGrowMessageSize, 0);
  EXPECT_EQ(parse_ring_moved(grow.data(), grow.size()).error(), EPROTO);
  EXPECT_EQ(parse_ring_grow(moved.data(), moved.size()).error(), EPROTO);
}

TEST(IsRingResizeMessage, TakesBothMagicsAndNothingElse) {
  Bytes grow = encoded(sample_grow());
  Bytes moved = encoded(sample_moved());
  EXPECT_TRUE(is_ring_resize_message(grow.data(), grow.size()));
  EXPECT_TRUE(is_ring_resize_message(moved.data(), moved.size()));
  // Only the magic counts: four bytes are enough, the rest need not parse.
  EXPECT_TRUE(is_ring_resize_message(grow.data(), 4));
  EXPECT_TRUE(is_ring_resize_message(moved.data(), 4));
  Bytes bad_version = moved;
  bad_version[4] = 2;
  EXPECT_TRUE(is_ring_resize_message(bad_version.data(), bad_version.size()));

  // Short input.
  for (size_t len = 0; len < 4; ++len) {
    EXPECT_FALSE(is_ring_resize_message(grow.data(), len)) << len;
    EXPECT_FALSE(is_ring_resize_message(moved.data(), len)) << len;
  }
  EXPECT_FALSE(is_ring_resize_message(nullptr, 64));

  // The other messages' magics.
  for (uint32_t magic : {kUpgradeMagic, kSwitchMagic, kBoundMagic, kRevertMagic, kResumeMagic, kRejectMagic,
                         kDatagramMagic, kResolveMagic, kOwnerMagic, uint32_t{0}}) {
    Bytes bytes = grow;
    store_be32(bytes.data(), magic);
    EXPECT_FALSE(is_ring_resize_message(bytes.data(), bytes.size())) << std::hex << magic;
  }
  RevertMessage revert;
  revert.nonce = 7;
  Bytes revert_bytes(kRevertMessageSize);
  encode(revert, revert_bytes.data());
  EXPECT_FALSE(is_ring_resize_message(revert_bytes.data(), revert_bytes.size()));
  SwitchMessage sw;
  sw.ring = sample_grow().ring;
  Bytes switch_bytes(kSwitchMessageSize);
  encode(sw, switch_bytes.data());
  EXPECT_FALSE(is_ring_resize_message(switch_bytes.data(), switch_bytes.size()));
  // Byte order: the magics little-endian are not them.
  Bytes swapped = grow;
  std::swap(swapped[0], swapped[3]);
  std::swap(swapped[1], swapped[2]);
  EXPECT_FALSE(is_ring_resize_message(swapped.data(), swapped.size()));
}

}  // namespace
}  // namespace vsock::sock::wire
