// Entry points that close, duplicate and control fds.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdarg>

#include "preload/entry_common.hpp"
#include "sock/wait/wait_engine.hpp"

using namespace vsock;
using vsock::preload::ErrnoKeeper;
using vsock::preload::real;

VSOCK_EXPORT int close(int fd) {
  // Forget first: once the kernel has closed the fd, its number may be
  // handed to a socket another thread is creating.
  if (!sys::in_library()) {
    ErrnoKeeper keep;
    if (sock::SocketRef ref = sock::lookup_socket(fd)) sock::before_close(fd, ref, ref->fds.load() == 1);
    sock::epoll_closing(fd);
    sock::forget_fd(fd);
    sock::epoll_forget(fd);
  }
  return real().close(fd);
}

VSOCK_EXPORT int close_range(unsigned int first, unsigned int last, int flags) {
  // (Unknown flags and first > last fail before anything closes.)
  if (!(flags & CLOSE_RANGE_CLOEXEC) && (flags & ~(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC)) == 0 && first <= last &&
      !sys::in_library()) {
    ErrnoKeeper keep;
    sock::before_close_range(first, last);
  }
  int rc = real().close_range(first, last, flags);
  // CLOSE_RANGE_CLOEXEC only marks the fds; they stay open until exec.
  if (rc == 0 && !(flags & CLOSE_RANGE_CLOEXEC) && !sys::in_library()) {
    ErrnoKeeper keep;
    sock::forget_fd_range(first, last);
    sock::epoll_forget_range(first, last);
  }
  return rc;
}

VSOCK_EXPORT void closefrom(int lowfd) {
  if (lowfd >= 0 && !sys::in_library()) {
    ErrnoKeeper keep;
    sock::before_close_range(static_cast<unsigned int>(lowfd), ~0u);
  }
  real().closefrom(lowfd);
  if (lowfd >= 0 && !sys::in_library()) {
    ErrnoKeeper keep;
    sock::forget_fd_range(static_cast<unsigned int>(lowfd), ~0u);
    sock::epoll_forget_range(static_cast<unsigned int>(lowfd), ~0u);
  }
}

namespace {

int after_dup(int oldfd, int newfd) {
  if (newfd >= 0 && !sys::in_library()) {
    ErrnoKeeper keep;
    // dup2/dup3 closed what newfd was (if it was an epoll fd, its view).
    if (newfd != oldfd) sock::epoll_forget(newfd);
    sock::share_fd(oldfd, newfd);
  }
  return newfd;
}

bool is_dup_command(int cmd) { return cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC; }

// fcntl and fcntl64 differ only in the real call they end in.
// O_NONBLOCK changed (F_SETFL, FIONBIO): the socket's cached copy is stale.
void after_file_flags_set(int fd) {
  if (sys::in_library()) return;
  ErrnoKeeper keep;
  if (sock::SocketRef ref = sock::lookup_socket(fd)) sock::on_file_flags_set(ref.get());
}

int fcntl_through(int (*real_fcntl)(int, int, ...), int fd, int cmd, void* arg) {
  int rc = real_fcntl(fd, cmd, arg);
  if (cmd == F_SETFL && rc == 0) after_file_flags_set(fd);
  return is_dup_command(cmd) ? after_dup(fd, rc) : rc;
}

// dup2/dup3 close what newfd was: as close() does, the library acts first.
void ahead_of_dup_over(int oldfd, int newfd) {
  if (newfd < 0 || oldfd == newfd || sys::in_library()) return;
  ErrnoKeeper keep;
  sock::before_dup_over(oldfd, newfd);
}

}  // namespace

VSOCK_EXPORT int dup(int fd) { return after_dup(fd, real().dup(fd)); }

VSOCK_EXPORT int dup2(int oldfd, int newfd) {
  ahead_of_dup_over(oldfd, newfd);
  return after_dup(oldfd, real().dup2(oldfd, newfd));
}

VSOCK_EXPORT int dup3(int oldfd, int newfd, int flags) {
  ahead_of_dup_over(oldfd, newfd);
  return after_dup(oldfd, real().dup3(oldfd, newfd, flags));
}

// fcntl's third argument is an int or a pointer; like glibc, pass it on as
// a pointer-sized value.
VSOCK_EXPORT int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return fcntl_through(real().fcntl, fd, cmd, arg);
}

VSOCK_EXPORT int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return fcntl_through(real().fcntl64, fd, cmd, arg);
}

VSOCK_EXPORT int ioctl(int fd, unsigned long request, ...) {
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  if (request == FIONREAD && !sys::in_library()) {
    sock::SocketRef ref = sock::lookup_socket(fd);
    if (sock::ManagedSocket* socket = sock::managed_socket(ref)) {
      sys::ReentryGuard guard;
      core::Result<int> bytes = socket->readable_bytes(fd);
      if (!bytes) {
        errno = bytes.error();
        return -1;
      }
      *static_cast<int*>(arg) = bytes.value();
      return 0;
    }
  }
  int rc = real().ioctl(fd, request, arg);
  if (request == FIONBIO && rc == 0) after_file_flags_set(fd);
  return rc;
}
