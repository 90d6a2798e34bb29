// The kernel's epoll wait with a timespec timeout, on any kernel and libc
// the library may run on.
#pragma once

#include <signal.h>
#include <sys/epoll.h>
#include <time.h>

namespace vsock::sock {

// epoll_pwait2 where the kernel (5.11+) and the C library (glibc 2.35+)
// have it; else epoll_pwait with the timeout rounded up to whole
// milliseconds, so that a wait never ends early (null: no limit). Answers
// and errno as the kernel's. The application's epoll_wait goes through
// here whenever its set holds a socket the library serves: a kernel
// without epoll_pwait2 (ENOSYS) or a libc without its wrapper must not
// turn every such wait into an error.
int kernel_epoll_wait(int epfd, epoll_event* events, int max, const timespec* timeout, const sigset_t* mask);

// The milliseconds epoll_pwait waits for `timeout`: rounded up, at most
// INT32_MAX; -1 for none.
int epoll_timeout_ms(const timespec* timeout);

}  // namespace vsock::sock
