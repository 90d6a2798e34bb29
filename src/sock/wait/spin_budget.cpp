#include "sock/wait/spin_budget.hpp"

#include <sched.h>
#include <sys/resource.h>

#include "core/clock.hpp"

namespace vsock::sock {
namespace {

// Looks between two clock reads (and kernel looks: checkpoint()).
constexpr uint32_t kLooksPerCheck = 16;
// A thread that does not share its CPU probes every this many looks (over
// all its waits: a probe is three system calls).
constexpr uint32_t kLooksPerProbe = 1024;
// A thread that shares its CPU checks every this many yields that it still
// does.
constexpr uint32_t kYieldsPerProbe = 16;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// What this thread's spins have learnt about its CPU.
struct YieldMemory {
  bool known = false;
  bool pinned = false;              // affinity of one CPU
  bool sharing = false;             // another runnable thread ran in our last probe yield
  uint32_t looks_since_probe = 0;   // while not sharing
  uint32_t yields_since_probe = 0;  // while sharing
};

thread_local YieldMemory t_memory;

// Pinned to one CPU: whatever answers us may well be pinned there too.
bool pinned_to_one_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return ::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1;
}

long switches_so_far() {
  rusage usage{};
  if (::getrusage(RUSAGE_THREAD, &usage) != 0) return -1;
  return usage.ru_nvcsw + usage.ru_nivcsw;
}

// Yields, and says whether another thread ran meanwhile (the kernel
// counted a context switch of ours).
bool yield_ran_another() {
  const long before = switches_so_far();
  ::sched_yield();
  const long after = switches_so_far();
  return before >= 0 && after > before;
}

YieldMemory& memory() {
  YieldMemory& m = t_memory;
  if (!m.known) {
    m.known = true;
    m.pinned = pinned_to_one_cpu();
    m.sharing = m.pinned;
  }
  return m;
}

}  // namespace

SpinBudget::SpinBudget(uint32_t spin_us, int64_t deadline_us, SpinHistory* history)
    : start_us_(core::monotonic_us()), history_(history) {
  // A thread that shares its CPU with the one that answers it (pinned to
  // one CPU, or found sharing) yields at every look, and the yield is what
  // lets the answer come: its spin often runs out on the clock with the
  // answer already there (the peer ran during the last yield), so its
  // misses say nothing, and skipping its spins would only trade yields for
  // sleeps and wake-ups (measured: both ends on one vCPU, epoll, p50 171
  // -> 233 µs). It keeps the whole budget.
  if (history_ != nullptr && (memory().pinned || memory().sharing)) history_ = nullptr;
  if (history_ != nullptr && spin_us > 0) spin_us = history_->budget_us(spin_us);
  end_us_ = start_us_ + int64_t{spin_us};
  if (deadline_us >= 0 && deadline_us < end_us_) {
    end_us_ = deadline_us;
    history_ = nullptr;  // the deadline, not the wait, would end this spin
  }
  // Spent already (spin_us 0, or timeout 0): the first next() says so.
  if (end_us_ <= start_us_) {
    end_us_ = INT64_MIN;
    history_ = nullptr;
  }
}

SpinBudget::~SpinBudget() {
  if (history_ == nullptr) return;
  if (ran_out_)
    history_->note_miss();
  else if (looks_ > 0)
    history_->note_hit(core::monotonic_us() - start_us_);
}

bool SpinBudget::next() {
  if (end_us_ == INT64_MIN) return false;
  ++looks_;
  if (looks_ % kLooksPerCheck == 0 && core::monotonic_us() >= end_us_) {
    ran_out_ = true;
    end_us_ = INT64_MIN;  // later calls say no at once
    return false;
  }
  YieldMemory& m = memory();
  if (m.sharing) {
    // What would answer us may be waiting for this CPU: give it up at
    // every look, and now and then make sure someone still takes it.
    if (++m.yields_since_probe < kYieldsPerProbe) {
      ::sched_yield();
    } else {
      m.yields_since_probe = 0;
      m.sharing = yield_ran_another();
    }
  } else if (++m.looks_since_probe >= kLooksPerProbe) {
    m.looks_since_probe = 0;
    m.sharing = yield_ran_another();
  } else {
    cpu_relax();
  }
  return true;
}

bool SpinBudget::checkpoint() const { return looks_ % kLooksPerCheck == 0; }

bool SpinBudget::yields_every_look() { return memory().sharing; }

}  // namespace vsock::sock
