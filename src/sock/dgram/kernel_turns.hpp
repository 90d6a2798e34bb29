// KernelTurns: when a datagram socket on UD also asks its kernel socket.
//
// A socket on UD has two queues: the UD one (looked at without a system
// call) and the kernel socket's (a system call per look), which carries
// what peers without libvsock send, and a new peer's first datagrams while
// its path is resolved. UDP keeps no order between datagrams, so the
// kernel need not be asked on every call; it must never be starved, and a
// peer that talks through the kernel must not wait a whole spin per
// datagram. The rule, per socket:
//
//   - the kernel is "active" while it delivered one of the last
//     kQuietAfter datagrams taken (a new socket starts active);
//   - a receive that finds UD datagrams queued tries the kernel first
//     right after a UD datagram while the kernel is active (the two take
//     turns, as before this rule), and once quiet only every
//     kQuietAfter-th UD datagram in a row: a kernel datagram waits behind
//     at most kQuietAfter UD ones;
//   - a wait's spin asks the kernel at the engine's checkpoints only while
//     it is active; a quiet kernel is asked by the spin's last look and
//     watched by the sleep, so its first datagram after a quiet spell
//     waits at most one spin (the profile's spin_us).
//
// Not thread-safe: the socket's mutex guards it.
#pragma once
#include <cstdint>

namespace vsock::sock::dgram {

class KernelTurns {
 public:
  static constexpr uint64_t kQuietAfter = 16;

  // A datagram was taken (not peeked) from UD / from the kernel.
  void took_from_ud() { ++ud_in_a_row_; }
  void took_from_kernel() { ud_in_a_row_ = 0; }

  bool kernel_active() const { return ud_in_a_row_ < kQuietAfter; }
  // With UD datagrams queued: whether the receive tries the kernel first.
  bool kernel_first() const {
    if (ud_in_a_row_ == 0) return false;  // the kernel's came last: UD's turn
    return kernel_active() || ud_in_a_row_ % kQuietAfter == 0;
  }

 private:
  uint64_t ud_in_a_row_ = 0;
};

}  // namespace vsock::sock::dgram
