// The fd sets of select/pselect as the kernel reads them: nfds bits of
// each set (also beyond FD_SETSIZE: a program may pass a larger bitmap),
// but never past the process's fd table, which the kernel clamps nfds to.
// Plain bit arithmetic: glibc's fortified FD_ISSET aborts past FD_SETSIZE.
#pragma once
#include <sys/select.h>

namespace vsock::sock {

// How many fds of a select() with `nfds` the kernel looks at (nfds >= 0).
int select_fd_limit(int nfds);

bool fd_bit(const fd_set* set, int fd);
void put_fd_bit(fd_set* set, int fd, bool on);

}  // namespace vsock::sock
