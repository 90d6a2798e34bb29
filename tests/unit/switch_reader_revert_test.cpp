// SwitchReader after the peer's Revert (docs/protocol.md §5): TCP up to
// the Switch's count, the ring up to the Revert's count, TCP again; a
// Revert without a Switch keeps everything on TCP; what the peer may not
// claim is refused.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <random>
#include <vector>

#include "sock/stream/switch_reader.hpp"

namespace vsock::sock {
namespace {

TEST(SwitchReaderRevert, RingPartThenTcpAgain) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_tcp_read(10));
  ASSERT_TRUE(reader.on_switch(10));
  ASSERT_TRUE(reader.on_ring_read(5));
  ASSERT_TRUE(reader.on_revert(8));
  EXPECT_TRUE(reader.on_ring());
  EXPECT_EQ(reader.ring_left(), 3u);
  // A read that reaches the end of the ring part stops there.
  ReadPlan plan = reader.plan(100, MSG_WAITALL);
  EXPECT_EQ(plan.tcp_length, 0u);
  EXPECT_EQ(plan.ring_length, 3u);
  ASSERT_TRUE(reader.on_ring_read(3));
  EXPECT_FALSE(reader.on_ring());
  EXPECT_TRUE(reader.tcp_again());
  plan = reader.plan(100, MSG_WAITALL);
  EXPECT_EQ(plan.tcp_length, 100u);
  EXPECT_EQ(plan.ring_length, 0u);
  EXPECT_TRUE(plan.tcp_bounded);  // no ring part can come any more: the kernel may wait
  EXPECT_EQ(plan.tcp_flags, MSG_WAITALL);
  ASSERT_TRUE(reader.on_tcp_read(1000));  // unbounded now
  EXPECT_EQ(reader.on_tcp_eof().value(), TcpEnd::kEndOfStream);
}

TEST(SwitchReaderRevert, BeforeTheSwitchPointTheTcpPartComesFirst) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_switch(20));
  ASSERT_TRUE(reader.on_revert(4));
  ReadPlan plan = reader.plan(50, 0);
  EXPECT_EQ(plan.tcp_length, 20u);
  EXPECT_EQ(plan.ring_length, 4u);
  ASSERT_TRUE(reader.on_tcp_read(20));
  ASSERT_TRUE(reader.on_ring_read(4));
  EXPECT_TRUE(reader.tcp_again());
}

TEST(SwitchReaderRevert, AnEmptyRingPartGoesStraightBackToTcp) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_switch(7));
  ASSERT_TRUE(reader.on_revert(0));
  // The TCP part first (the plan stops at the count) ...
  ReadPlan plan = reader.plan(50, 0);
  EXPECT_EQ(plan.tcp_length, 7u);
  EXPECT_EQ(plan.ring_length, 0u);
  ASSERT_TRUE(reader.on_tcp_read(7));
  // ... then the rest of TCP.
  EXPECT_TRUE(reader.tcp_again());
  EXPECT_EQ(reader.plan(50, 0).tcp_length, 50u);
}

TEST(SwitchReaderRevert, WithoutASwitchEverythingStaysOnTcp) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_tcp_read(3));
  ASSERT_TRUE(reader.on_revert(0));
  EXPECT_TRUE(reader.tcp_again());
  ReadPlan plan = reader.plan(10, MSG_WAITALL);
  EXPECT_EQ(plan.tcp_length, 10u);
  EXPECT_TRUE(plan.tcp_bounded);  // no Switch can come after a Revert
  EXPECT_EQ(plan.tcp_flags, MSG_WAITALL);
  EXPECT_EQ(reader.readable_bytes(9, 0).value(), 9u);
}

TEST(SwitchReaderRevert, RefusesWhatThePeerCannotClaim) {
  SwitchReader no_switch;
  EXPECT_EQ(no_switch.on_revert(1).error(), EPROTO);  // ring bytes without a Switch
  EXPECT_FALSE(no_switch.reverted());

  SwitchReader reader;
  ASSERT_TRUE(reader.on_switch(0));
  ASSERT_TRUE(reader.on_ring_read(10));
  EXPECT_EQ(reader.on_revert(9).error(), EPROTO);  // below what was read from the ring
  ASSERT_TRUE(reader.on_revert(12));
  EXPECT_EQ(reader.on_revert(12).error(), EPROTO);  // a second Revert
  EXPECT_EQ(reader.on_ring_read(3).error(), EPROTO);  // beyond its count
  EXPECT_EQ(reader.ring_read(), 10u);
}

