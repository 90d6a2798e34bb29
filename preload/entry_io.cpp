// Entry points that move data: send/recv families, read/write families,
// sendfile, and glibc's fortified (_FORTIFY_SOURCE) variants.
#include <fcntl.h>
#include <limits.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include "core/stats.hpp"
#include "preload/entry_common.hpp"
#include "sock/socket_route.hpp"
#include "sock/stream/stream_handoff.hpp"

using namespace vsock;
using vsock::preload::real;

extern "C" void __chk_fail(void) __attribute__((noreturn));

namespace {

// A call on an fd: the socket that serves it if the library must, else the
// kernel's answer, counted if the fd is a tracked TCP socket.
class Route {
 public:
  explicit Route(int fd) {
    if (sys::in_library()) return;
    ref_ = sock::lookup_socket(fd);
    socket_ = sock::managed_socket(ref_);
  }
  sock::ManagedSocket* socket() const { return socket_; }
  // A stream, which reads and writes of nothing do not touch (a datagram
  // socket's read of nothing takes a datagram, as the kernel's).
  bool is_stream() const { return ref_ && ref_->type == SOCK_STREAM; }
  // The stream for what only a stream does (sendfile), or null.
  sock::StreamSocket* stream() const { return socket_ != nullptr && is_stream() ? sock::managed_stream(ref_) : nullptr; }
  ssize_t count_sent(ssize_t n) const {
    if (n > 0 && is_stream())
      core::stat_transfer(core::Stat::tcp_bytes_sent, core::Stat::tcp_sends, static_cast<uint64_t>(n));
    return n;
  }
  ssize_t count_received(ssize_t n) const {
    if (n > 0 && is_stream())
      core::stat_transfer(core::Stat::tcp_bytes_received, core::Stat::tcp_receives, static_cast<uint64_t>(n));
    return n;
  }

  ssize_t send(int fd, const msghdr& msg, int flags) const {
    sys::ReentryGuard guard;
    return preload::finish(socket_->send_message(fd, msg, flags));
  }
  int send_batch(int fd, mmsghdr* msgs, unsigned count, int flags) const {
    sys::ReentryGuard guard;
    return static_cast<int>(preload::finish(socket_->send_messages(fd, msgs, count, flags)));
  }
  ssize_t receive(int fd, msghdr& msg, int flags) const {
    sys::ReentryGuard guard;
    return preload::finish(socket_->receive_message(fd, msg, flags));
  }
  // The same for one buffer, and for an iovec array (no address).
  ssize_t send(int fd, const iovec* iov, int count, const sockaddr* to, socklen_t to_len, int flags) const {
    msghdr msg{};
    msg.msg_name = const_cast<sockaddr*>(to);
    msg.msg_namelen = to != nullptr ? to_len : 0;
    msg.msg_iov = const_cast<iovec*>(iov);
    msg.msg_iovlen = static_cast<size_t>(count);
    return send(fd, msg, flags);
  }
  ssize_t receive(int fd, const iovec* iov, int count, sockaddr* from, socklen_t* from_len, int flags) const {
    msghdr msg{};
    msg.msg_name = from_len != nullptr ? from : nullptr;
    msg.msg_namelen = from != nullptr && from_len != nullptr ? *from_len : 0;
    msg.msg_iov = const_cast<iovec*>(iov);
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = receive(fd, msg, flags);
    if (n >= 0 && from != nullptr && from_len != nullptr) *from_len = msg.msg_namelen;
    return n;
  }

 private:
  sock::SocketRef ref_;
  sock::ManagedSocket* socket_ = nullptr;
};

int iov_count(size_t n) { return n > static_cast<size_t>(IOV_MAX) ? -1 : static_cast<int>(n); }

}  // namespace

VSOCK_EXPORT ssize_t send(int fd, const void* buf, size_t len, int flags) {
  Route route(fd);
  if (route.socket() == nullptr) return route.count_sent(real().send(fd, buf, len, flags));
  iovec iov{const_cast<void*>(buf), len};
  return route.send(fd, &iov, 1, nullptr, 0, flags);
}

