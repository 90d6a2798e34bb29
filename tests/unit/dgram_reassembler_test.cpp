// The reassembler (src/sock/dgram/reassembler.*): datagrams come out whole,
// once, whatever order their fragments arrive in; loss, duplicates,
// disagreeing and malformed fragments, age and the memory limits each drop
// what they should and count it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "sock/dgram/fragmenter.hpp"
#include "sock/dgram/reassembler.hpp"

namespace vsock::sock::dgram {
namespace {

using Bytes = std::vector<uint8_t>;

ReassemblyLimits limits(size_t bytes, size_t datagrams, uint64_t age_ms) {
  ReassemblyLimits l;
  l.byte_budget = bytes;
  l.max_datagrams = datagrams;
  l.max_age_ms = age_ms;
  return l;
}

DatagramKey key(uint32_t id, uint64_t source = 7, uint64_t cookie = 0x100) {
  DatagramKey k;
  k.source = source;
  k.source_cookie = cookie;
  k.datagram_id = id;
  return k;
}

Bytes content(size_t len, uint8_t seed) {
  Bytes b(len);
  for (size_t i = 0; i < len; ++i) b[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 8));
  return b;
}

// A datagram cut as a sender would, to feed fragment by fragment.
struct Cut {
  FragmentPlan plan;
  Bytes data;

  Cut(size_t len, size_t budget, uint8_t seed = 1) : plan(plan_fragments(len, budget).value()), data(content(len, seed)) {}

