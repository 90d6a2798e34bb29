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
//     while the kernel is active, and once quiet only every
//     kQuietAfter-th UD datagram in a row: a kernel datagram waits behind
//     at most kQuietAfter UD ones. A new socket, and one whose last
//     datagram came from the kernel, try the kernel first too (up to
//     kQuietAfter kernel datagrams in a row, then one UD datagram, so a
//     flood through the kernel does not starve UD): a sender's path moves
//     from the kernel to UD once its destination resolves, and its last
//     datagrams through the kernel were sent before its first over UD, so
//     they are taken first, as the kernel alone would have kept them in
//     order (a UD datagram taken first failed udp_truncation in CI);
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
  void took_from_ud() {
    ++ud_in_a_row_;
    kernel_in_a_row_ = 0;
  }
  void took_from_kernel() {
    ud_in_a_row_ = 0;
    ++kernel_in_a_row_;
  }

  bool kernel_active() const { return ud_in_a_row_ < kQuietAfter; }
  // With UD datagrams queued: whether the receive tries the kernel first.
  bool kernel_first() const {
    // The kernel's came last (or nothing yet): it goes on, but UD gets
    // every kQuietAfter-th turn.
    if (ud_in_a_row_ == 0) return kernel_in_a_row_ == 0 || kernel_in_a_row_ % kQuietAfter != 0;
    return kernel_active() || ud_in_a_row_ % kQuietAfter == 0;
  }

 private:
  uint64_t ud_in_a_row_ = 0;
  uint64_t kernel_in_a_row_ = 0;
};

}  // namespace vsock::sock::dgram
