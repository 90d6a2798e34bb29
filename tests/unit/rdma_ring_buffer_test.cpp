// The ring arithmetic of src/rdma (RingIndex, RemoteRing), no device needed:
// power-of-two rules, wrap-around of offsets and of the 64-bit counters,
// and the bounds that keep a peer's lengths and credits honest.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "rdma/remote_ring.hpp"
#include "rdma/ring_index.hpp"

namespace vsock::rdma {
namespace {

RingIndex make_ring(uint64_t capacity, uint64_t start = 0) {
  core::Result<RingIndex> ring = RingIndex::create(capacity, start);
  EXPECT_TRUE(ring.has_value());
  return ring.value();
}

TEST(RingIndex, RejectsCapacitiesThatAreNotPowersOfTwo) {
  for (uint64_t bad : {uint64_t{0}, uint64_t{3}, uint64_t{100}, uint64_t{4097}, RingIndex::kMaxCapacity * 2,
                       RingIndex::kMaxCapacity + 1}) {
    core::Result<RingIndex> ring = RingIndex::create(bad);
    EXPECT_FALSE(ring.has_value()) << bad;
    EXPECT_EQ(ring.error(), EINVAL) << bad;
  }
  for (uint64_t good : {uint64_t{1}, uint64_t{2}, uint64_t{4096}, RingIndex::kMaxCapacity})
    EXPECT_TRUE(RingIndex::create(good).has_value()) << good;
}

TEST(RingIndex, StartsEmpty) {
  RingIndex ring = make_ring(64, 1000);
  EXPECT_TRUE(ring.empty());
  EXPECT_FALSE(ring.full());
  EXPECT_EQ(ring.used(), 0u);
  EXPECT_EQ(ring.space(), 64u);
  EXPECT_EQ(ring.head(), 1000u);
  EXPECT_EQ(ring.tail(), 1000u);
  EXPECT_EQ(ring.offset_of(1000), 1000u % 64);
}

TEST(RingIndex, DefaultConstructedRefusesEverything) {
  RingIndex ring;
  EXPECT_EQ(ring.writable(1).error(), EMSGSIZE);
  EXPECT_FALSE(ring.produce(1).has_value());
  EXPECT_FALSE(ring.consume(1).has_value());
  EXPECT_FALSE(ring.full());
  EXPECT_FALSE(ring.contains(0, 0));
}

TEST(RingIndex, WritableWithoutWrap) {
  RingIndex ring = make_ring(64);
  core::Result<RingSpans> spans = ring.writable(10);
  ASSERT_TRUE(spans.has_value());
  EXPECT_EQ(spans.value().first.offset, 0u);
  EXPECT_EQ(spans.value().first.length, 10u);
  EXPECT_EQ(spans.value().second.length, 0u);
  EXPECT_EQ(spans.value().total(), 10u);
  EXPECT_EQ(ring.tail(), 0u) << "writable() must not move the tail";
}

TEST(RingIndex, WriteThatWrapsSplitsInTwo) {
  RingIndex ring = make_ring(64);
  ASSERT_TRUE(ring.produce(60).has_value());
  ASSERT_TRUE(ring.consume(60).has_value());
  core::Result<RingSpans> spans = ring.writable(10);
  ASSERT_TRUE(spans.has_value());
  EXPECT_EQ(spans.value().first.offset, 60u);
  EXPECT_EQ(spans.value().first.length, 4u);
  EXPECT_EQ(spans.value().second.offset, 0u);
  EXPECT_EQ(spans.value().second.length, 6u);
}

TEST(RingIndex, WriteEndingExactlyAtTheEndDoesNotWrap) {
  RingIndex ring = make_ring(64);
  ASSERT_TRUE(ring.produce(48).has_value());
  ASSERT_TRUE(ring.consume(48).has_value());
  RingSpans spans = ring.writable(16).value();
  EXPECT_EQ(spans.first.offset, 48u);
  EXPECT_EQ(spans.first.length, 16u);
  EXPECT_EQ(spans.second.length, 0u);
  ASSERT_TRUE(ring.produce(16).has_value());
  EXPECT_EQ(ring.offset_of(ring.tail()), 0u);
}

TEST(RingIndex, FullAndEmptyAreDistinct) {
  RingIndex ring = make_ring(32);
  ASSERT_TRUE(ring.produce(32).has_value());
  EXPECT_TRUE(ring.full());
  EXPECT_FALSE(ring.empty());
  EXPECT_EQ(ring.offset_of(ring.head()), ring.offset_of(ring.tail()));
  EXPECT_EQ(ring.writable(1).error(), EAGAIN);
  EXPECT_TRUE(ring.writable(0).has_value());
  ASSERT_TRUE(ring.consume(32).has_value());
  EXPECT_TRUE(ring.empty());
}

TEST(RingIndex, WritableErrorsTellWaitFromNever) {
  RingIndex ring = make_ring(32);
  ASSERT_TRUE(ring.produce(20).has_value());
  EXPECT_EQ(ring.writable(13).error(), EAGAIN);  // fits once the consumer moves
  EXPECT_EQ(ring.writable(33).error(), EMSGSIZE);  // never fits
  EXPECT_TRUE(ring.writable(12).has_value());
}

TEST(RingIndex, ProduceAndConsumeRefuseOverrunWithoutChange) {
  RingIndex ring = make_ring(16);
  ASSERT_TRUE(ring.produce(10).has_value());
  Status over = ring.produce(7);
  EXPECT_FALSE(over.has_value());
  EXPECT_EQ(over.error(), ERANGE);
  EXPECT_EQ(ring.tail(), 10u);
  Status under = ring.consume(11);
  EXPECT_EQ(under.error(), ERANGE);
  EXPECT_EQ(ring.head(), 0u);
  // Lengths that would overflow 64-bit arithmetic are refused as well.
  EXPECT_FALSE(ring.produce(UINT64_MAX).has_value());
  EXPECT_FALSE(ring.consume(UINT64_MAX).has_value());
  EXPECT_EQ(ring.used(), 10u);
}

TEST(RingIndex, ReadableFollowsTheHead) {
  RingIndex ring = make_ring(16);
  ASSERT_TRUE(ring.produce(14).has_value());
  ASSERT_TRUE(ring.consume(12).has_value());
  ASSERT_TRUE(ring.produce(8).has_value());  // bytes 12..21: wraps after 4
  RingSpans all = ring.readable_all();
  EXPECT_EQ(all.first.offset, 12u);
  EXPECT_EQ(all.first.length, 4u);
  EXPECT_EQ(all.second.offset, 0u);
  EXPECT_EQ(all.second.length, 6u);
  RingSpans part = ring.readable(3).value();
  EXPECT_EQ(part.first.offset, 12u);
  EXPECT_EQ(part.first.length, 3u);
  EXPECT_EQ(part.second.length, 0u);
  EXPECT_EQ(ring.readable(11).error(), ERANGE);
}

TEST(RingIndex, CountersWrapAroundTwoToTheSixtyFour) {
  // Start 8 bytes before the 64-bit counters wrap: used/space stay right.
  RingIndex ring = make_ring(16, UINT64_MAX - 7);
  ASSERT_TRUE(ring.produce(12).has_value());
  EXPECT_LT(ring.tail(), ring.head()) << "the tail counter has wrapped";
  EXPECT_EQ(ring.used(), 12u);
  EXPECT_EQ(ring.space(), 4u);
  RingSpans all = ring.readable_all();
  EXPECT_EQ(all.first.offset, (UINT64_MAX - 7) & 15);
  EXPECT_EQ(all.total(), 12u);
  ASSERT_TRUE(ring.consume(12).has_value());
  EXPECT_TRUE(ring.empty());
  EXPECT_EQ(ring.head(), 4u);
}

TEST(RingIndex, ContainsChecksPeerSpans) {
  RingIndex ring = make_ring(4096);
  EXPECT_TRUE(ring.contains(0, 4096));
  EXPECT_TRUE(ring.contains(4095, 1));
  EXPECT_TRUE(ring.contains(100, 0));
  EXPECT_FALSE(ring.contains(4095, 2));
  EXPECT_FALSE(ring.contains(4096, 0));
  EXPECT_FALSE(ring.contains(1, UINT64_MAX));  // offset + length overflows
  EXPECT_FALSE(ring.contains(UINT64_MAX, 1));
}

// A long random-ish walk: a model byte counter checks every span produced.
TEST(RingIndex, SpansCoverEachByteExactlyOnce) {
  RingIndex ring = make_ring(64);
  std::vector<uint64_t> owner(64, UINT64_MAX);  // which stream position each slot holds
  uint64_t written = 0, read = 0;
  uint32_t seed = 12345;
  for (int step = 0; step < 20000; ++step) {
    seed = seed * 1103515245u + 12345u;
    uint64_t n = (seed >> 16) % 40;
    if ((seed >> 8) & 1) {
      core::Result<RingSpans> spans = ring.writable(n);
      if (!spans) {
        EXPECT_EQ(spans.error(), EAGAIN);
        continue;
      }
      for (const RingSpan& s : {spans.value().first, spans.value().second})
        for (uint64_t i = 0; i < s.length; ++i) owner[s.offset + i] = written++;
      ASSERT_TRUE(ring.produce(n).has_value());
    } else {
      n = n < ring.used() ? n : ring.used();
      RingSpans spans = ring.readable(n).value();
      for (const RingSpan& s : {spans.first, spans.second})
        for (uint64_t i = 0; i < s.length; ++i) ASSERT_EQ(owner[s.offset + i], read++);
      ASSERT_TRUE(ring.consume(n).has_value());
    }
    ASSERT_EQ(ring.used(), written - read);
  }
}

TEST(RemoteRing, RejectsBadDescriptors) {
  EXPECT_EQ(RemoteRing::create({0x1000, 7, 3000}).error(), EPROTO);  // not a power of two
  EXPECT_EQ(RemoteRing::create({0x1000, 7, 0}).error(), EPROTO);
  EXPECT_EQ(RemoteRing::create({0x1000, 7, 0x80000000u}).has_value(), true);
  EXPECT_EQ(RemoteRing::create({UINT64_MAX - 100, 7, 4096}).error(), EPROTO);  // wraps the address space
}

TEST(RemoteRing, PlansRemoteAddressesAcrossTheWrap) {
  RemoteRing ring = RemoteRing::create({0x10000, 42, 4096}).value();
  EXPECT_EQ(ring.rkey(), 42u);
  RemoteWrite first = ring.plan(4000).value();
  EXPECT_EQ(first.first.address, 0x10000u);
  EXPECT_EQ(first.first.length, 4000u);
  EXPECT_EQ(first.second.length, 0u);
  ASSERT_TRUE(ring.commit(4000).has_value());
  EXPECT_EQ(ring.plan(200).error(), EAGAIN);  // only 96 bytes of credit left
  ASSERT_TRUE(ring.on_credit(4000).has_value());
  RemoteWrite wrapped = ring.plan(200).value();
  EXPECT_EQ(wrapped.first.address, 0x10000u + 4000);
  EXPECT_EQ(wrapped.first.length, 96u);
  EXPECT_EQ(wrapped.second.address, 0x10000u);
  EXPECT_EQ(wrapped.second.length, 104u);
}

TEST(RemoteRing, CreditBeyondWhatIsInFlightIsAProtocolError) {
  RemoteRing ring = RemoteRing::create({0x10000, 1, 1024}).value();
  ASSERT_TRUE(ring.commit(100).has_value());
  Status bad = ring.on_credit(101);
  EXPECT_EQ(bad.error(), EPROTO);
  EXPECT_EQ(ring.in_flight(), 100u);
  EXPECT_TRUE(ring.on_credit(100).has_value());
  EXPECT_EQ(ring.plan(2048).error(), EMSGSIZE);
}

TEST(RingIndex, ResizedKeepsPositionsAndMovesOffsets) {
  RingIndex small = RingIndex::create(1024, 5000).value();
  ASSERT_TRUE(small.produce(1000).has_value());
  ASSERT_TRUE(small.consume(200).has_value());  // head 5200, tail 6000
  RingIndex bigger = small.resized(4096).value();
  EXPECT_EQ(bigger.head(), 5200u);
  EXPECT_EQ(bigger.tail(), 6000u);
  EXPECT_EQ(bigger.capacity(), 4096u);
  EXPECT_EQ(bigger.space(), 4096u - 800);
  EXPECT_EQ(bigger.offset_of(6000), 6000u % 4096);
  EXPECT_EQ(small.resized(512).error(), ERANGE);  // 800 in use do not fit
  EXPECT_EQ(small.resized(3000).error(), EINVAL);
}

TEST(RemoteRing, MovedToALargerRingKeepsWhatIsInFlight) {
  RemoteRing ring = RemoteRing::create({0x10000, 1, 4096}).value();
  ASSERT_TRUE(ring.commit(4000).has_value());
  ASSERT_TRUE(ring.on_credit(1000).has_value());  // head 1000, tail 4000
  RemoteRing moved = ring.moved_to({0x40000, 9, 16384}).value();
  EXPECT_EQ(moved.rkey(), 9u);
  EXPECT_EQ(moved.in_flight(), 3000u);
  EXPECT_EQ(moved.space(), 16384u - 3000);
  RemoteWrite next = moved.plan(100).value();  // position 4000 of the new ring
  EXPECT_EQ(next.first.address, 0x40000u + 4000);
  EXPECT_EQ(ring.moved_to({0x40000, 9, 4096}).error(), EPROTO);  // not larger
  EXPECT_EQ(ring.moved_to({0x40000, 9, 1024}).error(), EPROTO);
  EXPECT_EQ(ring.moved_to({UINT64_MAX - 100, 9, 16384}).error(), EPROTO);
}

}  // namespace
}  // namespace vsock::rdma
