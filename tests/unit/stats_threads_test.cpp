// The per-thread statistics counters (core/stats.cpp): sums over threads
// are exact, survive the threads that counted, and a block handed to a new
// thread keeps counting on from its old value; a fork child starts at 0.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "core/stats.hpp"

namespace vsock::core {
namespace {

TEST(StatsThreads, SumOfConcurrentThreadsIsExact) {
  const uint64_t before = stat_get(Stat::rdma_writes);
  const uint64_t bytes_before = stat_get(Stat::rdma_bytes_sent);
  constexpr int kThreads = 4;
  constexpr int kAdds = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < kAdds; ++i) {
        stat_add(Stat::rdma_writes);
        stat_transfer(Stat::rdma_bytes_sent, Stat::rdma_sends, 3);
      }
    });
  // Read while they count: never more than the final figure.
  uint64_t seen = stat_get(Stat::rdma_writes);
  for (std::thread& t : threads) t.join();
  EXPECT_LE(seen, before + kThreads * kAdds);
  EXPECT_EQ(stat_get(Stat::rdma_writes), before + kThreads * kAdds);
  EXPECT_EQ(stat_get(Stat::rdma_bytes_sent), bytes_before + 3ull * kThreads * kAdds);
}

TEST(StatsThreads, CountsOfEndedThreadsStayAndBlocksAreReused) {
  const uint64_t before = stat_get(Stat::wait_sleeps);
  for (int round = 1; round <= 20; ++round) {
    std::thread([] { stat_add(Stat::wait_sleeps, 5); }).join();
    EXPECT_EQ(stat_get(Stat::wait_sleeps), before + 5ull * round);
  }
}

// A fork child (stats_start_anew_in_child, called by the library's fork())
// counts from 0 whatever the parent's threads had counted, also in the block
// of a parent thread that is still running (in the parent); the parent's
// sums are untouched.
TEST(StatsThreads, ForkChildStartsAnewParentKeepsItsCounts) {
  std::mutex mu;
  std::condition_variable cv;
  bool counted = false, done = false;
  std::thread busy([&] {
    stat_add(Stat::ring_grows, 7);
    std::unique_lock<std::mutex> lock(mu);
    counted = true;
    cv.notify_all();
    cv.wait(lock, [&] { return done; });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return counted; });
  }
  stat_add(Stat::ring_grows, 3);
  stat_set(Stat::parked_now, 4);
  const uint64_t parent_sum = stat_get(Stat::ring_grows);
  ASSERT_GE(parent_sum, 10u);

  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    stats_start_anew_in_child();
    int failed = 0;
    if (stat_get(Stat::ring_grows) != 0) failed |= 1;
    if (stat_get(Stat::parked_now) != 0) failed |= 2;
    // (No thread is started here: TSan kills a child of a threaded parent
    // that starts one.)
    stat_add(Stat::ring_grows, 2);
    if (stat_get(Stat::ring_grows) != 2) failed |= 4;
    _exit(failed);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "bits: 1 counter not zeroed, 2 set value not zeroed, 4 child sum wrong";
  EXPECT_EQ(stat_get(Stat::ring_grows), parent_sum);
  EXPECT_EQ(stat_get(Stat::parked_now), 4u);
  stat_set(Stat::parked_now, 0);
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  busy.join();
}

}  // namespace
}  // namespace vsock::core
