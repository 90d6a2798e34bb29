// StreamMutex (sock/stream/stream_mutex.hpp): every taking is counted —
// lock(), a successful try_lock(), and the re-taking inside a
// condition_variable_any's wait — and none that failed; exact under
// contention. StreamSocket's quick look relies on "the count moved by one"
// meaning "nobody else took it".
#include <gtest/gtest.h>

#include <condition_variable>
#include <thread>
#include <vector>

#include "sock/stream/stream_mutex.hpp"

namespace vsock::sock {
namespace {

TEST(StreamMutexThreads, CountsEveryTakingAndNoFailedTry) {
  StreamMutex mu;
  { StreamLock held(mu); }
  EXPECT_EQ(mu.takes(), 1u);
  {
    StreamLock held(mu, std::try_to_lock);
    ASSERT_TRUE(held.owns_lock());
    EXPECT_EQ(mu.takes(), 2u);
    std::thread other([&] {
      StreamLock tried(mu, std::try_to_lock);
      EXPECT_FALSE(tried.owns_lock());  // held: not taken, not counted
    });
    other.join();
    EXPECT_EQ(mu.takes(), 2u);
  }
}

TEST(StreamMutexThreads, ConditionWaitRetakingIsCounted) {
  StreamMutex mu;
  std::condition_variable_any changed;
  bool waiting = false;
  bool ready = false;
  std::thread waiter([&] {
    StreamLock held(mu);
    waiting = true;  // set under the lock, which wait() then lets go
    changed.wait(held, [&] { return ready; });
  });
  uint64_t seen = 0;
  for (;;) {  // until the waiter is inside wait(): its lock let go
    StreamLock held(mu);
    if (!waiting) continue;
    seen = mu.takes();
    ready = true;
    break;
  }
  changed.notify_all();
  waiter.join();
  // The waiter took the lock again to return from wait() (more than once
  // only after a spurious wake-up).
  EXPECT_GE(mu.takes(), seen + 1);
}

TEST(StreamMutexThreads, CountIsExactUnderContention) {
  StreamMutex mu;
  constexpr int kThreads = 4;
  constexpr int kTakes = 5000;
  uint64_t guarded = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kTakes; ++i) {
        StreamLock held(mu, std::try_to_lock);
        if (!held.owns_lock()) held.lock();
        ++guarded;
      }
    });
  for (std::thread& t : threads) t.join();
  StreamLock held(mu);
  EXPECT_EQ(guarded, uint64_t{kThreads} * kTakes);
  EXPECT_EQ(mu.takes(), uint64_t{kThreads} * kTakes + 1);
}

}  // namespace
}  // namespace vsock::sock
