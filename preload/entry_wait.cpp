// Entry points that wait for readiness: poll, select and epoll families,
// with glibc's fortified poll variants.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "preload/entry_common.hpp"
#include "sock/wait/wait_engine.hpp"

using namespace vsock;
using vsock::preload::real;

namespace {

timespec from_ms(int ms) { return timespec{ms / 1000, static_cast<long>(ms % 1000) * 1000000}; }

int64_t monotonic_us() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1000000 + now.tv_nsec / 1000;
}

}  // namespace

extern "C" void __chk_fail(void) __attribute__((noreturn));

VSOCK_EXPORT int poll(pollfd* fds, nfds_t count, int timeout) {
  if (sys::in_library()) return real().poll(fds, count, timeout);
  timespec limit = from_ms(timeout);
  return sock::wait_poll(fds, count, timeout < 0 ? nullptr : &limit, nullptr);
}

VSOCK_EXPORT int ppoll(pollfd* fds, nfds_t count, const timespec* timeout, const sigset_t* mask) {
  if (sys::in_library()) return real().ppoll(fds, count, timeout, mask);
  return sock::wait_poll(fds, count, timeout, mask);
}

VSOCK_EXPORT int __poll_chk(pollfd* fds, nfds_t count, int timeout, size_t fds_len) {
  if (fds_len / sizeof(*fds) < count) __chk_fail();
  return poll(fds, count, timeout);
}

VSOCK_EXPORT int __ppoll_chk(pollfd* fds, nfds_t count, const timespec* timeout, const sigset_t* mask,
                             size_t fds_len) {
  if (fds_len / sizeof(*fds) < count) __chk_fail();
  return ppoll(fds, count, timeout, mask);
}

VSOCK_EXPORT int select(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout) {
  if (sys::in_library() || !sock::select_has_managed(nfds, readfds, writefds, exceptfds))
    return real().select(nfds, readfds, writefds, exceptfds, timeout);
  timespec limit{};
  if (timeout != nullptr) limit = timespec{timeout->tv_sec, timeout->tv_usec * 1000};
  const int64_t start_us = monotonic_us();
  int rc = sock::wait_select(nfds, readfds, writefds, exceptfds, timeout != nullptr ? &limit : nullptr, nullptr);
  if (timeout != nullptr) {
    // Linux's select leaves the time not slept in *timeout.
    preload::ErrnoKeeper keep;
    int64_t left_us = timeout->tv_sec * 1000000 + timeout->tv_usec - (monotonic_us() - start_us);
    if (left_us < 0) left_us = 0;
    *timeout = timeval{left_us / 1000000, static_cast<suseconds_t>(left_us % 1000000)};
  }
  return rc;
}

VSOCK_EXPORT int pselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, const timespec* timeout,
                         const sigset_t* mask) {
  if (sys::in_library() || !sock::select_has_managed(nfds, readfds, writefds, exceptfds))
    return real().pselect(nfds, readfds, writefds, exceptfds, timeout, mask);
  return sock::wait_select(nfds, readfds, writefds, exceptfds, timeout, mask);
}

VSOCK_EXPORT int epoll_create(int size) {
  int fd = real().epoll_create(size);
  if (fd >= 0 && !sys::in_library()) sock::epoll_created(fd);
  return fd;
}

VSOCK_EXPORT int epoll_create1(int flags) {
  int fd = real().epoll_create1(flags);
  if (fd >= 0 && !sys::in_library()) sock::epoll_created(fd);
  return fd;
}

VSOCK_EXPORT int epoll_ctl(int epfd, int op, int fd, epoll_event* event) {
  if (sys::in_library()) return real().epoll_ctl(epfd, op, fd, event);
  return sock::epoll_control(epfd, op, fd, event);
}

VSOCK_EXPORT int epoll_wait(int epfd, epoll_event* events, int max, int timeout) {
  if (sys::in_library() || !sock::epoll_has_view(epfd)) return real().epoll_wait(epfd, events, max, timeout);
  timespec limit = from_ms(timeout);
  return sock::epoll_wait_all(epfd, events, max, timeout < 0 ? nullptr : &limit, nullptr);
}

VSOCK_EXPORT int epoll_pwait(int epfd, epoll_event* events, int max, int timeout, const sigset_t* mask) {
  if (sys::in_library() || !sock::epoll_has_view(epfd)) return real().epoll_pwait(epfd, events, max, timeout, mask);
  timespec limit = from_ms(timeout);
  return sock::epoll_wait_all(epfd, events, max, timeout < 0 ? nullptr : &limit, mask);
}

VSOCK_EXPORT int epoll_pwait2(int epfd, epoll_event* events, int max, const timespec* timeout,
                              const sigset_t* mask) {
  if (sys::in_library() || !sock::epoll_has_view(epfd)) return real().epoll_pwait2(epfd, events, max, timeout, mask);
  return sock::epoll_wait_all(epfd, events, max, timeout, mask);
}
