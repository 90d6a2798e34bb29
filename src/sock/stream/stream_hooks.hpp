// What the entry points do to upgrade TCP connections (DESIGN decisions 2,
// 8): the moments of a socket's life where the library steps in, and the
// lookup that routes a call to a StreamSocket or straight to the kernel.
#pragma once
#include <sys/socket.h>

#include "sock/registry.hpp"
#include "sock/stream/stream_socket.hpp"

namespace vsock::sock {

// The StreamSocket a call on this socket must go through, or null: the
// kernel alone serves it (not TCP, kept on the kernel, or fallen back).
inline StreamSocket* managed_stream(const SocketRef& ref) {
  if (!ref) return nullptr;
  StreamSocket* stream = ref->stream.load(std::memory_order_acquire);
  return stream != nullptr && !stream->kernel_only() ? stream : nullptr;
}

// connect() returned 0 (`blocking_done`) or EINPROGRESS on a tracked TCP
// socket: starts the upgrade if the settings, rules and peer allow; a
// blocking connect then waits for its outcome (upgrade_timeout_ms at most).
void on_connected(int fd, SocketState* state, const sockaddr* peer, socklen_t peer_len, bool blocking_done);

// listen() is about to be called (the socket is bound: bound_port() is not
// 0), or succeeded: listen in rdma_cm too. True if it started listening
// now; on_listen_failed() undoes it when the kernel's listen() failed.
bool on_listening(int fd, SocketState* state);
void on_listen_failed(SocketState* state);
// The port `fd` is bound to (host order), 0 if none yet.
uint16_t bound_port(int fd);

// accept() returned `fd` (already registered as `accepted`) on `listener`.
void on_accepted(int fd, SocketState* listener, SocketState* accepted);

// The child of daemon() goes on alone with the listeners: it takes over
// their rdma_cm side once the parent has exited (DESIGN decision 2).
void adopt_inherited_listeners();

// A fresh image (after exec): the connected TCP sockets it inherited that
// a listener of this user's accepted, and that another process of ours may
// serve (its named board is shared: inetd's handlers), are taken into the
// fd table awaiting their claim, which their first use makes here
// (docs/protocol.md §1.1). Others stay the kernel's.
void adopt_inherited_connections();

// setsockopt() of an option the RDMA path cannot honour: the socket stays
// on (or goes back to) TCP while it still can.
void on_unsupported_option(SocketState* state, int level, int name);
// A setsockopt() the kernel took: the options the ring path applies too
// (SO_RCVLOWAT, TCP_NODELAY: is_stream_option) are copied to the socket's
// stream; SO_RCVTIMEO / SO_SNDTIMEO make its cached timeouts stale, and
// SO_LINGER makes close() ask the kernel for it (SocketState::known_mode).
void on_option_set(SocketState* state, int level, int name, const void* value, socklen_t len);
bool is_unsupported_option(int level, int name);
bool is_stream_option(int level, int name);
// fcntl(F_SETFL) or ioctl(FIONBIO) went through: the stream's cached
// O_NONBLOCK is stale. Lock-free (may run in a signal handler).
void on_file_flags_set(SocketState* state);

// The process exits: the kernel would send what every TCP socket still
// holds, then a FIN; do the same for upgraded ones (bounded wait).
void finish_streams_at_exit();

// close(fd) is about to close a tracked socket; the fd is still open, and
// `last_fd` says whether it is the socket's last in this process.
// SO_LINGER {1, 0} makes the last close abortive on the ring too; a last
// fd of a connection a fork child may hold is handed back to TCP here,
// through this fd: once the kernel closed it, a hand-back the side band
// started for the child meanwhile may find no fd of the socket left.
void before_close(int fd, const SocketRef& ref, bool last_fd);

// The same for every socket of [first, last] that close_range or closefrom
// is about to close (a socket's last fd: all of its fds are in the range).
void before_close_range(unsigned int first, unsigned int last);

// dup2/dup3(oldfd, newfd), oldfd != newfd, is about to close newfd (when
// it is open and another socket than oldfd's): what close(newfd) does first.
void before_dup_over(int oldfd, int newfd);

// The registry dropped the last reference: the socket is closed.
void on_socket_released(SocketState* state);

}  // namespace vsock::sock
