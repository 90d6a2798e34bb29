// KernelTurns: when a datagram socket on UD asks its kernel socket too.
#include "sock/dgram/kernel_turns.hpp"

#include <gtest/gtest.h>

namespace vsock::sock::dgram {
namespace {

TEST(KernelTurns, NewSocketAsksTheKernelFirst) {
  KernelTurns turns;
  EXPECT_TRUE(turns.kernel_active());
  // Nothing taken yet: a peer's first datagrams went through the kernel
  // while its path resolved, before any over UD.
  EXPECT_TRUE(turns.kernel_first());
  turns.took_from_ud();
  EXPECT_TRUE(turns.kernel_first());
  turns.took_from_kernel();
  EXPECT_TRUE(turns.kernel_first());  // the kernel's came last: it may hold more, sent earlier
}

TEST(KernelTurns, AFloodThroughTheKernelLeavesUdATurn) {
  KernelTurns turns;
  int ud_turns = 0;
  for (uint64_t i = 0; i < 4 * KernelTurns::kQuietAfter; ++i) {
    if (turns.kernel_first()) {
      turns.took_from_kernel();
    } else {
      ++ud_turns;
      turns.took_from_ud();
    }
  }
  // One UD datagram after every kQuietAfter kernel ones.
  EXPECT_GE(ud_turns, 3);
  EXPECT_LE(ud_turns, 4);
}

TEST(KernelTurns, QuietAfterARunOfUdDatagrams) {
  KernelTurns turns;
  for (uint64_t i = 1; i < KernelTurns::kQuietAfter; ++i) {
    turns.took_from_ud();
    EXPECT_TRUE(turns.kernel_active()) << i;
    EXPECT_TRUE(turns.kernel_first()) << i;
  }
  turns.took_from_ud();
  EXPECT_FALSE(turns.kernel_active());
}

TEST(KernelTurns, QuietKernelIsTriedEveryQuietAfterUdDatagrams) {
  KernelTurns turns;
  for (uint64_t i = 0; i < KernelTurns::kQuietAfter; ++i) turns.took_from_ud();
  // Over the next 10 windows the kernel is tried first exactly once per
  // window: never starved, never more often.
  int tried = 0;
  uint64_t longest_gap = 0, gap = 0;
  for (uint64_t i = 0; i < 10 * KernelTurns::kQuietAfter; ++i) {
    turns.took_from_ud();
    ++gap;
    if (turns.kernel_first()) {
      ++tried;
      longest_gap = gap > longest_gap ? gap : longest_gap;
      gap = 0;
    }
  }
  EXPECT_EQ(tried, 10);
  EXPECT_LE(longest_gap, KernelTurns::kQuietAfter);
}

TEST(KernelTurns, AKernelDatagramMakesItActiveAgain) {
  KernelTurns turns;
  for (uint64_t i = 0; i < 3 * KernelTurns::kQuietAfter; ++i) turns.took_from_ud();
  EXPECT_FALSE(turns.kernel_active());
  turns.took_from_kernel();
  EXPECT_TRUE(turns.kernel_active());
  turns.took_from_ud();
  EXPECT_TRUE(turns.kernel_first());
}

}  // namespace
}  // namespace vsock::sock::dgram
