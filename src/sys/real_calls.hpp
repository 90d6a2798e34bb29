// The table of real libc calls, found with dlsym(RTLD_NEXT, ...). Library
// code never calls an interposed symbol by name; it calls real().name(...).
// real() is safe to use before the library's constructor has run (another
// library's constructor may open sockets first).
#pragma once
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

namespace vsock::sys {

// X(name, return type, parameter list)
#define VSOCK_REAL_CALLS(X)                                                                              \
  X(socket, int, (int, int, int))                                                                        \
  X(socketpair, int, (int, int, int, int*))                                                              \
  X(bind, int, (int, const sockaddr*, socklen_t))                                                        \
  X(listen, int, (int, int))                                                                             \
  X(accept, int, (int, sockaddr*, socklen_t*))                                                           \
  X(accept4, int, (int, sockaddr*, socklen_t*, int))                                                     \
  X(connect, int, (int, const sockaddr*, socklen_t))                                                     \
  X(send, ssize_t, (int, const void*, size_t, int))                                                      \
  X(sendto, ssize_t, (int, const void*, size_t, int, const sockaddr*, socklen_t))                        \
  X(sendmsg, ssize_t, (int, const msghdr*, int))                                                         \
  X(sendmmsg, int, (int, mmsghdr*, unsigned int, int))                                                   \
  X(recv, ssize_t, (int, void*, size_t, int))                                                            \
  X(recvfrom, ssize_t, (int, void*, size_t, int, sockaddr*, socklen_t*))                                 \
  X(recvmsg, ssize_t, (int, msghdr*, int))                                                               \
  X(recvmmsg, int, (int, mmsghdr*, unsigned int, int, timespec*))                                        \
  X(read, ssize_t, (int, void*, size_t))                                                                 \
  X(write, ssize_t, (int, const void*, size_t))                                                          \
  X(readv, ssize_t, (int, const iovec*, int))                                                            \
  X(writev, ssize_t, (int, const iovec*, int))                                                           \
  X(close, int, (int))                                                                                   \
  X(close_range, int, (unsigned int, unsigned int, int))                                                 \
  X(closefrom, void, (int))                                                                              \
  X(shutdown, int, (int, int))                                                                           \
  X(getsockopt, int, (int, int, int, void*, socklen_t*))                                                 \
  X(setsockopt, int, (int, int, int, const void*, socklen_t))                                            \
  X(getsockname, int, (int, sockaddr*, socklen_t*))                                                      \
  X(getpeername, int, (int, sockaddr*, socklen_t*))                                                      \
  X(fcntl, int, (int, int, ...))                                                                         \
  X(fcntl64, int, (int, int, ...))                                                                       \
  X(ioctl, int, (int, unsigned long, ...))                                                               \
  X(dup, int, (int))                                                                                     \
  X(dup2, int, (int, int))                                                                               \
  X(dup3, int, (int, int, int))                                                                          \
  X(poll, int, (pollfd*, nfds_t, int))                                                                   \
  X(ppoll, int, (pollfd*, nfds_t, const timespec*, const sigset_t*))                                     \
  X(select, int, (int, fd_set*, fd_set*, fd_set*, timeval*))                                             \
  X(pselect, int, (int, fd_set*, fd_set*, fd_set*, const timespec*, const sigset_t*))                    \
  X(epoll_create, int, (int))                                                                            \
  X(epoll_create1, int, (int))                                                                           \
  X(epoll_ctl, int, (int, int, int, epoll_event*))                                                       \
  X(epoll_wait, int, (int, epoll_event*, int, int))                                                      \
  X(epoll_pwait, int, (int, epoll_event*, int, int, const sigset_t*))                                    \
  X(epoll_pwait2, int, (int, epoll_event*, int, const timespec*, const sigset_t*))                       \
  X(sendfile, ssize_t, (int, int, off_t*, size_t))                                                       \
  X(sendfile64, ssize_t, (int, int, off64_t*, size_t))                                                   \
  X(fork, pid_t, (void))                                                                                 \
  X(daemon, int, (int, int))                                                                             \
  X(vfork, pid_t, (void))

struct RealCalls {
#define VSOCK_REAL_FIELD(name, ret, params) ret(*name) params;
  VSOCK_REAL_CALLS(VSOCK_REAL_FIELD)
#undef VSOCK_REAL_FIELD
};

// Resolved on first use, once, thread-safely. A call that no libc provides
// stays null; its entry point then fails with ENOSYS.
const RealCalls& real();

}  // namespace vsock::sys
