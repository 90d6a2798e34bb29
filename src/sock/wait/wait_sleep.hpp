// The sleep of the wait engine (wait_engine.hpp): poll() and epoll_wait()
// over upgraded sockets both sleep in the real ppoll on a set of fds — the
// caller's kernel fds plus what each upgraded socket says may wake it —
// for at most the shortest slice any socket asks for, at most until the
// caller's deadline.
#pragma once
#include <poll.h>
#include <signal.h>
#include <time.h>

#include <cstdint>
#include <vector>

#include "sock/managed_socket.hpp"

namespace vsock::sock {

// Whether a timeout is one the kernel accepts (null, or a non-negative
// second count and nanoseconds below one second); else EINVAL.
bool valid_timeout(const timespec* timeout);
// -1: no timeout (forever); else the absolute deadline in monotonic ms.
int64_t wait_deadline(const timespec* timeout);
// Whether a deadline from wait_deadline() has passed.
bool wait_expired(int64_t deadline);

class SleepSet {
 public:
  void clear() {
    fds_.clear();
    slice_ms_ = -1;
  }
  void add(const pollfd& fd) { fds_.push_back(fd); }
  // Sleeps at most `slice_ms` (-1: no limit asked).
  void limit_slice(int slice_ms) {
    if (slice_ms >= 0 && (slice_ms_ < 0 || slice_ms < slice_ms_)) slice_ms_ = slice_ms;
  }
  // What may change `socket`'s readiness for `events` (arms what it must).
  void add_socket(ManagedSocket* socket, int fd, short events);
  // The real ppoll with the caller's sigmask. -1 and errno as ppoll's.
  int sleep(int64_t deadline, const sigset_t* mask);

 private:
  std::vector<pollfd> fds_;
  int slice_ms_ = -1;  // -1: no socket asked for a slice
};

}  // namespace vsock::sock
