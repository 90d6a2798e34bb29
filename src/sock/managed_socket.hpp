// ManagedSocket: the one narrow interface through which the entry points
// (preload/) and the wait engine (wait/) use a socket the library serves
// (DESIGN decision 6): a TCP connection that may be on an RC queue pair
// (stream/StreamSocket) or a UDP socket whose datagrams may go over the
// process's UD queue pair (dgram/DatagramSocket). Neither caller knows
// which it has; what only one kind does (the TCP upgrade, SO_LINGER's
// reset, sendfile) stays with that kind's own hooks.
//
// `fd` is always the caller's fd for the socket (a dup has another number
// for the same socket). Every call may progress the socket's transport.
// Results carry an errno (decision 7); only the entry point turns it into
// -1 and errno.
#pragma once
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

#include "core/result.hpp"

namespace vsock::sock {

// Which look of a wait a poll_events() call is: a look during the spin may
// leave out what costs a system call (a socket's kernel side that has been
// quiet), the spin's last look and every look after it may not.
enum class Look {
  kFull,        // no spin (a zero timeout), the spin's last look, after a sleep
  kCheckpoint,  // a spin look on which the engine also asks the kernel about its fds
  kSpin,        // any other spin look
};

class ManagedSocket {
 public:
  // Once true, every call on the fd goes straight to the kernel (the socket
  // stays on, or went back to, the kernel path for good).
  virtual bool kernel_only() const = 0;

  // sendmsg(): the iovecs of `msg` (at most IOV_MAX, checked by the caller),
  // its destination (msg_name: datagram sockets; a stream ignores it, as
  // the kernel does on a connected TCP socket) and control data.
  virtual core::Result<size_t> send_message(int fd, const msghdr& msg, int flags) = 0;
  // sendmmsg(): sends msgs[0..count) in order, setting each one's msg_len,
  // until one fails; the number sent, or the first error when none was
  // (the kernel's rule). One at a time unless the kind can do better (a
  // datagram socket posts a run of UD datagrams as one chain).
  virtual core::Result<unsigned> send_messages(int fd, mmsghdr* msgs, unsigned count, int flags) {
    unsigned sent = 0;
    for (; sent < count; ++sent) {
      if (msgs[sent].msg_hdr.msg_iovlen > static_cast<size_t>(IOV_MAX)) {
        if (sent > 0) break;
        return core::Result<unsigned>::fail(EMSGSIZE);
      }
      core::Result<size_t> n = send_message(fd, msgs[sent].msg_hdr, flags);
      if (!n) {
        if (sent > 0) break;
        return core::Result<unsigned>::fail(n.error());
      }
      msgs[sent].msg_len = static_cast<unsigned>(n.value());
    }
    return core::Result<unsigned>::ok(sent);
  }
  // recvmsg(): fills msg's iovecs, and, as the kernel's recvmsg does, its
  // msg_name / msg_namelen (the source, or length 0 on a stream), control
  // data and msg_flags (MSG_TRUNC, MSG_CTRUNC).
  virtual core::Result<size_t> receive_message(int fd, msghdr& msg, int flags) = 0;
  virtual core::Result<bool> shutdown(int fd, int how) = 0;
  // ioctl(FIONREAD): a stream's readable bytes, a datagram socket's next
  // datagram's size.
  virtual core::Result<int> readable_bytes(int fd) = 0;
  // getsockopt(SO_ERROR) when the library holds the error: true and *error
  // (taken once, as the kernel's pending error). False: the kernel answers.
  virtual bool take_so_error(int fd, int* error) = 0;

  // poll()-style readiness for `events` (POLLIN, POLLOUT, POLLRDHUP;
  // POLLHUP and POLLERR always), from every path the socket has. A look
  // other than kFull may leave a path out (see Look); a socket that
  // reports nothing must have asked every path on a kFull look.
  virtual short poll_events(int fd, short events, Look look) = 0;
  // Fills `out` (at most kMaxWakeFds) with what a sleeper must watch to
  // learn that poll_events() may have changed, arming what must be armed.
  // Returns the count; *slice_ms: how long to sleep at most before looking
  // again (-1: no limit; readiness may change without any fd saying so).
  static constexpr int kMaxWakeFds = 3;
  virtual int wake_fds(int fd, short events, pollfd* out, int* slice_ms) = 0;
  // Whether the fds that the last wake_fds() gave report every change of
  // readiness but what time brings (probes of an idle peer, due after a
  // second). A waiter may then leave the socket unlooked-at until one of
  // them fires, about a second passes, note_route_changed() is called or
  // another wait takes its completion event (note_wake_events_taken): an
  // epoll view's quiet entries, wait/epoll_quiet.hpp. False for a socket
  // in transition or whose fd is shared with other sockets' waiters.
  virtual bool wake_fds_tell_all(int /*fd*/) { return false; }
  // Readiness as the socket stands now, without taking completions or
  // events (after wake_fds() armed them: what changed between a waiter's
  // look and that arming, e.g. the side-band thread took data into the
  // ring or found the token, has no event to announce it). Only sockets
  // whose wake_fds_tell_all() can be true need it; the default says every
  // asked event may be ready, so the caller looks again.
  virtual short ready_now(int /*fd*/, short events) { return events; }
  // Changes whenever something may have become newly ready: edge-triggered
  // epoll reports a ready socket again after it changed. `fd` is the
  // socket's fd in the caller's table (looked at for the kernel's news).
  virtual uint64_t activity(int fd) = 0;

  // fcntl(F_SETFL) / ioctl(FIONBIO), or setsockopt(SO_RCVTIMEO /
  // SO_SNDTIMEO), went through on an fd of the socket: cached copies are
  // stale. Lock-free (may run in a signal handler).
  virtual void file_flags_changed() = 0;
  virtual void timeouts_changed() = 0;

 protected:
  ~ManagedSocket() = default;  // lifetime is each kind's own (counted)
};

// Bumped whenever a socket that may already sit in an epoll set starts or
// stops being served by the library (a connecting stream attached, a UDP
// socket taken over, either fallen back to the kernel) or changes in a way
// that its wake fds do not report (shutdown by the application, a resume):
// waiters that skip quiet sockets look at all of them again. Lock-free.
inline std::atomic<uint64_t> g_route_changes{0};
inline void note_route_changed() { g_route_changes.fetch_add(1, std::memory_order_acq_rel); }
inline uint64_t route_changes() { return g_route_changes.load(std::memory_order_acquire); }

// Completion events that a socket's own call took from its channel (a
// look of poll(), of an epoll set, a blocking call's sleep), process-wide
// and by this thread. An event taken was an event that a quiet epoll
// entry's wake set then never sees: a view that finds events taken other
// than by its own looks looks at its quiet entries again.
inline std::atomic<uint64_t> g_wake_events_taken{0};
inline thread_local uint64_t t_wake_events_taken = 0;
inline void note_wake_events_taken(int count) {
  if (count <= 0) return;
  g_wake_events_taken.fetch_add(static_cast<uint64_t>(count), std::memory_order_acq_rel);
  t_wake_events_taken += static_cast<uint64_t>(count);
}
inline uint64_t wake_events_taken() { return g_wake_events_taken.load(std::memory_order_acquire); }

}  // namespace vsock::sock