// On a connected stream socket the kernel ignores the address.
VSOCK_EXPORT ssize_t sendto(int fd, const void* buf, size_t len, int flags, const sockaddr* addr, socklen_t alen) {
  Route route(fd);
  if (route.socket() == nullptr) return route.count_sent(real().sendto(fd, buf, len, flags, addr, alen));
  iovec iov{const_cast<void*>(buf), len};
  return route.send(fd, &iov, 1, addr, alen, flags);
}

// A socket passed with SCM_RIGHTS may be used by the receiving process:
// an upgraded connection goes back to TCP first (docs/protocol.md §5).
static void hand_off_passed(const msghdr* msg) {
  if (msg == nullptr || msg->msg_controllen == 0 || sys::in_library()) return;
  preload::ErrnoKeeper keep;
  sock::hand_off_passed_fds(msg->msg_control, msg->msg_controllen);
}

VSOCK_EXPORT ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
  hand_off_passed(msg);
  Route route(fd);
  if (route.socket() == nullptr) return route.count_sent(real().sendmsg(fd, msg, flags));
  if (iov_count(msg->msg_iovlen) < 0) {
    errno = EMSGSIZE;
    return -1;
  }
  return route.send(fd, *msg, flags);
}

VSOCK_EXPORT int sendmmsg(int fd, mmsghdr* msgs, unsigned int count, int flags) {
  for (unsigned int i = 0; msgs != nullptr && i < count; ++i) hand_off_passed(&msgs[i].msg_hdr);
  Route route(fd);
  if (route.socket() == nullptr) return static_cast<int>(route.count_sent(real().sendmmsg(fd, msgs, count, flags)));
  if (count > UIO_MAXIOV) count = UIO_MAXIOV;  // the kernel's cap
  if (count > 0 && msgs == nullptr) {
    errno = EFAULT;
    return -1;
  }
  return route.send_batch(fd, msgs, count, flags);
}

VSOCK_EXPORT ssize_t recv(int fd, void* buf, size_t len, int flags) {
  Route route(fd);
  if (route.socket() == nullptr) return route.count_received(real().recv(fd, buf, len, flags));
  iovec iov{buf, len};
  return route.receive(fd, &iov, 1, nullptr, nullptr, flags);
}

VSOCK_EXPORT ssize_t recvfrom(int fd, void* buf, size_t len, int flags, sockaddr* addr, socklen_t* alen) {
  Route route(fd);
  if (route.socket() == nullptr) return route.count_received(real().recvfrom(fd, buf, len, flags, addr, alen));
  iovec iov{buf, len};
  return route.receive(fd, &iov, 1, addr, alen, flags);
}

VSOCK_EXPORT ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  Route route(fd);
  if (route.socket() == nullptr) return route.count_received(real().recvmsg(fd, msg, flags));
  if (iov_count(msg->msg_iovlen) < 0) {
    errno = EMSGSIZE;
    return -1;
  }
  return route.receive(fd, *msg, flags);
}

VSOCK_EXPORT int recvmmsg(int fd, mmsghdr* msgs, unsigned int count, int flags, timespec* timeout) {
  Route route(fd);
  if (route.socket() == nullptr)
    return static_cast<int>(route.count_received(real().recvmmsg(fd, msgs, count, flags, timeout)));
  // MSG_WAITFORONE: only the first message may wait. (The timeout, which
  // the kernel checks only between messages, is not applied here.)
  unsigned int got = 0;
  for (; got < count && got < UIO_MAXIOV; ++got) {
    int these = flags & ~MSG_WAITFORONE;
    if ((flags & MSG_WAITFORONE) && got > 0) these |= MSG_DONTWAIT;
    ssize_t n = recvmsg(fd, &msgs[got].msg_hdr, these);
    if (n < 0) return got > 0 ? static_cast<int>(got) : -1;
    msgs[got].msg_len = static_cast<unsigned int>(n);
    if (n == 0 && route.is_stream()) return static_cast<int>(got + 1);  // end of the stream
  }
  return static_cast<int>(got);
}

