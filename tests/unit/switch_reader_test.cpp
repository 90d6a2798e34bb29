// SwitchReader: where each read's bytes come from around the peer's Switch
// (docs/protocol.md §2), and the peer's counts it must refuse.
#include "sock/stream/switch_reader.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <random>
#include <vector>

namespace vsock::sock {
namespace {

TEST(SwitchReader, BeforeTheSwitchEverythingComesFromTcp) {
  SwitchReader reader;
  ReadPlan plan = reader.plan(100, 0);
  EXPECT_EQ(plan.tcp_length, 100u);
  EXPECT_EQ(plan.ring_length, 0u);
  EXPECT_TRUE(plan.consume);
  EXPECT_FALSE(plan.tcp_bounded);
  EXPECT_EQ(reader.tcp_remaining(), UINT64_MAX);
  EXPECT_FALSE(reader.on_ring());
  ASSERT_TRUE(reader.on_tcp_read(60));
  ASSERT_TRUE(reader.on_tcp_read(1000));
  EXPECT_EQ(reader.tcp_read(), 1060u);
}

TEST(SwitchReader, BeforeTheSwitchWaitAllNeverReachesTheKernel) {
  SwitchReader reader;
  ReadPlan plan = reader.plan(100, MSG_WAITALL | MSG_DONTWAIT);
  EXPECT_EQ(plan.tcp_flags, MSG_DONTWAIT);  // other flags pass through
  EXPECT_FALSE(plan.tcp_bounded);
}

TEST(SwitchReader, AfterTheSwitchWaitAllIsSafeOnTheTcpPiece) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_switch(50));
  ReadPlan plan = reader.plan(100, MSG_WAITALL);
  EXPECT_EQ(plan.tcp_flags, MSG_WAITALL);
  EXPECT_TRUE(plan.tcp_bounded);
  EXPECT_EQ(plan.tcp_length, 50u);
  EXPECT_EQ(plan.ring_length, 50u);
}

TEST(SwitchReader, AReadStraddlesTheBoundary) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_tcp_read(30));
  ASSERT_TRUE(reader.on_switch(100));
  EXPECT_EQ(reader.tcp_remaining(), 70u);
  ReadPlan plan = reader.plan(200, 0);
  EXPECT_EQ(plan.tcp_length, 70u);
  EXPECT_EQ(plan.ring_length, 130u);
  EXPECT_EQ(plan.total(), 200u);
  ASSERT_TRUE(reader.on_tcp_read(70));
  EXPECT_TRUE(reader.on_ring());
  plan = reader.plan(200, 0);
  EXPECT_EQ(plan.tcp_length, 0u);
  EXPECT_EQ(plan.ring_length, 200u);
}

TEST(SwitchReader, AReadInsideTheTcpPartStaysOnTcp) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_switch(1000));
  ReadPlan plan = reader.plan(10, 0);
  EXPECT_EQ(plan.tcp_length, 10u);
  EXPECT_EQ(plan.ring_length, 0u);
}

TEST(SwitchReader, ZeroLengthRead) {
  SwitchReader reader;
  EXPECT_EQ(reader.plan(0, 0).total(), 0u);
  ASSERT_TRUE(reader.on_switch(5));
  EXPECT_EQ(reader.plan(0, 0).total(), 0u);
}

TEST(SwitchReader, SwitchAtZeroGoesStraightToTheRing) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_switch(0));
  EXPECT_TRUE(reader.on_ring());
  ReadPlan plan = reader.plan(8, 0);
  EXPECT_EQ(plan.tcp_length, 0u);
  EXPECT_EQ(plan.ring_length, 8u);
}

TEST(SwitchReader, PeekDoesNotConsume) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_tcp_read(10));
  ASSERT_TRUE(reader.on_switch(20));
  ReadPlan plan = reader.plan(15, MSG_PEEK);
  EXPECT_FALSE(plan.consume);
  EXPECT_EQ(plan.tcp_flags, MSG_PEEK);
  EXPECT_EQ(plan.tcp_length, 10u);
  EXPECT_EQ(plan.ring_length, 5u);
  // Planning is const: the same peek again gives the same plan.
  ReadPlan again = reader.plan(15, MSG_PEEK);
  EXPECT_EQ(again.tcp_length, 10u);
  EXPECT_EQ(again.ring_length, 5u);
  EXPECT_EQ(reader.tcp_read(), 10u);
}

