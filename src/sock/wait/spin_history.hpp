// SpinHistory: what a thread's waits have learnt about how long the thing
// they wait for takes to come, so that their spins (SpinBudget) fit it
// instead of always running the profile's whole spin_us (issue 12 item 4):
//
//   - a spin that ends with what it waited for is a hit after T µs; the
//     typical T (a running average) bounds the next spins to
//     kSpanFactor x T (never below kFloorUs, never above spin_us): a reply
//     that usually takes 40 µs is not waited for 2 ms in a spin when it is
//     late, the wait sleeps sooner and leaves the CPU;
//   - a spin that runs out is a miss. After kMissesToSkip misses in a row
//     (replies, or credits, that always come later than the spin: the
//     throughput profile's 10 µs against a 40 µs round trip) the waits
//     sleep at once, and every kProbeEvery-th wait spins the whole spin_us
//     again to find out whether things got faster (its hit ends the skip).
//
// Per thread: the waits of one thread are usually for one kind of thing
// (a connection's replies, an event loop's next request). Pure logic, no
// clock, so that it can be tested exactly (tests/unit/spin_history_test.cpp).
#pragma once
#include <cstdint>

namespace vsock::sock {

class SpinHistory {
 public:
  static constexpr uint32_t kSpanFactor = 8;
  static constexpr uint32_t kFloorUs = 10;
  static constexpr uint32_t kMissesToSkip = 8;
  static constexpr uint32_t kProbeEvery = 16;

  // The spin budget for this thread's next wait, given the profile's.
  uint32_t budget_us(uint32_t spin_us);
  // The wait's spin found what it waited for after `us` µs of spinning.
  void note_hit(int64_t us);
  // The wait's spin ran its budget out (the wait went to sleep).
  void note_miss();

  uint32_t typical_us() const { return typical_us_; }  // 0: no hit yet
  bool skipping() const { return misses_in_row_ >= kMissesToSkip; }

  // The calling thread's history; nullptr when the `spin_adapt` setting is
  // off (every spin then runs the profile's spin_us).
  static SpinHistory* of_this_thread();

 private:
  uint32_t typical_us_ = 0;
  uint32_t misses_in_row_ = 0;
  uint32_t skipped_ = 0;  // waits that did not spin since the last probe
};

}  // namespace vsock::sock
