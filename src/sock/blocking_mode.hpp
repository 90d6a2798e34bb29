// BlockingMode: what decides whether a call on an upgraded socket may block,
// and for how long — the open file description's O_NONBLOCK and the
// socket's SO_RCVTIMEO / SO_SNDTIMEO — cached, so that a blocking call that
// has to wait asks the kernel nothing (DESIGN decision 4: no system call on
// the fast path but the doorbell).
//
// The library sees every call that changes them (fcntl F_SETFL, ioctl
// FIONBIO, setsockopt): the entry points bump an epoch, and a reader whose
// copy is of an older epoch asks the kernel again, once. The first copy
// comes from what the library saw when the socket was made (socket() and
// accept4() flags, timeouts 0 or the listener's: SocketState::known_mode)
// when it saw that, else from the kernel.
// Bumping is one atomic add, lock-free, so it is safe from a signal handler
// that interrupted a call holding the socket's lock. What it cannot see (a
// raw syscall(), another process sharing the file description) is listed in
// docs/compatibility.md.
//
// Threads: the setters' side from any thread; the readers' side under the
// owning StreamSocket's lock.
#pragma once
#include <atomic>
#include <cstdint>

namespace vsock::sock {

class BlockingMode {
 public:
  // --- the entry points, after the kernel accepted the change ---
  void file_flags_changed() { flags_epoch_.fetch_add(1, std::memory_order_seq_cst); }
  void timeouts_changed() { timeouts_epoch_.fetch_add(1, std::memory_order_seq_cst); }

  // --- once, when the socket attaches (after it is on its SocketState,
  // so that a change from now on bumps an epoch): the SocketState's
  // known_mode bits stand in for asking the kernel ---
  void assume(const std::atomic<uint8_t>& known_mode);

  // --- readers, under the socket's lock ---
  // O_NONBLOCK on `fd`'s open file description.
  bool nonblocking(int fd);
  // The absolute deadline (core::monotonic_ms) that SO_RCVTIMEO (receive)
  // or SO_SNDTIMEO gives a blocking call starting now, or -1 (none).
  int64_t deadline_ms(int fd, bool receive);

 private:
  std::atomic<uint32_t> flags_epoch_{0};
  std::atomic<uint32_t> timeouts_epoch_{0};
  uint32_t flags_seen_ = 0;
  uint32_t timeouts_seen_ = 0;
  bool flags_known_ = false;
  bool timeouts_known_ = false;
  bool nonblocking_ = false;
  int64_t receive_timeout_ms_ = 0;  // 0: none
  int64_t send_timeout_ms_ = 0;
};

}  // namespace vsock::sock