  FragmentFields fields(uint32_t index) const {
    FragmentFields f;
    f.total_length = plan.total;
    f.count = plan.count;
    f.index = index;
    return f;
  }
  FragmentVerdict feed(Reassembler& r, const DatagramKey& k, uint32_t index, uint64_t now, Bytes* out) const {
    wire::FragmentSpan span = fragment_at(plan, index).value();
    return r.add(k, fields(index), data.data() + span.offset, span.length, now, out);
  }
};

TEST(Reassembler, OneFragmentComesOutAtOnceAndIsNotHeld) {
  Reassembler r(limits(0, 0, 0));  // no room at all: a whole datagram needs none
  Cut cut(100, 4056);
  Bytes out;
  EXPECT_EQ(cut.feed(r, key(1), 0, 0, &out), FragmentVerdict::kComplete);
  EXPECT_EQ(out, cut.data);
  Cut empty(0, 4056);
  EXPECT_EQ(empty.feed(r, key(2), 0, 0, &out), FragmentVerdict::kComplete);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(r.in_progress(), 0u);
  EXPECT_EQ(r.held_bytes(), 0u);
  EXPECT_EQ(r.counters().completed, 2u);
}

TEST(Reassembler, InOrder) {
  Reassembler r(limits(1 << 20, 8, 1000));
  Cut cut(9000, 1000);
  ASSERT_EQ(cut.plan.count, 9u);
  Bytes out;
  for (uint32_t i = 0; i + 1 < cut.plan.count; ++i) {
    EXPECT_EQ(cut.feed(r, key(1), i, 0, &out), FragmentVerdict::kHeld) << i;
    EXPECT_EQ(r.held_bytes(), 9000u);  // the whole length, from the first fragment on
    EXPECT_EQ(r.in_progress(), 1u);
  }
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(cut.feed(r, key(1), 8, 0, &out), FragmentVerdict::kComplete);
  EXPECT_EQ(out, cut.data);
  EXPECT_EQ(r.in_progress(), 0u);
  EXPECT_EQ(r.held_bytes(), 0u);
  EXPECT_EQ(r.counters().completed, 1u);
}

TEST(Reassembler, AnyOrder) {
  std::mt19937 rng(11);
  for (int round = 0; round < 50; ++round) {
    Reassembler r(limits(1 << 20, 8, 1000));
    Cut cut(1 + rng() % 65507, 216 + rng() % 4000, static_cast<uint8_t>(round));
    std::vector<uint32_t> order(cut.plan.count);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    Bytes out;
    for (size_t n = 0; n < order.size(); ++n) {
      FragmentVerdict v = cut.feed(r, key(round), order[n], 0, &out);
      EXPECT_EQ(v, n + 1 == order.size() ? FragmentVerdict::kComplete : FragmentVerdict::kHeld);
    }
    EXPECT_EQ(out, cut.data) << round;
    EXPECT_EQ(r.held_bytes(), 0u);
  }
}

TEST(Reassembler, InterleavedDatagramsAreKeptApart) {
  Reassembler r(limits(1 << 20, 8, 1000));
  Cut a(3000, 1000, 1), b(3000, 1000, 2), c(3000, 1000, 3);
  // Same id from two senders and two sockets of one sender: three datagrams.
  const DatagramKey ka = key(5, 1, 0x100), kb = key(5, 2, 0x100), kc = key(5, 1, 0x200);
  Bytes out;
  for (uint32_t i = 0; i < 2; ++i) {
    EXPECT_EQ(a.feed(r, ka, i, 0, &out), FragmentVerdict::kHeld);
    EXPECT_EQ(b.feed(r, kb, 2 - i, 0, &out), FragmentVerdict::kHeld);
    EXPECT_EQ(c.feed(r, kc, i, 0, &out), FragmentVerdict::kHeld);
  }
  EXPECT_EQ(r.in_progress(), 3u);
  EXPECT_EQ(b.feed(r, kb, 0, 0, &out), FragmentVerdict::kComplete);
  EXPECT_EQ(out, b.data);
  EXPECT_EQ(a.feed(r, ka, 2, 0, &out), FragmentVerdict::kComplete);
  EXPECT_EQ(out, a.data);
  EXPECT_EQ(c.feed(r, kc, 2, 0, &out), FragmentVerdict::kComplete);
  EXPECT_EQ(out, c.data);
}

TEST(Reassembler, DuplicatesAreDroppedAndCountedAndTheDatagramComesOutOnce) {
  Reassembler r(limits(1 << 20, 8, 1000));
  Cut cut(3000, 1000);
  Bytes out;
  EXPECT_EQ(cut.feed(r, key(1), 1, 0, &out), FragmentVerdict::kHeld);
  EXPECT_EQ(cut.feed(r, key(1), 1, 0, &out), FragmentVerdict::kDuplicate);
  EXPECT_EQ(cut.feed(r, key(1), 0, 0, &out), FragmentVerdict::kHeld);
  EXPECT_EQ(cut.feed(r, key(1), 0, 0, &out), FragmentVerdict::kDuplicate);
  EXPECT_EQ(cut.feed(r, key(1), 2, 0, &out), FragmentVerdict::kComplete);
  EXPECT_EQ(out, cut.data);
  EXPECT_EQ(r.counters().duplicates, 2u);
  // A copy arriving after completion starts over; it is not a second datagram.
  Bytes again;
  EXPECT_EQ(cut.feed(r, key(1), 2, 0, &again), FragmentVerdict::kHeld);
  EXPECT_TRUE(again.empty());
  EXPECT_EQ(r.counters().completed, 1u);
}

TEST(Reassembler, FragmentsThatDisagreeWithTheFirstAreDropped) {
  Reassembler r(limits(1 << 20, 8, 1000));
  Cut cut(3000, 1000);
  Bytes out;
  EXPECT_EQ(cut.feed(r, key(1), 0, 0, &out), FragmentVerdict::kHeld);
  Cut other_total(3003, 1001);  // 3 fragments of 1001
  EXPECT_EQ(other_total.feed(r, key(1), 1, 0, &out), FragmentVerdict::kMismatch);
  Cut other_count(3000, 750);  // 4 fragments of 750
  EXPECT_EQ(other_count.feed(r, key(1), 1, 0, &out), FragmentVerdict::kMismatch);
  Cut whole(3000, 4056);  // one fragment, while a partial one waits
  EXPECT_EQ(whole.feed(r, key(1), 0, 0, &out), FragmentVerdict::kMismatch);
  EXPECT_EQ(r.counters().mismatched, 3u);
  EXPECT_EQ(cut.feed(r, key(1), 1, 0, &out), FragmentVerdict::kHeld);
  EXPECT_EQ(cut.feed(r, key(1), 2, 0, &out), FragmentVerdict::kComplete);
  EXPECT_EQ(out, cut.data);
}

TEST(Reassembler, BadLayoutsAreDroppedAndNeverRead) {
  Reassembler r(limits(1 << 20, 8, 1000));
  const Bytes payload(70000, 0xEE);
  auto add = [&](uint32_t total, uint32_t count, uint32_t index, size_t len) {
    FragmentFields f;
    f.total_length = total;
    f.count = count;
    f.index = index;
    Bytes out;
    return r.add(key(1), f, payload.data(), len, 0, &out);
  };
  EXPECT_EQ(add(3000, 3, 3, 1000), FragmentVerdict::kBadLayout);       // index out of range
  EXPECT_EQ(add(3000, 3, 0, 1001), FragmentVerdict::kBadLayout);       // longer than its span: would overlap
  EXPECT_EQ(add(3000, 3, 2, 999), FragmentVerdict::kBadLayout);        // shorter than its span
  EXPECT_EQ(add(3000, 0, 0, 0), FragmentVerdict::kBadLayout);          // count 0
  EXPECT_EQ(add(65508, 2, 0, 32754), FragmentVerdict::kBadLayout);     // above 65,507
  EXPECT_EQ(add(3000, 513, 0, 6), FragmentVerdict::kBadLayout);        // above the fragment maximum
  EXPECT_EQ(add(2, 3, 0, 1), FragmentVerdict::kBadLayout);             // an empty fragment
  FragmentFields f;
  f.total_length = 10;
  f.count = 2;
  Bytes out;
  EXPECT_EQ(r.add(key(1), f, nullptr, 5, 0, &out), FragmentVerdict::kBadLayout);
  EXPECT_EQ(r.counters().bad_layout, 8u);
  EXPECT_EQ(r.in_progress(), 0u);
  EXPECT_EQ(r.held_bytes(), 0u);
}

TEST(Reassembler, ALostFragmentLosesTheDatagramAfterTheAge) {
  Reassembler r(limits(1 << 20, 8, 100));
  Cut cut(3000, 1000);
  Bytes out;
  EXPECT_EQ(cut.feed(r, key(1), 0, 1000, &out), FragmentVerdict::kHeld);
  EXPECT_EQ(cut.feed(r, key(1), 2, 1100, &out), FragmentVerdict::kHeld);  // exactly the age: kept
  EXPECT_EQ(r.expire(1100), 0u);
  EXPECT_EQ(r.in_progress(), 1u);
  EXPECT_EQ(r.expire(1101), 1u);  // older than the age
  EXPECT_EQ(r.in_progress(), 0u);
  EXPECT_EQ(r.held_bytes(), 0u);
  EXPECT_EQ(r.counters().timed_out, 1u);
  // The missing fragment, late: a new partial datagram, not a completion.
  EXPECT_EQ(cut.feed(r, key(1), 1, 1102, &out), FragmentVerdict::kHeld);
  EXPECT_TRUE(out.empty());
}

TEST(Reassembler, AddExpiresOldDatagramsFirst) {
  Reassembler r(limits(1 << 20, 8, 100));
  Cut cut(3000, 1000);
  Bytes out;
  EXPECT_EQ(cut.feed(r, key(1), 0, 0, &out), FragmentVerdict::kHeld);
  EXPECT_EQ(cut.feed(r, key(2), 0, 50, &out), FragmentVerdict::kHeld);
  // At 120 the first is too old, the second not: the first's fragment
  // starts over, the second completes in time.
  EXPECT_EQ(cut.feed(r, key(1), 1, 120, &out), FragmentVerdict::kHeld);
  EXPECT_EQ(r.counters().timed_out, 1u);
  EXPECT_EQ(cut.feed(r, key(2), 1, 120, &out), FragmentVerdict::kHeld);
  EXPECT_EQ(cut.feed(r, key(2), 2, 150, &out), FragmentVerdict::kComplete);
  EXPECT_EQ(out, cut.data);
}

TEST(Reassembler, TimeNeverRunsBackwards) {
  Reassembler r(limits(1 << 20, 8, 100));
  Cut cut(3000, 1000);
  Bytes out;
  EXPECT_EQ(cut.feed(r, key(1), 0, 5000, &out), FragmentVerdict::kHeld);
  // An earlier now_ms counts as 5000: the datagram is 0 ms old, not ~2^64.
  EXPECT_EQ(r.expire(10), 0u);
  EXPECT_EQ(cut.feed(r, key(2), 0, 20, &out), FragmentVerdict::kHeld);  // started at 5000 too
  EXPECT_EQ(r.expire(5100), 0u);
  EXPECT_EQ(r.expire(5101), 2u);
}

TEST(Reassembler, TheByteBudgetEvictsTheOldest) {
  Reassembler r(limits(7000, 8, 1000));
  Cut cut(3000, 1000);
  Bytes out;
  EXPECT_EQ(cut.feed(r, key(1), 0, 0, &out), FragmentVerdict::kHeld);
  EXPECT_EQ(cut.feed(r, key(2), 0, 1, &out), FragmentVerdict::kHeld);
  EXPECT_EQ(r.held_bytes(), 6000u);
  EXPECT_EQ(cut.feed(r, key(1), 1, 2, &out), FragmentVerdict::kHeld);  // the oldest is used: still the oldest
  EXPECT_EQ(cut.feed(r, key(3), 0, 3, &out), FragmentVerdict::kHeld);  // 9000 > 7000: key 1 goes
  EXPECT_EQ(r.counters().evicted, 1u);
  EXPECT_EQ(r.held_bytes(), 6000u);
  EXPECT_EQ(r.in_progress(), 2u);
  EXPECT_EQ(cut.feed(r, key(2), 1, 4, &out), FragmentVerdict::kHeld);
  EXPECT_EQ(cut.feed(r, key(2), 2, 4, &out), FragmentVerdict::kComplete);
  EXPECT_EQ(out, cut.data);
  // Key 1's remaining fragment starts a new partial datagram.
  EXPECT_EQ(cut.feed(r, key(1), 2, 5, &out), FragmentVerdict::kHeld);
  EXPECT_LE(r.held_bytes(), 7000u);
}

TEST(Reassembler, OneLargeDatagramEvictsSeveral) {
  Reassembler r(limits(10000, 8, 1000));
  Cut small(2000, 1000), large(9000, 1000);
  Bytes out;
  for (uint32_t id = 1; id <= 5; ++id) EXPECT_EQ(small.feed(r, key(id), 0, id, &out), FragmentVerdict::kHeld);
  EXPECT_EQ(r.held_bytes(), 10000u);
  EXPECT_EQ(large.feed(r, key(9), 0, 10, &out), FragmentVerdict::kHeld);
  EXPECT_EQ(r.counters().evicted, 5u);  // 2000 + 9000 > 10000 still with one left
  EXPECT_EQ(r.held_bytes(), 9000u);
  EXPECT_EQ(r.in_progress(), 1u);
}

TEST(Reassembler, TheDatagramCountEvictsTheOldest) {
  Reassembler r(limits(1 << 20, 2, 1000));
  Cut cut(3000, 1000);
  Bytes out;
  EXPECT_EQ(cut.feed(r, key(1), 0, 0, &out), FragmentVerdict::kHeld);
  EXPECT_EQ(cut.feed(r, key(2), 0, 0, &out), FragmentVerdict::kHeld);
  EXPECT_EQ(cut.feed(r, key(3), 0, 0, &out), FragmentVerdict::kHeld);
  EXPECT_EQ(r.in_progress(), 2u);
  EXPECT_EQ(r.counters().evicted, 1u);
  EXPECT_EQ(cut.feed(r, key(2), 1, 0, &out), FragmentVerdict::kHeld);
  EXPECT_EQ(cut.feed(r, key(2), 2, 0, &out), FragmentVerdict::kComplete);
  EXPECT_EQ(out, cut.data);
}

TEST(Reassembler, ADatagramAboveTheWholeBudgetIsDroppedWithoutEvicting) {
  Reassembler r(limits(5000, 8, 1000));
  Cut small(2000, 1000), large(6000, 1000);
  Bytes out;
  EXPECT_EQ(small.feed(r, key(1), 0, 0, &out), FragmentVerdict::kHeld);
  EXPECT_EQ(large.feed(r, key(2), 0, 0, &out), FragmentVerdict::kTooLarge);
  EXPECT_EQ(r.counters().too_large, 1u);
  EXPECT_EQ(r.counters().evicted, 0u);
  EXPECT_EQ(r.in_progress(), 1u);
  Reassembler none(limits(1 << 20, 0, 1000));  // no partial datagram at all
  EXPECT_EQ(small.feed(none, key(1), 0, 0, &out), FragmentVerdict::kTooLarge);
  Cut whole(2000, 4056);
  EXPECT_EQ(whole.feed(none, key(1), 0, 0, &out), FragmentVerdict::kComplete);
}

TEST(Reassembler, TheLargestDatagramInTheMostFragments) {
  Reassembler r(limits(wire::kMaxDatagramSize, 1, 1000));
  const size_t budget = (wire::kMaxDatagramSize + wire::kMaxDatagramFragments - 1) / wire::kMaxDatagramFragments;
  Cut cut(wire::kMaxDatagramSize, budget, 9);
  ASSERT_EQ(cut.plan.count, wire::kMaxDatagramFragments);
  Bytes out;
  for (uint32_t i = cut.plan.count; i-- > 0;) {
    FragmentVerdict v = cut.feed(r, key(1), i, 0, &out);
    EXPECT_EQ(v, i == 0 ? FragmentVerdict::kComplete : FragmentVerdict::kHeld) << i;
  }
  EXPECT_EQ(out, cut.data);
}

}  // namespace
}  // namespace vsock::sock::dgram
