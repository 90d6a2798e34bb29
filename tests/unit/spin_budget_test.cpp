// SpinBudget: the spin of every blocking wait is bounded by the budget and
// by the caller's deadline, and a wait with no time left does not spin.
#include "sock/spin_budget.hpp"

#include <gtest/gtest.h>

#include "core/clock.hpp"

namespace vsock::sock {
namespace {

// Looks until the budget says stop; returns the µs it took.
int64_t spin_out(SpinBudget& spin) {
  const int64_t start = core::monotonic_us();
  while (spin.next()) {
  }
  return core::monotonic_us() - start;
}

TEST(SpinBudget, ZeroBudgetDoesNotSpin) {
  SpinBudget spin(0, -1);
  EXPECT_FALSE(spin.next());
}

TEST(SpinBudget, DeadlineReachedDoesNotSpin) {
  SpinBudget spin(2000, core::monotonic_us());  // timeout 0
  EXPECT_FALSE(spin.next());
}

TEST(SpinBudget, EndsAfterItsBudget) {
  SpinBudget spin(3000, -1);
  int64_t took = spin_out(spin);
  EXPECT_GE(took, 3000 - 50);  // clock reads every few looks: a little early at most
  EXPECT_LT(took, 1000000);    // bounded (generous: the machine may be loaded)
}

TEST(SpinBudget, DeadlineCapsTheBudget) {
  SpinBudget spin(10'000'000, core::monotonic_us() + 2000);
  EXPECT_LT(spin_out(spin), 1000000);
}

TEST(SpinBudget, KernelLooksOnTheFirstLookAndThenEveryFewLooks) {
  SpinBudget spin(10'000'000, -1);
  EXPECT_TRUE(spin.checkpoint());  // the first look asks the kernel too
  int checkpoints = 0;
  const int looks = 160;
  for (int i = 0; i < looks; ++i) {
    ASSERT_TRUE(spin.next());
    checkpoints += spin.checkpoint();
  }
  // One in every few looks, not none and not all.
  EXPECT_GT(checkpoints, 0);
  EXPECT_LT(checkpoints, looks / 4);
}

}  // namespace
}  // namespace vsock::sock
