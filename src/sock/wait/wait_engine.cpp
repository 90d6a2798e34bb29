#include "sock/wait/wait_engine.hpp"

#include <errno.h>

#include <vector>

#include "core/clock.hpp"
#include "core/config.hpp"
#include "sock/wait/epoll_view.hpp"
#include "sock/registry.hpp"
#include "sock/wait/select_bits.hpp"
#include "sock/wait/spin_budget.hpp"
#include "sock/wait/thread_scratch.hpp"
#include "sock/socket_route.hpp"
#include "sock/wait/wait_sleep.hpp"
#include "sys/real_calls.hpp"
#include "sys/reentry_guard.hpp"

namespace vsock::sock {
namespace {

// Sets of at most this many entries, all of them upgraded sockets, are
// not handed to the kernel just to check nfds against RLIMIT_NOFILE.
constexpr nfds_t kUncheckedSetSize = 64;

struct Managed {
  size_t index;
  SocketRef ref;
  ManagedSocket* socket;
};

// The vectors of one wait_poll call (ThreadScratch: kept per thread).
struct PollVectors {
  std::vector<Managed> managed;
  std::vector<std::shared_ptr<EpollView>> views;
  std::vector<pollfd> kernel;
  void clear() {
    managed.clear();
    views.clear();
    kernel.clear();
  }
};

}  // namespace

int wait_poll(pollfd* fds, nfds_t count, const timespec* timeout, const sigset_t* mask) {
  ThreadScratch<PollVectors> scratch;
  std::vector<Managed>& managed = (*scratch).managed;
  // Epoll fds in the set whose readiness the library keeps (their
  // eventfds): looked at before each kernel look, and slept on.
  std::vector<std::shared_ptr<EpollView>>& views = (*scratch).views;
  for (nfds_t i = 0; i < count; ++i) {
    if (fds[i].fd < 0) continue;
    SocketRef ref = lookup_socket(fds[i].fd);
    if (ManagedSocket* socket = managed_socket(ref)) {
      managed.push_back(Managed{i, std::move(ref), socket});
    } else if (!ref) {
      if (std::shared_ptr<EpollView> view = view_in_use(fds[i].fd)) views.push_back(std::move(view));
    }
  }
  if (managed.empty() && views.empty()) return sys::real().ppoll(fds, count, timeout, mask);

  if (!valid_timeout(timeout)) {
    errno = EINVAL;
    return -1;
  }
  sys::ReentryGuard guard;
  const int64_t deadline = wait_deadline(timeout);
  // The profile's spin (bounded, yields the CPU now and then), then sleeps.
  SpinBudget spin(core::config().settings.spin_us, deadline < 0 ? -1 : deadline * 1000,
                  SpinHistory::of_this_thread());
  bool spinning = true;
  // The kernel's part of the set: upgraded sockets' entries are -1, which
  // ppoll skips (what wakes them comes from add_socket()).
  std::vector<pollfd>& kernel = (*scratch).kernel;
  kernel.assign(fds, fds + count);
  for (const Managed& m : managed) kernel[m.index].fd = -1;
  // Whether ppoll is called at all: for the fds left to the kernel; else
  // only for the sigmask, and on the first look of a set big enough that
  // it may exceed RLIMIT_NOFILE (the kernel's EINVAL; a smaller set is not
  // checked, see docs/compatibility.md).
  bool kernel_fds = count > kUncheckedSetSize;
  for (const pollfd& p : kernel) kernel_fds |= p.fd >= 0;
  SleepSet sleep_set;
  for (;;) {
    // A socket closed (or its number reused) by another thread meanwhile:
    // the kernel answers for the number now (POLLNVAL if closed).
    for (auto it = managed.begin(); it != managed.end();) {
      if (lookup_socket(fds[it->index].fd).get() == it->ref.get()) {
        ++it;
        continue;
      }
      kernel[it->index].fd = fds[it->index].fd;
      kernel_fds = true;
      it = managed.erase(it);
    }
    // The managed sockets, from the library; then the kernel's fds without
    // waiting — under the caller's sigmask when nothing is ready yet, so a
    // signal it unblocks ends even a zero-timeout call with EINTR, as the
    // kernel's ppoll. The kernel is asked on the first look and then every
    // few looks of the spin (a system call each time; the sleep watches
    // its fds too), and always on the last look before the call returns
    // (a full look: no socket leaves a path out).
    const Look look = !spinning || wait_expired(deadline) ? Look::kFull
                      : spin.checkpoint()                 ? Look::kCheckpoint
                                                          : Look::kSpin;
    int ready = 0;
    for (nfds_t i = 0; i < count; ++i) kernel[i].revents = 0;
    for (const Managed& m : managed) {
      fds[m.index].revents = m.socket->poll_events(fds[m.index].fd, fds[m.index].events, look);
      ready += fds[m.index].revents != 0;
    }
    for (const std::shared_ptr<EpollView>& view : views) observe_view(*view, nullptr);
    int rc = 0;
    if (look != Look::kSpin && (kernel_fds || (ready == 0 && mask != nullptr))) {
      const timespec now{0, 0};
      rc = sys::real().ppoll(kernel.data(), count, &now, ready > 0 ? nullptr : mask);
      if (rc < 0) return -1;
    }
    for (nfds_t i = 0; i < count; ++i) {
      if (kernel[i].fd < 0 && fds[i].fd >= 0) continue;  // a managed socket's
      fds[i].revents = kernel[i].revents;
      ready += fds[i].revents != 0;
    }
    if (ready > 0) return ready;
    if (wait_expired(deadline)) {
      if (look == Look::kFull) return 0;
      spinning = false;  // one full look before giving up
      continue;
    }
    if (spinning && (spinning = spin.next())) continue;

    // Sleep on everything that can change the answer.
    sleep_set.clear();
    for (const pollfd& p : kernel) sleep_set.add(p);
    for (const std::shared_ptr<EpollView>& view : views) observe_view(*view, &sleep_set);
    for (const Managed& m : managed) sleep_set.add_socket(m.socket, fds[m.index].fd, fds[m.index].events);
    rc = sleep_set.sleep(deadline, mask);
    if (rc < 0 && errno == EINTR) return -1;
  }
}

bool select_has_managed(int nfds, const fd_set* readfds, const fd_set* writefds, const fd_set* exceptfds) {
  if (nfds < 0) return false;  // the kernel's error
  const int limit = select_fd_limit(nfds);
  for (int fd = 0; fd < limit; ++fd) {
    bool listed = (readfds != nullptr && fd_bit(readfds, fd)) || (writefds != nullptr && fd_bit(writefds, fd)) ||
                  (exceptfds != nullptr && fd_bit(exceptfds, fd));
    if (!listed) continue;
    SocketRef ref = lookup_socket(fd);
    if (managed_socket(ref) != nullptr || (!ref && view_in_use(fd))) return true;
  }
  return false;
}

int wait_select(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, const timespec* timeout,
                const sigset_t* mask) {
  std::vector<pollfd> fds;
  const int limit = select_fd_limit(nfds);
  for (int fd = 0; fd < limit; ++fd) {
    short events = 0;
    if (readfds != nullptr && fd_bit(readfds, fd)) events |= POLLIN;
    if (writefds != nullptr && fd_bit(writefds, fd)) events |= POLLOUT;
    if (exceptfds != nullptr && fd_bit(exceptfds, fd)) events |= POLLPRI;
    if (events == 0) continue;
    fds.push_back(pollfd{fd, events, 0});
  }
  int rc = wait_poll(fds.data(), fds.size(), timeout, mask);
  if (rc < 0) return -1;
  for (const pollfd& p : fds) {
    if (p.revents & POLLNVAL) {
      errno = EBADF;
      return -1;
    }
  }
  // As the kernel's select: readable includes end of file and errors.
  int bits = 0;
  for (const pollfd& p : fds) {
    bool r = (p.events & POLLIN) && (p.revents & (POLLIN | POLLHUP | POLLERR));
    bool w = (p.events & POLLOUT) && (p.revents & (POLLOUT | POLLERR));
    bool x = (p.events & POLLPRI) && (p.revents & POLLPRI);
    if (readfds != nullptr && (p.events & POLLIN)) put_fd_bit(readfds, p.fd, r);
    if (writefds != nullptr && (p.events & POLLOUT)) put_fd_bit(writefds, p.fd, w);
    if (exceptfds != nullptr && (p.events & POLLPRI)) put_fd_bit(exceptfds, p.fd, x);
    bits += r + w + x;
  }
  return bits;
}

}  // namespace vsock::sock
