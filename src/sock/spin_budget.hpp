// SpinBudget: the busy-poll phase of a wait (DESIGN decision 6), the same
// for every blocking call. The waiter looks (progress() and its predicate),
// then asks next() whether to look again or go to sleep:
//
//   - the spin lasts at most the profile's spin_us, and never past the
//     caller's deadline: a wait whose deadline has come (timeout 0) does not
//     spin at all, and no wait spins without bound;
//   - between two looks the CPU is told we spin (pause), and every few looks
//     the thread offers its CPU to whatever else is runnable there
//     (sched_yield): when both ends of a connection share one CPU the peer
//     cannot answer while we spin, so a spin without a yield costs up to a
//     scheduler time slice per message. Alone on its CPU, sched_yield
//     returns at once.
//   - the clock is read only every few looks (looks are cheaper than
//     clock_gettime on some machines and emulators).
//   - a wait that also watches kernel fds (poll over a mixed set, epoll)
//     asks the kernel only on the first look and every few looks after,
//     with the yield (checkpoint()): a kernel look is a system call, and
//     the upgraded sockets' looks are not. The sleep watches both.
#pragma once
#include <cstdint>

namespace vsock::sock {

class SpinBudget {
 public:
  // deadline_us: absolute core::monotonic_us() time after which the wait
  // gives up, or -1 (none).
  SpinBudget(uint32_t spin_us, int64_t deadline_us);
  // Call after a look that found nothing: true to look again, false when
  // the budget (or the deadline) is spent.
  bool next();
  // True on the first look and on every look that follows a yield: the
  // looks on which a waiter also asks the kernel about its fds.
  bool checkpoint() const;

 private:
  int64_t end_us_;
  uint32_t looks_ = 0;
};

}  // namespace vsock::sock