TEST(SwitchReader, CountBelowWhatWasReadIsALie) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_tcp_read(100));
  core::Result<bool> r = reader.on_switch(99);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), EPROTO);
  EXPECT_FALSE(reader.switch_known());  // nothing changed
  EXPECT_TRUE(reader.on_switch(100));   // the exact count is fine
  EXPECT_TRUE(reader.on_ring());
}

TEST(SwitchReader, ASecondSwitchIsAProtocolError) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_switch(10));
  core::Result<bool> r = reader.on_switch(10);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), EPROTO);
  EXPECT_EQ(reader.switch_count(), 10u);
}

TEST(SwitchReader, TcpBytesBeyondTheCountAreAProtocolError) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_switch(10));
  ASSERT_TRUE(reader.on_tcp_read(6));
  core::Result<bool> r = reader.on_tcp_read(5);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), EPROTO);
  EXPECT_EQ(reader.tcp_read(), 6u);  // not counted
  ASSERT_TRUE(reader.on_tcp_read(4));
  EXPECT_EQ(reader.on_tcp_read(1).error(), EPROTO);
}

TEST(SwitchReader, EofBeforeTheSwitchEndsTheStream) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_tcp_read(7));
  core::Result<TcpEnd> end = reader.on_tcp_eof();
  ASSERT_TRUE(end);
  EXPECT_EQ(end.value(), TcpEnd::kEndOfStream);
  EXPECT_TRUE(reader.tcp_ended());
}

TEST(SwitchReader, EofShortOfTheCountBreaksTheConnection) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_switch(10));
  ASSERT_TRUE(reader.on_tcp_read(9));
  core::Result<TcpEnd> end = reader.on_tcp_eof();
  ASSERT_FALSE(end);
  EXPECT_EQ(end.error(), ECONNRESET);
}

TEST(SwitchReader, EofAtTheCountIsTheTcpPartEnding) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_switch(10));
  ASSERT_TRUE(reader.on_tcp_read(10));
  core::Result<TcpEnd> end = reader.on_tcp_eof();
  ASSERT_TRUE(end);
  EXPECT_EQ(end.value(), TcpEnd::kAfterSwitch);
  EXPECT_EQ(reader.plan(4, 0).ring_length, 4u);  // the stream goes on in the ring
}

// The Switch was in flight when TCP's end of file was read: it must name
// exactly the bytes read, since no more can come.
TEST(SwitchReader, SwitchAfterEofMustMatchWhatWasRead) {
  SwitchReader exact;
  ASSERT_TRUE(exact.on_tcp_read(5));
  ASSERT_TRUE(exact.on_tcp_eof());
  EXPECT_TRUE(exact.on_switch(5));
  EXPECT_TRUE(exact.on_ring());

  SwitchReader more;
  ASSERT_TRUE(more.on_tcp_read(5));
  ASSERT_TRUE(more.on_tcp_eof());
  core::Result<bool> r = more.on_switch(6);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), ECONNRESET);
  EXPECT_FALSE(more.switch_known());

  SwitchReader less;
  ASSERT_TRUE(less.on_tcp_read(5));
  ASSERT_TRUE(less.on_tcp_eof());
  EXPECT_EQ(less.on_switch(4).error(), EPROTO);
}

TEST(SwitchReader, ReadableBytes) {
  SwitchReader reader;
  EXPECT_EQ(reader.readable_bytes(12, 99).value(), 12u);  // before: the kernel's only
  ASSERT_TRUE(reader.on_tcp_read(10));
  ASSERT_TRUE(reader.on_switch(30));
  EXPECT_EQ(reader.readable_bytes(5, 100).value(), 5u);     // a gap before the ring
  EXPECT_EQ(reader.readable_bytes(20, 100).value(), 120u);  // contiguous
  EXPECT_EQ(reader.readable_bytes(20, 0).value(), 20u);
  // More than the count: the peer's TCP bytes after a Revert still on its
  // way; they come after ring bytes not all known yet, so they do not count.
  EXPECT_EQ(reader.readable_bytes(21, 0).value(), 20u);
  ASSERT_TRUE(reader.on_tcp_read(20));
  EXPECT_EQ(reader.readable_bytes(0, 7).value(), 7u);
  EXPECT_EQ(reader.readable_bytes(1, 7).value(), 7u);
}

