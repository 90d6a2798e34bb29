// Entry points that move data: send/recv families, read/write families,
// sendfile, and glibc's fortified (_FORTIFY_SOURCE) variants.
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "preload/entry_common.hpp"

using vsock::preload::real;

extern "C" void __chk_fail(void) __attribute__((noreturn));

VSOCK_EXPORT ssize_t send(int fd, const void* buf, size_t len, int flags) { return real().send(fd, buf, len, flags); }

VSOCK_EXPORT ssize_t sendto(int fd, const void* buf, size_t len, int flags, const sockaddr* addr, socklen_t alen) {
  return real().sendto(fd, buf, len, flags, addr, alen);
}

VSOCK_EXPORT ssize_t sendmsg(int fd, const msghdr* msg, int flags) { return real().sendmsg(fd, msg, flags); }

VSOCK_EXPORT int sendmmsg(int fd, mmsghdr* msgs, unsigned int count, int flags) {
  return real().sendmmsg(fd, msgs, count, flags);
}

VSOCK_EXPORT ssize_t recv(int fd, void* buf, size_t len, int flags) { return real().recv(fd, buf, len, flags); }

VSOCK_EXPORT ssize_t recvfrom(int fd, void* buf, size_t len, int flags, sockaddr* addr, socklen_t* alen) {
  return real().recvfrom(fd, buf, len, flags, addr, alen);
}

VSOCK_EXPORT ssize_t recvmsg(int fd, msghdr* msg, int flags) { return real().recvmsg(fd, msg, flags); }

VSOCK_EXPORT int recvmmsg(int fd, mmsghdr* msgs, unsigned int count, int flags, timespec* timeout) {
  return real().recvmmsg(fd, msgs, count, flags, timeout);
}

VSOCK_EXPORT ssize_t read(int fd, void* buf, size_t len) { return real().read(fd, buf, len); }

VSOCK_EXPORT ssize_t write(int fd, const void* buf, size_t len) { return real().write(fd, buf, len); }

VSOCK_EXPORT ssize_t readv(int fd, const iovec* iov, int count) { return real().readv(fd, iov, count); }

VSOCK_EXPORT ssize_t writev(int fd, const iovec* iov, int count) { return real().writev(fd, iov, count); }

VSOCK_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t* offset, size_t count) {
  return real().sendfile(out_fd, in_fd, offset, count);
}

VSOCK_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t* offset, size_t count) {
  return real().sendfile64(out_fd, in_fd, offset, count);
}

// The fortified variants check the caller's buffer size exactly as glibc
// does, then take the same path as the plain call.
VSOCK_EXPORT ssize_t __read_chk(int fd, void* buf, size_t len, size_t buflen) {
  if (len > buflen) __chk_fail();
  return read(fd, buf, len);
}

VSOCK_EXPORT ssize_t __recv_chk(int fd, void* buf, size_t len, size_t buflen, int flags) {
  if (len > buflen) __chk_fail();
  return recv(fd, buf, len, flags);
}

VSOCK_EXPORT ssize_t __recvfrom_chk(int fd, void* buf, size_t len, size_t buflen, int flags, sockaddr* addr,
                                    socklen_t* alen) {
  if (len > buflen) __chk_fail();
  return recvfrom(fd, buf, len, flags, addr, alen);
}
