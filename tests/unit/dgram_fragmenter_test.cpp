// The fragmenter (src/sock/dgram/fragmenter.*): the fewest fragments a
// budget allows, never a fragment above the budget, spans that cover the
// datagram, and the limits (65,507 bytes, kMaxDatagramFragments, budget 0).
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <vector>

#include "sock/dgram/fragmenter.hpp"
#include "sock/wire/datagram_header.hpp"

namespace vsock::sock::dgram {
namespace {

TEST(Fragmenter, BudgetIsTheMtuLessTheHeader) {
  EXPECT_EQ(payload_budget(4096), 4096 - wire::kDatagramHeaderSize);
  EXPECT_EQ(payload_budget(256), 216u);
  EXPECT_EQ(payload_budget(wire::kDatagramHeaderSize), 0u);
  EXPECT_EQ(payload_budget(0), 0u);
}

TEST(Fragmenter, FitsInOneMessage) {
  for (size_t len : {size_t{0}, size_t{1}, size_t{4056}}) {
    core::Result<FragmentPlan> plan = plan_fragments(len, 4056);
    ASSERT_TRUE(plan.has_value()) << len;
    EXPECT_EQ(plan.value().count, 1u);
    EXPECT_EQ(plan.value().total, len);
    EXPECT_EQ(fragment_at(plan.value(), 0).value().offset, 0u);
    EXPECT_EQ(fragment_at(plan.value(), 0).value().length, len);
  }
}

TEST(Fragmenter, FewestFragmentsNoneAboveTheBudget) {
  const size_t budgets[] = {1, 2, 3, 128, 216, 1000, 1024 - 40, 4096 - 40, 65507, 1u << 20, SIZE_MAX};
  const size_t lengths[] = {1, 2, 3, 127, 128, 129, 216, 217, 4056, 4057, 9000, 65506, 65507};
  for (size_t budget : budgets) {
    for (size_t len : lengths) {
      core::Result<FragmentPlan> plan = plan_fragments(len, budget);
      const size_t want_count = (len + std::min(budget, len) - 1) / std::min(budget, len);
      if (want_count > wire::kMaxDatagramFragments) {
        EXPECT_EQ(plan.error(), EMSGSIZE) << len << " " << budget;
        continue;
      }
      ASSERT_TRUE(plan.has_value()) << len << " " << budget;
      EXPECT_EQ(plan.value().count, want_count) << len << " " << budget;
      uint32_t next = 0;
      for (uint32_t i = 0; i < plan.value().count; ++i) {
        wire::FragmentSpan span = fragment_at(plan.value(), i).value();
        EXPECT_EQ(span.offset, next);
        EXPECT_GE(span.length, 1u);
        EXPECT_LE(span.length, budget);
        next += span.length;
      }
      EXPECT_EQ(next, len);
    }
  }
}

TEST(Fragmenter, LargestDatagramAtTheSmallestMtu) {
  // 216 payload bytes per message: 304 fragments, within the maximum.
  core::Result<FragmentPlan> plan = plan_fragments(wire::kMaxDatagramSize, payload_budget(256));
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan.value().count, 304u);
  // The smallest budget that still fits the largest datagram, and one less.
  const size_t smallest = (wire::kMaxDatagramSize + wire::kMaxDatagramFragments - 1) / wire::kMaxDatagramFragments;
  EXPECT_EQ(plan_fragments(wire::kMaxDatagramSize, smallest).value().count, wire::kMaxDatagramFragments);
  EXPECT_EQ(plan_fragments(wire::kMaxDatagramSize, smallest - 1).error(), EMSGSIZE);
}

TEST(Fragmenter, Refusals) {
  EXPECT_EQ(plan_fragments(wire::kMaxDatagramSize + 1, 4056).error(), EMSGSIZE);
  EXPECT_EQ(plan_fragments(SIZE_MAX, 4056).error(), EMSGSIZE);
  EXPECT_EQ(plan_fragments(100, 0).error(), EINVAL);  // no progress possible
  EXPECT_EQ(plan_fragments(0, 0).error(), EINVAL);
  EXPECT_EQ(plan_fragments(1000, 1).error(), EMSGSIZE);  // 1,000 fragments
  FragmentPlan plan = plan_fragments(10, 4).value();
  EXPECT_EQ(plan.count, 3u);
  EXPECT_EQ(fragment_at(plan, 3).error(), EINVAL);
  FragmentPlan bogus;
  bogus.total = 2;
  bogus.count = 3;
  EXPECT_EQ(fragment_at(bogus, 0).error(), EINVAL);
}

// Each fragment, with the header a sender would write, parses at the
// receiver: the fragmenter and the parser agree on the layout.
TEST(Fragmenter, EveryFragmentParses) {
  FragmentPlan plan = plan_fragments(9000, payload_budget(1024)).value();
  ASSERT_EQ(plan.count, 10u);
  for (uint32_t i = 0; i < plan.count; ++i) {
    wire::DatagramHeader h;
    h.source_port = 1;
    h.destination_port = 2;
    h.source_cookie = 3;
    h.destination_cookie = 4;
    h.fragment_index = static_cast<uint16_t>(i);
    h.fragment_count = static_cast<uint16_t>(plan.count);
    h.total_length = static_cast<uint16_t>(plan.total);
    h.payload_length = static_cast<uint16_t>(fragment_at(plan, i).value().length);
    std::vector<uint8_t> message(wire::kDatagramHeaderSize + h.payload_length);
    wire::encode(h, message.data());
    EXPECT_LE(message.size(), 1024u);
    core::Result<wire::DatagramHeader> parsed = wire::parse_datagram_header(message.data(), message.size());
    ASSERT_TRUE(parsed.has_value()) << i;
    EXPECT_EQ(parsed.value(), h);
  }
}

}  // namespace
}  // namespace vsock::sock::dgram
