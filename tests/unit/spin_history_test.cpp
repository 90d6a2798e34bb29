// SpinHistory (issue 12 item 4): spins fit the waits a thread has seen —
// bounded to a multiple of the typical hit, skipped after a run of misses
// with a full probe now and then, and never longer than the profile's.
// And SpinBudget tells its history how each spin ended.
#include "sock/wait/spin_history.hpp"

#include <gtest/gtest.h>

#include "sock/wait/spin_budget.hpp"

namespace vsock::sock {
namespace {

TEST(SpinHistory, WithoutHistoryTheProfileBudgetHolds) {
  SpinHistory h;
  EXPECT_EQ(h.budget_us(50), 50u);
  EXPECT_EQ(h.budget_us(0), 0u);
  EXPECT_EQ(h.typical_us(), 0u);
}

TEST(SpinHistory, HitsBoundTheSpinToAMultipleOfTheTypicalWait) {
  SpinHistory h;
  for (int i = 0; i < 50; ++i) h.note_hit(40);
  EXPECT_EQ(h.typical_us(), 40u);
  EXPECT_EQ(h.budget_us(2000), 40u * SpinHistory::kSpanFactor);  // the latency profile's 2 ms, cut
  EXPECT_EQ(h.budget_us(50), 50u);                                // never above the profile's
  SpinHistory fast;
  fast.note_hit(0);
  EXPECT_EQ(fast.budget_us(2000), SpinHistory::kFloorUs);  // never below the floor
}

TEST(SpinHistory, TheTypicalWaitFollowsAChange) {
  SpinHistory h;
  for (int i = 0; i < 50; ++i) h.note_hit(40);
  for (int i = 0; i < 50; ++i) h.note_hit(400);
  EXPECT_GE(h.typical_us(), 390u);
  EXPECT_LE(h.typical_us(), 400u);
}

TEST(SpinHistory, ARunOfMissesSkipsSpinsButProbesWithTheWholeBudget) {
  SpinHistory h;
  for (uint32_t i = 0; i + 1 < SpinHistory::kMissesToSkip; ++i) h.note_miss();
  EXPECT_FALSE(h.skipping());
  EXPECT_EQ(h.budget_us(10), 10u);
  h.note_miss();
  ASSERT_TRUE(h.skipping());
  int zero = 0, full = 0;
  for (uint32_t i = 0; i < 4 * SpinHistory::kProbeEvery; ++i) {
    uint32_t b = h.budget_us(10);
    if (b == 0) ++zero;
    if (b == 10) ++full;
    if (b != 0) h.note_miss();  // the probe missed too
  }
  EXPECT_EQ(full, 4);  // one probe in every kProbeEvery waits
  EXPECT_EQ(zero, static_cast<int>(4 * SpinHistory::kProbeEvery) - 4);
  // A probe that hits ends the skipping.
  h.note_hit(5);
  EXPECT_FALSE(h.skipping());
  EXPECT_EQ(h.budget_us(10), 10u);  // 8 x 5 = 40, capped by the profile's 10
}

// A thread that finds it shares its CPU (a loaded machine) keeps whole
// budgets and teaches its history nothing; such a test says so and skips.
#define SKIP_IF_SHARING()                                                                      \
  if (SpinBudget::yields_every_look()) GTEST_SKIP() << "this thread shares its CPU just now: " \
                                                      "its spins keep their budget and learn nothing"

TEST(SpinHistory, ASpinReportsAMissWhenItsBudgetRunsOut) {
  SpinHistory h;
  // Runs out 8 times (more if a spin found the CPU shared meanwhile).
  for (int i = 0; i < 200 && !h.skipping(); ++i) {
    SpinBudget spin(200, -1, &h);
    while (spin.next()) {
    }
  }
  SKIP_IF_SHARING();
  EXPECT_TRUE(h.skipping());
  SpinBudget skipped(200, -1, &h);  // the next wait sleeps at once
  EXPECT_FALSE(skipped.next());
}

TEST(SpinHistory, ASpinThatEndsBeforeItsBudgetIsAHit) {
  SpinHistory h;
  {
    SpinBudget spin(1'000'000, -1, &h);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(spin.next());
  }  // what the wait waited for came: the caller stops looking
  SKIP_IF_SHARING();
  EXPECT_GT(h.typical_us(), 0u);
  EXPECT_FALSE(h.skipping());
}

TEST(SpinHistory, AFirstLookHitOrADeadlineTeachesNothing) {
  SpinHistory h;
  { SpinBudget ready_at_once(200, -1, &h); }
  EXPECT_EQ(h.typical_us(), 0u);
  for (uint32_t i = 0; i < 2 * SpinHistory::kMissesToSkip; ++i) {
    SpinBudget spin(1'000'000, 0, &h);  // timeout 0
    EXPECT_FALSE(spin.next());
  }
  EXPECT_FALSE(h.skipping());
}

}  // namespace
}  // namespace vsock::sock
