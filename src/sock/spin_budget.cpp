#include "sock/spin_budget.hpp"

#include <sched.h>

#include "core/clock.hpp"

namespace vsock::sock {
namespace {

// Looks between two clock reads and between two yields.
constexpr uint32_t kLooksPerCheck = 16;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

SpinBudget::SpinBudget(uint32_t spin_us, int64_t deadline_us) {
  const int64_t now = core::monotonic_us();
  end_us_ = now + int64_t{spin_us};
  if (deadline_us >= 0 && deadline_us < end_us_) end_us_ = deadline_us;
  // Spent already (spin_us 0, or timeout 0): the first next() says so.
  if (end_us_ <= now) end_us_ = INT64_MIN;
}

bool SpinBudget::next() {
  if (end_us_ == INT64_MIN) return false;
  if (++looks_ % kLooksPerCheck != 0) {
    cpu_relax();
    return true;
  }
  if (core::monotonic_us() >= end_us_) return false;
  ::sched_yield();
  return true;
}

bool SpinBudget::checkpoint() const { return looks_ % kLooksPerCheck == 0; }

}  // namespace vsock::sock
