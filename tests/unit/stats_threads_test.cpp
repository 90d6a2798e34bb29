// The per-thread statistics counters (core/stats.cpp): sums over threads
// are exact, survive the threads that counted, and a block handed to a new
// thread keeps counting on from its old value.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace vsock::core
