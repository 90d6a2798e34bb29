#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "sock/fd_table.hpp"

namespace vsock::sock {
namespace {

TEST(FdTable, EmptyLookupsAndNegativeFds) {
  static FdTable<int> table;
  EXPECT_EQ(table.lookup(0), nullptr);
  EXPECT_EQ(table.lookup(-1), nullptr);
  int* previous = nullptr;
  int value = 1;
  EXPECT_FALSE(table.exchange(-5, &value, &previous));
}

TEST(FdTable, StoresAcrossChunksUpToIntMax) {
  static FdTable<int> table;
  int a = 1, b = 2, c = 3;
  int* previous = nullptr;
  const int big = 1 << 20, huge = 0x7fffffff;
  ASSERT_TRUE(table.exchange(3, &a, &previous));
  ASSERT_TRUE(table.exchange(big, &b, &previous));
  ASSERT_TRUE(table.exchange(huge, &c, &previous));
  EXPECT_EQ(table.lookup(3), &a);
  EXPECT_EQ(table.lookup(big), &b);
  EXPECT_EQ(table.lookup(huge), &c);
  EXPECT_EQ(table.lookup(big + 1), nullptr);
  ASSERT_TRUE(table.exchange(big, nullptr, &previous));
  EXPECT_EQ(previous, &b);
  EXPECT_EQ(table.lookup(big), nullptr);

  std::vector<int> seen;
  table.for_each_used(0, huge, [&](int fd) { seen.push_back(fd); });
  EXPECT_EQ(seen, (std::vector<int>{3, huge}));
}

TEST(FdTable, ConcurrentWritersOnDistinctFdsAndReaders) {
  static FdTable<int> table;
  constexpr int kThreads = 4, kPerThread = 20000;
  static int values[kThreads];
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) {
      for (int fd = 0; fd < kThreads * kPerThread; fd += 997) {
        int* v = table.lookup(fd);
        if (v != nullptr) {
          ASSERT_TRUE(v >= values && v < values + kThreads);
        }
      }
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([t] {
      int* previous = nullptr;
      for (int i = t; i < kThreads * kPerThread; i += kThreads) table.exchange(i, &values[t], &previous);
    });
  }
  for (auto& w : writers) w.join();
  stop.store(true);
  reader.join();
  for (int i = 0; i < kThreads * kPerThread; ++i) ASSERT_EQ(table.lookup(i), &values[i % kThreads]) << i;
}

}  // namespace
}  // namespace vsock::sock
