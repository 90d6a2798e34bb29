#include "sock/dgram/sleeper_wake.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

#include "sys/real_calls.hpp"

namespace vsock::sock::dgram {

SleeperWake::~SleeperWake() {
  int fd = fd_.load(std::memory_order_acquire);
  if (fd >= 0) sys::real().close(fd);
}

int SleeperWake::prepare() {
  int fd = fd_.load(std::memory_order_acquire);
  if (fd < 0) {
    std::lock_guard<std::mutex> held(make_mu_);
    fd = fd_.load(std::memory_order_relaxed);
    if (fd < 0) {
      fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
      if (fd < 0) return -1;
      fd_.store(fd, std::memory_order_release);
    }
  }
  consume();
  // Ordered before the caller's last look at the queue: a datagram queued
  // after that look finds the request and writes.
  wanted_.store(true, std::memory_order_seq_cst);
  return fd;
}

void SleeperWake::signal() {
  if (!wanted_.load(std::memory_order_seq_cst) || !wanted_.exchange(false, std::memory_order_seq_cst)) return;
  int fd = fd_.load(std::memory_order_acquire);
  if (fd < 0) return;
  uint64_t one = 1;
  (void)!sys::real().write(fd, &one, sizeof one);
  // After the write: a consume() that sees the flag finds the count to read
  // (one that comes before it leaves the fd readable for the next one).
  written_.store(true, std::memory_order_release);
}

void SleeperWake::consume() {
  // Every look calls this: no read-modify-write unless a signal came.
  if (!written_.load(std::memory_order_acquire) || !written_.exchange(false, std::memory_order_acq_rel)) return;
  int fd = fd_.load(std::memory_order_acquire);
  uint64_t count = 0;
  if (fd >= 0) (void)!sys::real().read(fd, &count, sizeof count);
}

}  // namespace vsock::sock::dgram
