// SpinBudget: the spin of every blocking wait is bounded by the budget and
// by the caller's deadline, and a wait with no time left does not spin.
#include "sock/wait/spin_budget.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <thread>

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

// Pins the calling thread to `cpu`; false if it cannot.
bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set) == 0;
}

// Spins (budget `us` each) until `done` says so or `spins` run out.
template <typename Done>
bool spin_until(Done done, int spins, uint32_t us) {
  for (int i = 0; i < spins; ++i) {
    SpinBudget spin(us, -1);
    while (spin.next()) {
    }
    if (done()) return true;
  }
  return false;
}

// Alone on its CPU a spin stops yielding; with a runnable thread beside it
// on the same CPU it yields at every look; alone again, it stops. (Each
// phase is bounded; on a loaded machine another process on the CPU may
// also count as sharing it, so only the pinned-together phase must find
// sharing, and the alone phases get many tries.)
TEST(SpinBudget, YieldsAtEveryLookOnlyWhileAnotherThreadWantsItsCpu) {
  std::thread([] {
    if (!pin_to(0)) GTEST_SKIP() << "cannot pin to CPU 0";
    EXPECT_TRUE(SpinBudget::yields_every_look());  // pinned to one CPU: assumed shared at first
    const bool alone_first = spin_until([] { return !SpinBudget::yields_every_look(); }, 2000, 200);
    std::atomic<bool> stop{false};
    std::thread busy([&] {
      pin_to(0);
      while (!stop.load(std::memory_order_relaxed)) ::sched_yield();
    });
    const bool shared = spin_until([] { return SpinBudget::yields_every_look(); }, 2000, 200);
    stop.store(true);
    busy.join();
    const bool alone_again = spin_until([] { return !SpinBudget::yields_every_look(); }, 2000, 200);
    EXPECT_TRUE(shared);
    EXPECT_TRUE(alone_first || alone_again) << "never found itself alone on its CPU";
  }).join();
}

}  // namespace
}  // namespace vsock::sock