TEST(SwitchReaderRevert, ReadableBytesAcrossThreeParts) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_switch(10));
  // Before the Revert, kernel bytes past the count are not counted.
  EXPECT_EQ(reader.readable_bytes(15, 4).value(), 14u);
  ASSERT_TRUE(reader.on_revert(6));
  EXPECT_EQ(reader.readable_bytes(5, 6).value(), 5u);    // a gap in the TCP part
  EXPECT_EQ(reader.readable_bytes(15, 4).value(), 14u);  // the ring part is not whole
  EXPECT_EQ(reader.readable_bytes(15, 6).value(), 21u);  // all three
  ASSERT_TRUE(reader.on_tcp_read(10));
  ASSERT_TRUE(reader.on_ring_read(6));
  EXPECT_EQ(reader.readable_bytes(5, 0).value(), 5u);
}

// A model peer writes bytes 0, 1, 2, ... on TCP up to the switch point,
// then into the ring, then (after its Revert) on TCP again. Its post-revert
// TCP bytes may reach the kernel before the Revert reaches the reader. The
// reader reads in random sizes with peeks; the bytes come out in order.
TEST(SwitchReaderRevert, RandomisedStreamIsByteExact) {
  std::mt19937_64 rng(20250301);
  for (int round = 0; round < 2000; ++round) {
    const uint64_t count = rng() % 100, ring_total = rng() % 100, after = rng() % 100;
    const uint64_t total = count + ring_total + after;
    // The kernel's stream: [0, count) then [count + ring_total, total).
    uint64_t kernel_arrived = 0, ring_arrived = 0;
    uint64_t kernel_taken = 0;  // kernel bytes consumed
    SwitchReader reader;
    ASSERT_TRUE(reader.on_switch(count));
    std::vector<uint8_t> out;
    const int revert_at = static_cast<int>(rng() % 30);
    auto kernel_byte = [&](uint64_t k) { return static_cast<uint8_t>(k < count ? k : k + ring_total); };
    for (int step = 0; out.size() < total && step < 10000; ++step) {
      ring_arrived = std::min(ring_total, ring_arrived + rng() % 20);
      // Bytes after the TCP part only once the ring part was all written.
      const uint64_t kernel_max = ring_arrived == ring_total ? count + after : count;
      kernel_arrived = std::min(kernel_max, kernel_arrived + rng() % 20);
      if (step >= revert_at && !reader.reverted()) {
        if (ring_arrived < ring_total) continue;  // the Revert comes after the last ring write
        ASSERT_TRUE(reader.on_revert(ring_total));
      }
      const uint64_t ring_avail = ring_arrived - reader.ring_read();
      core::Result<uint64_t> readable = reader.readable_bytes(kernel_arrived - kernel_taken, ring_avail);
      ASSERT_TRUE(readable);
      const size_t want = rng() % 40 + 1;
      const bool peek = rng() % 4 == 0;
      ReadPlan plan = reader.plan(want, peek ? MSG_PEEK : 0);
      std::vector<uint8_t> got;
      const uint64_t tcp_got = std::min<uint64_t>(plan.tcp_length, kernel_arrived - kernel_taken);
      for (uint64_t i = 0; i < tcp_got; ++i) got.push_back(kernel_byte(kernel_taken + i));
      uint64_t ring_got = 0;
      if (tcp_got == plan.tcp_length && plan.ring_length > 0) {
        ring_got = std::min<uint64_t>(plan.ring_length, ring_avail);
        for (uint64_t i = 0; i < ring_got; ++i) got.push_back(static_cast<uint8_t>(count + reader.ring_read() + i));
      }
      ASSERT_LE(got.size(), readable.value());  // FIONREAD never promises less than a read returns
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], static_cast<uint8_t>(out.size() + i)) << round;
      if (peek) continue;
      if (tcp_got > 0) {
        ASSERT_TRUE(reader.on_tcp_read(tcp_got));
      }
      if (ring_got > 0) {
        ASSERT_TRUE(reader.on_ring_read(ring_got));
      }
      kernel_taken += tcp_got;
      out.insert(out.end(), got.begin(), got.end());
    }
    ASSERT_EQ(out.size(), total) << "round " << round;
  }
}

}  // namespace
}  // namespace vsock::sock
