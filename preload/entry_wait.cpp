// Entry points that wait for readiness: poll, select and epoll families,
// with glibc's fortified poll variants.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "preload/entry_common.hpp"

using vsock::preload::real;

extern "C" void __chk_fail(void) __attribute__((noreturn));

VSOCK_EXPORT int poll(pollfd* fds, nfds_t count, int timeout) { return real().poll(fds, count, timeout); }

VSOCK_EXPORT int ppoll(pollfd* fds, nfds_t count, const timespec* timeout, const sigset_t* mask) {
  return real().ppoll(fds, count, timeout, mask);
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
  return real().select(nfds, readfds, writefds, exceptfds, timeout);
}

VSOCK_EXPORT int pselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, const timespec* timeout,
                         const sigset_t* mask) {
  return real().pselect(nfds, readfds, writefds, exceptfds, timeout, mask);
}

VSOCK_EXPORT int epoll_create(int size) { return real().epoll_create(size); }

VSOCK_EXPORT int epoll_create1(int flags) { return real().epoll_create1(flags); }

VSOCK_EXPORT int epoll_ctl(int epfd, int op, int fd, epoll_event* event) {
  return real().epoll_ctl(epfd, op, fd, event);
}

VSOCK_EXPORT int epoll_wait(int epfd, epoll_event* events, int max, int timeout) {
  return real().epoll_wait(epfd, events, max, timeout);
}

VSOCK_EXPORT int epoll_pwait(int epfd, epoll_event* events, int max, int timeout, const sigset_t* mask) {
  return real().epoll_pwait(epfd, events, max, timeout, mask);
}

VSOCK_EXPORT int epoll_pwait2(int epfd, epoll_event* events, int max, const timespec* timeout,
                              const sigset_t* mask) {
  return real().epoll_pwait2(epfd, events, max, timeout, mask);
}