TEST(SwitchReader, HugeCountsDoNotWrap) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_tcp_read(UINT64_MAX - 1));
  ASSERT_TRUE(reader.on_tcp_read(5));  // saturates
  EXPECT_EQ(reader.tcp_read(), UINT64_MAX);
  ASSERT_TRUE(reader.on_switch(UINT64_MAX));
  EXPECT_TRUE(reader.on_ring());

  SwitchReader big;
  ASSERT_TRUE(big.on_switch(UINT64_MAX));
  ReadPlan plan = big.plan(SIZE_MAX, 0);
  EXPECT_EQ(plan.tcp_length, SIZE_MAX < UINT64_MAX ? SIZE_MAX : static_cast<size_t>(UINT64_MAX));
  EXPECT_EQ(big.readable_bytes(10, UINT64_MAX).value(), 10u);
}

// The whole protocol with a model peer: it writes bytes 0, 1, 2, … on TCP
// up to a random switch point, then into the ring. The reader reads in
// random sizes, peeks and partial kernel deliveries, with the Switch
// arriving at a random moment; the bytes come out exactly in order.
TEST(SwitchReader, RandomisedStreamIsByteExact) {
  std::mt19937_64 rng(20240611);
  for (int round = 0; round < 2000; ++round) {
    const uint64_t total = rng() % 400;
    const uint64_t count = total == 0 ? 0 : rng() % (total + 1);
    // The kernel has delivered up to tcp_arrived; the ring holds bytes from
    // count up to ring_arrived. Both grow at random.
    uint64_t tcp_arrived = 0, ring_arrived = count, ring_taken = count;
    SwitchReader reader;
    std::vector<uint8_t> out;
    const int switch_at_step = static_cast<int>(rng() % 40);
    for (int step = 0; (out.size() < total || !reader.switch_known()) && step < 10000; ++step) {
      if (step == switch_at_step || (step > switch_at_step && !reader.switch_known())) {
        ASSERT_TRUE(reader.on_switch(count));
      }
      tcp_arrived = std::min<uint64_t>(count, tcp_arrived + rng() % 30);
      if (reader.switch_known()) ring_arrived = std::min<uint64_t>(total, ring_arrived + rng() % 30);

      const size_t want = rng() % 64;
      const bool peek = rng() % 4 == 0;
      const bool wait_all = rng() % 3 == 0;
      ReadPlan plan = reader.plan(want, (peek ? MSG_PEEK : 0) | (wait_all ? MSG_WAITALL : 0));
      ASSERT_EQ(plan.total(), want);
      ASSERT_EQ(plan.consume, !peek);
      ASSERT_EQ((plan.tcp_flags & MSG_WAITALL) != 0, wait_all && reader.switch_known());
      // The kernel gives what it has; a bounded WAITALL piece gets all of it
      // (the model fast-forwards the kernel: the peer promised those bytes).
      if (plan.tcp_bounded && wait_all) tcp_arrived = std::max<uint64_t>(tcp_arrived, reader.tcp_read() + plan.tcp_length);
      ASSERT_LE(tcp_arrived, count);
      const uint64_t tcp_got = std::min<uint64_t>(plan.tcp_length, tcp_arrived - reader.tcp_read());
      std::vector<uint8_t> got;
      for (uint64_t i = 0; i < tcp_got; ++i) got.push_back(static_cast<uint8_t>(reader.tcp_read() + i));
      if (tcp_got == plan.tcp_length && plan.ring_length > 0) {
        ASSERT_TRUE(reader.switch_known());
        ASSERT_EQ(reader.tcp_read() + tcp_got, count);  // the ring starts right after the TCP part
        const uint64_t ring_got = std::min<uint64_t>(plan.ring_length, ring_arrived - ring_taken);
        for (uint64_t i = 0; i < ring_got; ++i) got.push_back(static_cast<uint8_t>(ring_taken + i));
        if (plan.consume) ring_taken += ring_got;
      }
      // Peeked bytes must be what the next consuming read returns.
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], static_cast<uint8_t>(out.size() + i));
      if (plan.consume) {
        ASSERT_TRUE(reader.on_tcp_read(tcp_got));
        out.insert(out.end(), got.begin(), got.end());
      }
      // A kernel delivery beyond the count is refused (on a copy: the
      // refusal must not change the state either).
      if (reader.switch_known()) {
        SwitchReader copy = reader;
        ASSERT_EQ(copy.on_tcp_read(count - reader.tcp_read() + 1).error(), EPROTO);
        ASSERT_EQ(copy.tcp_read(), reader.tcp_read());
      }
    }
    ASSERT_EQ(out.size(), total) << "round " << round;
    ASSERT_EQ(reader.tcp_read(), count);
    ASSERT_TRUE(reader.on_ring());
  }
}

}  // namespace
}  // namespace vsock::sock
