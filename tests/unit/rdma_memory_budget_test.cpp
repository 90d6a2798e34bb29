// The registered-memory budget (src/rdma/memory_budget.*): reservations
// within the budget are taken, one that would pass it fails with ENOBUFS,
// and a reservation gives its bytes back when it ends (also after a move);
// grow() is never refused; 0 means no limit.
#include <gtest/gtest.h>

#include <cerrno>
#include <utility>

#include "rdma/memory_budget.hpp"

namespace vsock::rdma {
namespace {

TEST(MemoryBudget, ReservationsUpToTheBudgetThenENOBUFS) {
  const uint64_t before = reserved_bytes();
  const uint64_t budget = before + 1000;
  auto a = BudgetReservation::take(600, budget);
  ASSERT_TRUE(a.has_value());
  auto b = BudgetReservation::take(400, budget);
  ASSERT_TRUE(b.has_value());
  auto c = BudgetReservation::take(1, budget);
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error(), ENOBUFS);
  EXPECT_EQ(reserved_bytes(), before + 1000);
  {
    BudgetReservation gone = std::move(b.value());
  }
  EXPECT_EQ(reserved_bytes(), before + 600);
  EXPECT_TRUE(BudgetReservation::take(400, budget).has_value());  // and gone again at once
  EXPECT_EQ(reserved_bytes(), before + 600);
}

TEST(MemoryBudget, GrowIsNeverRefusedAndIsGivenBackToo) {
  const uint64_t before = reserved_bytes();
  {
    auto a = BudgetReservation::take(100, before + 100);
    ASSERT_TRUE(a.has_value());
    a.value().grow(5000);
    EXPECT_EQ(a.value().bytes(), 5100u);
    EXPECT_EQ(reserved_bytes(), before + 5100);
    EXPECT_FALSE(BudgetReservation::take(1, before + 5100).has_value());
  }
  EXPECT_EQ(reserved_bytes(), before);
}

TEST(MemoryBudget, ZeroMeansNoLimitAndAHugeRequestDoesNotWrap) {
  const uint64_t before = reserved_bytes();
  auto big = BudgetReservation::take(uint64_t{1} << 40, 0);
  ASSERT_TRUE(big.has_value());
  auto small = BudgetReservation::take(1, 0);
  ASSERT_TRUE(small.has_value());
  big.value() = std::move(small.value());  // the move gives the first back
  EXPECT_EQ(reserved_bytes(), before + 1);
  EXPECT_FALSE(BudgetReservation::take(~uint64_t{0}, 1u << 20).has_value());
}

}  // namespace
}  // namespace vsock::rdma