VSOCK_EXPORT ssize_t read(int fd, void* buf, size_t len) {
  Route route(fd);
  if (route.socket() == nullptr) return route.count_received(real().read(fd, buf, len));
  if (len == 0 && route.is_stream()) return 0;  // the kernel's read() of nothing returns at once (recv() may wait)
  iovec iov{buf, len};
  return route.receive(fd, &iov, 1, nullptr, nullptr, 0);
}

VSOCK_EXPORT ssize_t write(int fd, const void* buf, size_t len) {
  Route route(fd);
  if (route.socket() == nullptr) return route.count_sent(real().write(fd, buf, len));
  iovec iov{const_cast<void*>(buf), len};
  return route.send(fd, &iov, 1, nullptr, 0, 0);
}

VSOCK_EXPORT ssize_t readv(int fd, const iovec* iov, int count) {
  Route route(fd);
  if (route.socket() == nullptr) return route.count_received(real().readv(fd, iov, count));
  if (count < 0 || count > IOV_MAX) {
    errno = EINVAL;
    return -1;
  }
  size_t total = 0;
  for (int i = 0; i < count; ++i) total += iov[i].iov_len;
  if (total == 0 && route.is_stream()) return 0;  // as read(): nothing to read returns at once
  return route.receive(fd, iov, count, nullptr, nullptr, 0);
}

VSOCK_EXPORT ssize_t writev(int fd, const iovec* iov, int count) {
  Route route(fd);
  if (route.socket() == nullptr) return route.count_sent(real().writev(fd, iov, count));
  if (count < 0 || count > IOV_MAX) {
    errno = EINVAL;
    return -1;
  }
  return route.send(fd, iov, count, nullptr, 0, 0);
}

namespace {

// sendfile to an offloaded socket: the file's bytes are read here and sent
// through the stream; the file offset moves as the kernel's would.
ssize_t stream_sendfile(sock::StreamSocket* stream, int out_fd, int in_fd, off64_t* offset, size_t count) {
  sys::ReentryGuard guard;
  off64_t position = offset != nullptr ? *offset : ::lseek64(in_fd, 0, SEEK_CUR);
  if (position < 0) return -1;
  char buffer[64 * 1024];
  size_t done = 0;
  int flags = 0;
  while (done < count) {
    size_t want = count - done < sizeof buffer ? count - done : sizeof buffer;
    ssize_t got = ::pread64(in_fd, buffer, want, position);
    if (got < 0 && done == 0) return -1;
    if (got <= 0) break;
    iovec iov{buffer, static_cast<size_t>(got)};
    core::Result<size_t> sent = stream->send(out_fd, &iov, 1, flags);
    if (!sent) {
      if (done == 0) {
        errno = sent.error();
        return -1;
      }
      break;
    }
    done += sent.value();
    position += static_cast<off64_t>(sent.value());
    if (sent.value() < static_cast<size_t>(got)) break;
    flags = MSG_DONTWAIT;  // later pieces only while they go without waiting, as the kernel's
  }
  if (offset != nullptr)
    *offset = position;
  else
    ::lseek64(in_fd, position, SEEK_SET);
  return static_cast<ssize_t>(done);
}

}  // namespace

VSOCK_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t* offset, size_t count) {
  Route route(out_fd);
  if (route.stream() == nullptr) return route.count_sent(real().sendfile(out_fd, in_fd, offset, count));
  off64_t position = offset != nullptr ? *offset : 0;
  ssize_t n = stream_sendfile(route.stream(), out_fd, in_fd, offset != nullptr ? &position : nullptr, count);
  if (offset != nullptr && n >= 0) *offset = static_cast<off_t>(position);
  return n;
}

VSOCK_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t* offset, size_t count) {
  Route route(out_fd);
  if (route.stream() == nullptr) return route.count_sent(real().sendfile64(out_fd, in_fd, offset, count));
  return stream_sendfile(route.stream(), out_fd, in_fd, offset, count);
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
