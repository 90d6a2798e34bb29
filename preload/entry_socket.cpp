// Entry points that create, connect and describe sockets.
#include <fcntl.h>
#include <sys/socket.h>

#include "preload/entry_common.hpp"

using namespace vsock;
using vsock::preload::ErrnoKeeper;
using vsock::preload::real;

VSOCK_EXPORT int socket(int domain, int type, int protocol) {
  int fd = real().socket(domain, type, protocol);
  // A new socket: O_NONBLOCK as its type says, every option the kernel's default.
  const uint8_t mode = sock::known_mode_when_made(type, sock::kModeNewSocket);
  if (fd >= 0 && !sys::in_library())
    preload::track_new_socket(fd, domain, type, protocol, sock::SocketRole::kUnknown, mode);
  return fd;
}

VSOCK_EXPORT int socketpair(int domain, int type, int protocol, int fds[2]) {
  // Only AF_UNIX pairs exist: never offloaded, but the fd numbers may be reused.
  int rc = real().socketpair(domain, type, protocol, fds);
  if (rc == 0 && !sys::in_library()) {
    ErrnoKeeper keep;
    sock::register_socket(fds[0], domain, type, protocol, sock::SocketRole::kUnknown);
    sock::register_socket(fds[1], domain, type, protocol, sock::SocketRole::kUnknown);
  }
  return rc;
}

VSOCK_EXPORT int bind(int fd, const sockaddr* addr, socklen_t len) {
  int rc = real().bind(fd, addr, len);
  if (rc == 0 && !sys::in_library()) {
    ErrnoKeeper keep;
    if (sock::SocketRef s = sock::lookup_socket(fd)) sock::dgram::on_datagram_bound(fd, s.get());
  }
  return rc;
}

VSOCK_EXPORT int listen(int fd, int backlog) {
  if (sys::in_library()) return real().listen(fd, backlog);
  // A socket bound to its port listens in rdma_cm first: a client can
  // connect (and then ask for its upgrade) as soon as the kernel listens.
  sock::SocketRef s;
  bool early = false;
  {
    ErrnoKeeper keep;
    s = sock::lookup_socket(fd);
    if (s && sock::bound_port(fd) != 0) early = sock::on_listening(fd, s.get());
  }
  int rc = real().listen(fd, backlog);
  if (s) {
    ErrnoKeeper keep;
    if (rc == 0) {
      s->role.store(sock::SocketRole::kListener);
      if (!early) sock::on_listening(fd, s.get());
    } else if (early) {
      sock::on_listen_failed(s.get());
    }
  }
  return rc;
}

namespace {

// `flags`: accept4's (0 for accept).
int register_accepted(int listen_fd, int fd, int flags) {
  if (fd < 0 || sys::in_library()) return fd;
  ErrnoKeeper keep;
  if (sock::SocketRef listener = sock::lookup_socket(listen_fd)) {
    // O_NONBLOCK as accept4's flags say (never the listener's); the
    // options are the listener's (the kernel copies them).
    const uint8_t mode = sock::known_mode_when_made(flags, listener->known_mode.load() & sock::kModeInherited);
    sock::SocketRef accepted = preload::track_new_socket(fd, listener->domain, listener->type, listener->protocol,
                                                         sock::SocketRole::kAccepted, mode);
    if (accepted) sock::on_accepted(fd, listener.get(), accepted.get());
  } else
    sock::forget_fd(fd);  // a kernel-only listener (e.g. AF_UNIX): the new fd is kernel-only too
  return fd;
}

}  // namespace

VSOCK_EXPORT int accept(int fd, sockaddr* addr, socklen_t* len) {
  return register_accepted(fd, real().accept(fd, addr, len), 0);
}

VSOCK_EXPORT int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  return register_accepted(fd, real().accept4(fd, addr, len, flags), flags);
}

VSOCK_EXPORT int connect(int fd, const sockaddr* addr, socklen_t len) {
  int rc = real().connect(fd, addr, len);
  if ((rc == 0 || errno == EINPROGRESS) && !sys::in_library()) {
    ErrnoKeeper keep;
    if (sock::SocketRef s = sock::lookup_socket(fd)) {
      s->role.store(sock::SocketRole::kClient);
      // Only a blocking connect that has completed may wait for the upgrade.
      const uint8_t mode = s->known_mode.load();
      const bool nonblocking = (mode & sock::kModeFlagsKnown) ? (mode & sock::kModeNonblocking) != 0
                                                              : (real().fcntl(fd, F_GETFL, nullptr) & O_NONBLOCK) != 0;
      bool may_wait = rc == 0 && !nonblocking;
      sock::on_connected(fd, s.get(), addr, len, may_wait);
      sock::dgram::on_datagram_connected(fd, s.get(), addr, len);
    }
  }
  return rc;
}

VSOCK_EXPORT int shutdown(int fd, int how) {
  if (!sys::in_library()) {
    sock::SocketRef ref = sock::lookup_socket(fd);
    if (sock::ManagedSocket* socket = sock::managed_socket(ref)) {
      sys::ReentryGuard guard;
      return preload::finish(socket->shutdown(fd, how)) < 0 ? -1 : 0;
    }
  }
  return real().shutdown(fd, how);
}

VSOCK_EXPORT int getsockopt(int fd, int level, int name, void* value, socklen_t* len) {
  // SO_ERROR of an upgraded connection: its reset is reported once, by
  // whichever call asks first (recv, send or this), as the kernel does.
  if (level == SOL_SOCKET && name == SO_ERROR && value != nullptr && len != nullptr && *len >= sizeof(int) &&
      !sys::in_library()) {
    sock::SocketRef ref = sock::lookup_socket(fd);
    if (sock::ManagedSocket* socket = sock::managed_socket(ref)) {
      sys::ReentryGuard guard;
      int error = 0;
      if (socket->take_so_error(fd, &error)) {
        *static_cast<int*>(value) = error;
        *len = sizeof(int);
        return 0;
      }
    }
  }
  return real().getsockopt(fd, level, name, value, len);
}

VSOCK_EXPORT int setsockopt(int fd, int level, int name, const void* value, socklen_t len) {
  int rc = real().setsockopt(fd, level, name, value, len);
  if (rc != 0 || sys::in_library()) return rc;
  const bool stream_unsupported = sock::is_unsupported_option(level, name);
  const bool datagram_option = sock::dgram::is_datagram_option(level, name);
  const bool copied = sock::is_stream_option(level, name);
  const bool multicast = sock::dgram::is_datagram_multicast_option(level, name);
  if (!stream_unsupported && !datagram_option && !copied && !multicast) return rc;
  ErrnoKeeper keep;
  sock::SocketRef s = sock::lookup_socket(fd);
  if (!s) return rc;
  if (datagram_option) sock::dgram::on_datagram_option(fd, s.get(), level, name);
  if (multicast) sock::dgram::on_datagram_multicast_option(fd, s.get(), level, name, value, len);
  if (stream_unsupported) sock::on_unsupported_option(s.get(), level, name);
  if (copied) sock::on_option_set(s.get(), level, name, value, len);
  return rc;
}

VSOCK_EXPORT int getsockname(int fd, sockaddr* addr, socklen_t* len) { return real().getsockname(fd, addr, len); }

VSOCK_EXPORT int getpeername(int fd, sockaddr* addr, socklen_t* len) { return real().getpeername(fd, addr, len); }
