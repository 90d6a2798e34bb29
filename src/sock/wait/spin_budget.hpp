// SpinBudget: the busy-poll phase of a wait (DESIGN decision 6), the same
// for every blocking call. The waiter looks (progress() and its predicate),
// then asks next() whether to look again or go to sleep:
//
//   - the spin lasts at most the profile's spin_us, and never past the
//     caller's deadline: a wait whose deadline has come (timeout 0) does not
//     spin at all, and no wait spins without bound;
//   - between two looks the CPU is told we spin (pause); but when both ends
//     of a connection share one CPU the peer cannot answer while we spin,
//     so a spin that keeps the CPU costs up to its whole budget per
//     message. The spin learns, per thread, whether it shares its CPU: it
//     now and then yields (sched_yield) and asks the kernel whether
//     another thread ran meanwhile (getrusage: a context switch of ours).
//     If one did, it yields at every look, checking every few yields that
//     someone still takes the CPU; if not, it yields only at those rare
//     probes (a yield is a system call; alone on its CPU it returns at
//     once and buys nothing). A thread pinned to one CPU starts out
//     assuming it shares it.
//   - the clock is read only every few looks (looks are cheaper than
//     clock_gettime on some machines and emulators).
//   - with a SpinHistory (the thread's, when the spin_adapt setting is
//     on), the budget is the one the history gives for spin_us, and the
//     spin tells it how it ended: a hit (what the wait waited for came
//     after at least one look: the SpinBudget is destroyed before next()
//     said no) or a miss (next() said no because the budget ran out). A
//     wait satisfied at its first look, or whose deadline cut the spin,
//     teaches nothing, and neither does a thread pinned to one CPU or
//     yielding at every look (sharing its CPU): it keeps the whole budget.
//   - a wait that also watches kernel fds (poll over a mixed set, epoll)
//     asks the kernel only on the first look and every few looks after
//     (checkpoint()): a kernel look is a system call, and the upgraded
//     sockets' looks are not. The sleep watches both.
#pragma once
#include <cstdint>

#include "sock/wait/spin_history.hpp"

namespace vsock::sock {

class SpinBudget {
 public:
  // deadline_us: absolute core::monotonic_us() time after which the wait
  // gives up, or -1 (none).
  SpinBudget(uint32_t spin_us, int64_t deadline_us, SpinHistory* history = nullptr);
  ~SpinBudget();
  SpinBudget(const SpinBudget&) = delete;
  SpinBudget& operator=(const SpinBudget&) = delete;
  // Call after a look that found nothing: true to look again, false when
  // the budget (or the deadline) is spent.
  bool next();
  // True on the first look and on every few looks after (with the clock
  // read): the looks on which a waiter also asks the kernel about its fds.
  bool checkpoint() const;
  // Whether this thread's spins yield at every look (they found that it
  // shares its CPU with a thread that is waiting to run).
  static bool yields_every_look();

 private:
  int64_t start_us_;
  int64_t end_us_;
  uint32_t looks_ = 0;
  SpinHistory* history_;  // nullptr: learns nothing
  bool ran_out_ = false;  // next() said no because the budget was spent
};

}  // namespace vsock::sock
