// StreamSocket: the socket-shaped calls — send, recv, shutdown, FIONREAD,
// readiness — over TCP, the ring, or both across the switch.
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "core/clock.hpp"
#include "core/stats.hpp"
#include "sock/stream/held_data_watch.hpp"
#include "sock/stream/stream_iov.hpp"
#include "sock/stream/stream_socket.hpp"
#include "sys/real_calls.hpp"

namespace vsock::sock {
namespace {

// The kernel raises SIGPIPE on the writing thread for EPIPE.
void raise_sigpipe() {
  ::syscall(SYS_tgkill, ::syscall(SYS_getpid), ::syscall(SYS_gettid), SIGPIPE);
}

}  // namespace

// ------------------------------------------------------------------ send --

core::Result<size_t> StreamSocket::send_once(int fd, const iovec* iov, int count, int flags, bool progress) {
  using R = core::Result<size_t>;
  last_fd_ = fd;
  if (progress) progress_locked(fd);
  // After a reset the kernel's send reports the error once, then EPIPE.
  if (error_locked() != 0) {
    int error = take_error_locked();
    return R::fail(error != 0 ? error : EPIPE);
  }
  // A non-blocking connect's upgrade is still under way: as a connecting
  // kernel socket, not yet (the first request then goes on the ring).
  if (writes_held(fd)) return R::fail(EAGAIN);
  if (!kernel_only() && resend_pending()) {
    // The bytes a peer's Revert gave back to us go first.
    flush_resend_locked();
    if (resend_pending()) return R::fail(resend_shut_wr_ ? EPIPE : EAGAIN);
  }
  if (writes_to_kernel()) {
    // The server's reply may be what the client waits for before it
    // writes again: a switch point it may take then goes first (§2).
    offer_switch_point_locked(fd);
    msghdr message{};
    message.msg_iov = const_cast<iovec*>(iov);
    message.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = sys::real().sendmsg(fd, &message, flags | MSG_DONTWAIT);
    if (n < 0) return R::fail(errno);
    if (!kernel_only() && writer_.tcp_allowed()) {
      writer_.on_tcp_written(static_cast<uint64_t>(n));
      // The peer's kernel keeps an urgent byte out of the stream its
      // application reads: the server's count never reaches ours again.
      if (flags & MSG_OOB) urgent_on_tcp_ = true;
    }
    core::stat_transfer(core::Stat::tcp_bytes_sent, core::Stat::tcp_sends, static_cast<uint64_t>(n));
    return R::ok(static_cast<size_t>(n));
  }
  if (write_shut_) return R::fail(EPIPE);
  core::Result<size_t> written = channel_->write(iov, count);
  if (written) core::stat_transfer(core::Stat::rdma_bytes_sent, core::Stat::rdma_sends, written.value());
  if (!written && written.error() != EAGAIN) {
    advance(fd);
    // RDMA failed and the connection went on over TCP: write there.
    if ((peer_reverted_ || peer_gone_unswitched()) && !kernel_only() && error_locked() == 0)
      return send_once(fd, iov, count, flags, false);
    if (error_locked() != 0) {
      int error = take_error_locked();
      return R::fail(error != 0 ? error : EPIPE);
    }
  }
  return written;
}

bool StreamSocket::ring_send_ready_locked() const {
  if (kernel_only() || !channel_ || writer_.tcp_allowed() || resend_pending() || peer_reverted_ || revert_posted_ ||
      error_ != 0)
    return false;
  return channel_->can_post_without_progress();
}

// MSG_OOB once our writes go to the ring: the bytes before the last are
// ordinary data (the ring); the last, the urgent byte, goes on TCP as the
// kernel sends it, where the peer's kernel keeps it out of band (poll
// POLLPRI, recv MSG_OOB). Its mark is not ordered with the ring's data.
core::Result<size_t> StreamSocket::send_urgent(int fd, const iovec* iov, int count, int flags) {
  using R = core::Result<size_t>;
  const size_t total = iov_total(iov, count);
  size_t done = 0;
  if (total > 1) {
    IovWindow head(iov, count, 0, total - 1);
    core::Result<size_t> sent = send(fd, head.data(), head.count(), flags & ~MSG_OOB);
    if (!sent || sent.value() < total - 1) return sent;
    done = sent.value();
  }
  IovWindow last(iov, count, total - 1, 1);
  msghdr message{};
  message.msg_iov = const_cast<iovec*>(last.data());
  message.msg_iovlen = static_cast<size_t>(last.count());
  ssize_t n = sys::real().sendmsg(fd, &message, flags);
  if (n < 0) return done > 0 ? R::ok(done) : R::fail(errno);
  core::stat_transfer(core::Stat::tcp_bytes_sent, core::Stat::tcp_sends, static_cast<uint64_t>(n));
  return R::ok(done + static_cast<size_t>(n));
}

core::Result<size_t> StreamSocket::send(int fd, const iovec* iov, int count, int flags) {
  claim_if_awaited(fd);
  using R = core::Result<size_t>;
  const size_t total = iov_total(iov, count);
  const bool urgent = (flags & MSG_OOB) && total > 0;
  StreamLock held = lock_call();
  size_t done = 0;
  int64_t deadline = -2;  // not looked up yet
  bool progressed = false;  // the wait just polled the CQ
  for (;;) {
    // A part was sent before the reset: that is the answer, the error waits.
    if (done > 0 && error_locked() != 0) return R::ok(done);
    IovWindow window(iov, count, done, total - done);
    if (urgent && !kernel_only()) {
      // Decide TCP or ring now, and keep the writer there for this call's
      // piece: send_once then does not progress (a Bound taken there would
      // switch the writer under the urgent byte).
      progress_locked(fd);
      if (!writer_.tcp_allowed()) {
        // Our token goes on TCP before the urgent byte (§2): the server
        // takes the token out of the stream, and a read past an urgent
        // byte that came first would drop it.
        wait_for_token_locked(&held, core::monotonic_ms() + kTokenBeforeTcpMs);
        held.unlock();
        core::Result<size_t> rest = send_urgent(fd, window.data(), window.count(), flags);
        if (!rest) return done > 0 ? R::ok(done) : rest;
        return R::ok(done + rest.value());
      }
    }
    const bool poll_first = !urgent && !progressed && !ring_send_ready_locked();
    progressed = false;
    core::Result<size_t> sent = send_once(fd, window.data(), window.count(), flags, poll_first);
    if (sent) {
      done += sent.value();
      if (holds_data_locked()) note_held_data();
      if (done >= total || (flags & MSG_DONTWAIT) || blocking_.nonblocking(fd)) return R::ok(done);
      continue;  // a blocking send takes everything, as the kernel's does
    }
    int error = sent.error();
    if (error == EAGAIN) ++eagain_count_;
    if (error == EAGAIN && !(flags & MSG_DONTWAIT) && !blocking_.nonblocking(fd)) {
      if (deadline == -2) deadline = blocking_.deadline_ms(fd, false);
      core::Result<bool> waited = wait(held, fd, WaitFor::kWrite, deadline);
      if (waited) {
        progressed = waited.value();
        continue;
      }
      error = waited.error();
    }
    if (done > 0) return R::ok(done);
    // The TCP path raised SIGPIPE itself (flags went to the kernel).
    if (error == EPIPE && !(flags & MSG_NOSIGNAL) && !writes_to_kernel()) raise_sigpipe();
    return R::fail(error);
  }
}

// ------------------------------------------------------------------ recv --

core::Result<size_t> StreamSocket::recv_tcp_eof() {
  using R = core::Result<size_t>;
  if (reader_.token_pending()) {
    // After our own SHUT_RD the kernel's 0 is no end of the client's
    // stream: its token may still come (check_token_locked). The
    // application reads the end of file meanwhile, as on the kernel.
    if (read_shut_) return R::ok(0);
    // TCP ended before a Switch's count and token: not the TCP client's
    // Switch (the client's count is bytes that were on TCP): its end is
    // the connection's.
    refuse_switch_locked("TCP ended before its switch point");
    return R::ok(0);
  }
  core::Result<TcpEnd> end = reader_.on_tcp_eof();
  if (!end) {
    apply(upgrade_.on(UpgradeEvent::kTcpReset));
    return recv_after_reset();
  }
  // The peer's Switch may be behind its FIN: wait for it (the engine ends
  // the wait by falling back or resetting if it never comes). Not after our
  // own SHUT_RD: the kernel's end of file is the answer then.
  if (end.value() == TcpEnd::kEndOfStream && switch_may_come() && !read_shut_) return R::fail(EAGAIN);
  if (!kernel_only()) apply(upgrade_.on(UpgradeEvent::kTcpEof));
  return R::ok(0);
}

core::Result<size_t> StreamSocket::recv_after_reset() {
  using R = core::Result<size_t>;
  int error = take_error_locked();
  if (error != 0) return R::fail(error);
  return R::ok(0);
}

core::Result<size_t> StreamSocket::recv_once(int fd, const iovec* iov, int count, int flags, bool progress) {
  using R = core::Result<size_t>;
  last_fd_ = fd;
  if (progress) progress_locked(fd);
  // After a reset the kernel still delivers what it had received, then the
  // error once, then end of stream.
  if (error_locked() != 0 && !(reader_.on_ring() && channel_ && channel_->readable_bytes() > 0))
    return recv_after_reset();
  const size_t length = iov_total(iov, count);
  if (kernel_only()) {
    msghdr message{};
    message.msg_iov = const_cast<iovec*>(iov);
    message.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = sys::real().recvmsg(fd, &message, flags | MSG_DONTWAIT);
    if (n < 0) return R::fail(errno);
    core::stat_transfer(core::Stat::tcp_bytes_received, core::Stat::tcp_receives, static_cast<uint64_t>(n));
    return R::ok(static_cast<size_t>(n));
  }
  if (length == 0) {
    // The kernel's zero-length read: 0 once data or the end is there,
    // EAGAIN (a blocking caller waits) before. A one-byte peek says which.
    char byte;
    iovec probe{&byte, 1};
    core::Result<size_t> peeked = recv_once(fd, &probe, 1, flags | MSG_PEEK);
    if (!peeked) return peeked;
    return R::ok(0);
  }
  if (resuming_ && reader_.tcp_again()) {
    // RDMA failed and the ring part is read: the peer's Resume record
    // comes first on TCP (§5.1).
    core::Result<bool> resumed = take_resume_record(fd);
    if (!resumed) return resumed.error() == EAGAIN ? R::fail(EAGAIN) : recv_after_reset();
  }
  if (reader_.token_due()) {
    // The server, at the client's switch point: its token first (§2).
    check_token_locked(fd);
    if (kernel_only()) return recv_once(fd, iov, count, flags, false);  // refused: all TCP's
    if (reader_.token_due()) return R::fail(EAGAIN);                      // on its way
  }
  ReadPlan plan = reader_.plan(length, flags);
  size_t got = 0;
  if (plan.tcp_length > 0 && token_guard_ && !reader_.switch_known() && !reader_.tcp_ended()) {
    // The client's token may follow on TCP once its Switch is in our
    // completion queue: look first, then poll the queue, and take only the
    // bytes looked at if no Switch came (§2).
    IovWindow window(iov, count, 0, plan.tcp_length);
    msghdr message{};
    message.msg_iov = const_cast<iovec*>(window.data());
    message.msg_iovlen = static_cast<size_t>(window.count());
    ssize_t n = sys::real().recvmsg(fd, &message, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) {
      if (switch_came_since_look_locked()) return recv_once(fd, iov, count, flags, false);
      plan.tcp_length = static_cast<size_t>(n);
    } else if (n < 0 && errno == EAGAIN) {
      // Nothing looked at, so nothing may be taken: what arrives after the
      // look can be the token (churn test: 1 cycle in 10,000 read it as data).
      return R::fail(EAGAIN);
    }
  }
  if (plan.tcp_length > 0) {
    if (reader_.tcp_ended()) return recv_tcp_eof();
    IovWindow window(iov, count, 0, plan.tcp_length);
    msghdr message{};
    message.msg_iov = const_cast<iovec*>(window.data());
    message.msg_iovlen = static_cast<size_t>(window.count());
    ssize_t n = sys::real().recvmsg(fd, &message, (plan.tcp_flags & ~MSG_WAITALL) | MSG_DONTWAIT);
    if (n < 0) {
      int error = errno;
      if (error == ECONNRESET) {
        apply(upgrade_.on(UpgradeEvent::kTcpReset));
        error_reported_ = true;  // this is the report
      }
      return R::fail(error);
    }
    if (n == 0) return recv_tcp_eof();
    if (plan.consume) {
      if (!reader_.on_tcp_read(static_cast<uint64_t>(n))) {
        apply(upgrade_.on(UpgradeEvent::kProtocolError));
        return recv_after_reset();
      }
      core::stat_transfer(core::Stat::tcp_bytes_received, core::Stat::tcp_receives, static_cast<uint64_t>(n));
      offer_switch_point_locked(fd);  // read to the end of what came: the client may switch here
    }
    got = static_cast<size_t>(n);
    if (got < plan.tcp_length) return R::ok(got);
  }
  if (plan.ring_length > 0 && channel_) {
    IovWindow window(iov, count, got, plan.ring_length);
    core::Result<size_t> read = channel_->read(window.data(), window.count(), !plan.consume);
    if (read && read.value() > 0) {
      if (plan.consume) {
        core::stat_transfer(core::Stat::rdma_bytes_received, core::Stat::rdma_receives, read.value());
        reader_.on_ring_read(read.value());  // within the plan: never past a Revert's count
        if (peer_reverted_) finish_peer_revert_locked();
      }
      got += read.value();
    } else if (read && read_shut_) {
      return R::ok(got);
    } else if (!read) {
      if (got > 0) return R::ok(got);
      if (read.error() != EAGAIN) {
        advance(fd);
        // RDMA failed and the connection went on over TCP: read there.
        if (peer_reverted_ && !kernel_only() && error_locked() == 0 && reader_.ring_left() == 0)
          return recv_once(fd, iov, count, flags, false);
      }
      if (read.error() == EAGAIN && read_shut_) return R::ok(0);
      if (error_locked() != 0) return recv_after_reset();
      return R::fail(read.error());
    }
  }
  return R::ok(got);
}

core::Result<size_t> StreamSocket::recv(int fd, const iovec* iov, int count, int flags) {
  claim_if_awaited(fd);
  using R = core::Result<size_t>;
  if (flags & MSG_OOB) {
    // Urgent data only ever travels on TCP (send_urgent): the kernel's.
    msghdr message{};
    message.msg_iov = const_cast<iovec*>(iov);
    message.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = sys::real().recvmsg(fd, &message, flags);
    if (n < 0) return R::fail(errno);
    return R::ok(static_cast<size_t>(n));
  }
  const size_t total = iov_total(iov, count);
  const bool wait_all = (flags & MSG_WAITALL) && !(flags & MSG_PEEK);
  // A blocking read returns once this much is in (SO_RCVLOWAT, as the
  // kernel's tcp_recvmsg target), or at the end, an error or a signal.
  const size_t low_water = static_cast<size_t>(std::max(1, receive_low_water_.load(std::memory_order_relaxed)));
  const size_t target = wait_all ? total : std::min(total, low_water);
  StreamLock held = lock_call();
  size_t got = 0;
  int64_t deadline = -2;  // not looked up yet
  bool progressed = false;  // the wait just polled the CQ and found something
  for (;;) {
    // MSG_WAITALL cut short by a reset: the bytes are the answer, the error waits.
    if (got > 0 && error_locked() != 0 && !(reader_.on_ring() && channel_ && channel_->readable_bytes() > 0))
      return R::ok(got);
    IovWindow window(iov, count, got, total - got);
    core::Result<size_t> read = recv_once(fd, window.data(), window.count(), flags & ~MSG_WAITALL, !progressed);
    progressed = false;
    if (read) {
      if (read.value() == 0) return R::ok(got);  // end of stream
      got += read.value();
      if (got >= target || (flags & (MSG_DONTWAIT | MSG_PEEK)) || blocking_.nonblocking(fd)) return R::ok(got);
      continue;
    }
    int error = read.error();
    if (error == EAGAIN) ++eagain_count_;
    if (error == EAGAIN && !(flags & MSG_DONTWAIT) && !blocking_.nonblocking(fd)) {
      if (deadline == -2) deadline = blocking_.deadline_ms(fd, true);
      core::Result<bool> waited = wait(held, fd, WaitFor::kRead, deadline);
      if (waited) {
        progressed = waited.value();
        continue;
      }
      error = waited.error();
    }
    if (got > 0) return R::ok(got);
    return R::fail(error);
  }
}

// -------------------------------------------------------------- the rest --

core::Result<size_t> StreamSocket::send_message(int fd, const msghdr& msg, int flags) {
  return send(fd, msg.msg_iov, static_cast<int>(msg.msg_iovlen), flags);
}

core::Result<size_t> StreamSocket::receive_message(int fd, msghdr& msg, int flags) {
  core::Result<size_t> n = recv(fd, msg.msg_iov, static_cast<int>(msg.msg_iovlen), flags);
  if (n) {
    msg.msg_namelen = 0;
    msg.msg_controllen = 0;
    msg.msg_flags = 0;
  }
  return n;
}

core::Result<bool> StreamSocket::shutdown(int fd, int how) {
  claim_if_awaited(fd);
  using R = core::Result<bool>;
  StreamLock held = lock_call();
  // The kernel socket is shut too: its errors (ENOTCONN, EINVAL) are the
  // answer, and a peer still reading TCP sees the end there.
  last_fd_ = fd;
  if (!kernel_only()) progress_locked(fd);
  if (!kernel_only() && resend_pending() && how != SHUT_RD) {
    // The kernel's FIN must come after the bytes a peer's Revert gave
    // back: shut the writing side once they are written.
    int other = how == SHUT_RDWR ? SHUT_RD : -1;
    if (other >= 0 && sys::real().shutdown(fd, other) != 0) return R::fail(errno);
    if (other < 0) {
      // Still the kernel's checks (ENOTCONN): a zero-length peek at the state.
      int type = 0;
      socklen_t len = sizeof type;
      if (sys::real().getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) return R::fail(errno);
    }
    if (how == SHUT_RDWR) read_shut_ = true;
    write_shut_ = true;
    resend_shut_wr_ = true;
    note_route_changed();
    flush_resend_locked();
    return R::ok(true);
  }
  // Our token goes on TCP before the kernel's FIN (§2): after the FIN it
  // cannot, and the server would take our Switch for a forgery and drop
  // what we wrote into its ring since. Bounded as for an urgent byte.
  if (how != SHUT_RD && token_owed_ && !kernel_only()) wait_for_token_locked(&held, core::monotonic_ms() + kTokenBeforeTcpMs);
  if (sys::real().shutdown(fd, how) != 0) return R::fail(errno);
  if (kernel_only()) return R::ok(true);
  note_route_changed();  // readiness changes with no fd to say so
  if (how == SHUT_RD || how == SHUT_RDWR) read_shut_ = true;
  if (how == SHUT_WR || how == SHUT_RDWR) {
    write_shut_ = true;
    if (writer_.switched() && channel_) channel_->shutdown_write();
    // A client that has not switched yet never will (no token can follow
    // the FIN): on TCP for good, rather than a Switch the server refuses.
    else apply(upgrade_.on(UpgradeEvent::kWriteShut));
  }
  return R::ok(true);
}

core::Result<int> StreamSocket::readable_bytes(int fd) {
  claim_if_awaited(fd);
  using R = core::Result<int>;
  StreamLock held = lock_call();
  progress_locked(fd);
  if (resuming_ && reader_.tcp_again()) take_resume_record(fd);
  if (reader_.token_due()) check_token_locked(fd);
  int kernel = 0;
  if (!reader_.on_ring() && sys::real().ioctl(fd, FIONREAD, &kernel) != 0) return R::fail(errno);
  // Those bytes may hold the client's token only if its Switch came since (§2).
  if (switch_came_since_look_locked()) {
    held.unlock();
    return readable_bytes(fd);
  }
  if (kernel_only()) return R::ok(kernel);
  // The peer's Resume record is no data: only the TCP part before it is.
  if (resuming_ && reader_.switch_known() && static_cast<uint64_t>(kernel) > reader_.tcp_remaining())
    kernel = static_cast<int>(reader_.tcp_remaining());
  uint64_t ring = channel_ && channel_->started() ? channel_->readable_bytes() : 0;
  core::Result<uint64_t> total = reader_.readable_bytes(static_cast<uint64_t>(kernel), ring);
  if (!total) return R::ok(kernel);
  return R::ok(total.value() > INT32_MAX ? INT32_MAX : static_cast<int>(total.value()));
}

// SO_RCVLOWAT as the kernel's poll applies it: data counts once there are
// that many bytes; the end of the stream and an error always do.
bool StreamSocket::ring_readable() const {
  if (!channel_ || !channel_->readable()) return false;
  const int low_water = receive_low_water_.load(std::memory_order_relaxed);
  return low_water <= 1 || channel_->readable_bytes() >= static_cast<size_t>(low_water) ||
         channel_->peer_finished() || channel_->error() != 0;
}

short StreamSocket::poll_events(int fd, short events, Look look) {
  claim_if_awaited(fd);
  StreamLock held = lock_call();
  last_fd_ = fd;
  if (last_look_holds_locked(fd, events)) {
    last_look_.takes = mu_.takes();
    return last_look_.ready;
  }
  last_look_.reusable = false;
  // Events of the completion channel a sleeper woke for (non-blocking).
  if (channel_ && !kernel_only()) note_wake_events_taken(channel_->drain_events().value_or(0));
  progress_locked(fd);
  if (resuming_ && reader_.tcp_again()) take_resume_record(fd);
  if (reader_.token_due()) check_token_locked(fd);
  bool look_again = false;
  const short ready = readiness_locked(fd, events, &look_again);
  if (!look_again) {
    last_look_ = LastLook{mu_.takes(), fd, events, ready, receive_low_water_.load(std::memory_order_relaxed),
                          look_reusable_locked(events)};
    return ready;
  }
  held.unlock();
  return poll_events(fd, events, look);
}

bool StreamSocket::last_look_holds_locked(int fd, short events) {
  // SO_RCVLOWAT and the way to the kernel are set without the lock.
  if (!last_look_.reusable || last_look_.fd != fd || last_look_.events != events ||
      mu_.takes() != last_look_.takes + 1 || kernel_only() ||
      last_look_.low_water != receive_low_water_.load(std::memory_order_relaxed))
    return false;
  // A sleeper armed the CQ since: its event is the full look's to drain.
  if (channel_->event_may_wait()) return false;
  return channel_->take_completions() == 0;
}

bool StreamSocket::look_reusable_locked(short events) const {
  // No TCP path to ask (readiness_locked's need_kernel), nothing held for a
  // deadline (writes_held, the token) and nothing progress() would post.
  return on_ring_for_good_locked() && reader_.on_ring() && !writes_to_kernel() && !(events & POLLPRI) &&
         !token_owed_ && !reader_.token_due() && resend_.empty() && error_locked() == 0 &&
         !channel_->sends_pending();
}

short StreamSocket::ready_now(int fd, short events) {
  StreamLock held = lock_call();
  bool look_again = false;
  const short ready = readiness_locked(fd, events, &look_again);
  return look_again ? events : ready;
}

short StreamSocket::readiness_locked(int fd, short events, bool* look_again) {
  pollfd kernel{fd, static_cast<short>(POLLIN | POLLOUT | POLLRDHUP | POLLPRI), 0};
  bool need_kernel = kernel_only() || !reader_.on_ring() || writes_to_kernel() || (events & POLLPRI);
  if (need_kernel && sys::real().poll(&kernel, 1, 0) < 0) kernel.revents = POLLERR;
  // The kernel's bytes may be the client's token only if its Switch came
  // since (§2): then look again.
  if (need_kernel && switch_came_since_look_locked()) {
    *look_again = true;
    return 0;
  }
  if (kernel_only()) return static_cast<short>(kernel.revents & (events | POLLERR | POLLHUP | POLLNVAL));
  // A TCP connection broken while our stream still reads there (its bytes
  // up to the switch point, or the peer's Switch still to come) is the
  // connection's reset, as take_so_error and recv find it: e.g. a server
  // that closed with unread TCP bytes before its upgrade was committed.
  if (need_kernel && (kernel.revents & POLLERR) && upgrade_.committed() && !reader_.on_ring() && error_locked() == 0)
    apply(upgrade_.on(UpgradeEvent::kTcpReset));
  short ready = static_cast<short>(kernel.revents & POLLPRI);  // urgent data is TCP's (send_urgent)
  // As the kernel after a reset: readable (data, the error, then end of
  // stream), writable (EPIPE), hung up; POLLERR until the error is reported.
  if (error_locked() != 0) {
    ready |= POLLIN | POLLOUT | POLLHUP | POLLRDHUP;
    if (!error_reported_) ready |= POLLERR;
    return static_cast<short>(ready & (events | POLLERR | POLLHUP));
  }
  const bool tcp_eof = (kernel.revents & POLLRDHUP) != 0;
  bool peer_done = false;
  if (reader_.on_ring()) {
    if (ring_readable()) ready |= POLLIN;
    peer_done = channel_->peer_finished();
  } else if (tcp_eof && switch_may_come()) {
    // The end on TCP may be the switch point: wait for the channel.
  } else if (resuming_ && reader_.tcp_again()) {
    // TCP holds the peer's Resume record (or nothing yet), no data.
  } else {
    // (At the switch point with the token to come, the kernel's bytes are
    // the token's, no data.)
    if (!reader_.token_due()) ready |= static_cast<short>(kernel.revents & POLLIN);
    // TCP bytes up to the switch point, then the ring: readable if the
    // TCP part is all there and the ring has more.
    if (!(ready & POLLIN) && reader_.switch_known() && !reader_.token_pending() && reader_.tcp_remaining() == 0 &&
        ring_readable())
      ready |= POLLIN;
    peer_done = tcp_eof && !switch_may_come();
  }
  if (read_shut_) ready |= POLLIN | POLLRDHUP;  // as the kernel after our own SHUT_RD
  if (peer_done) ready |= POLLIN | POLLRDHUP;
  // Not writable before the upgrade settled (hold_writes_until_settled).
  const bool writable = writes_to_kernel() ? (kernel.revents & POLLOUT) != 0 && !resend_pending()
                                           : (channel_ && channel_->writable());
  if (writable && !writes_held(fd)) ready |= POLLOUT;
  // Writing to a peer that closed: its RST is the kernel socket's news.
  if (peer_closed_ring()) ready |= static_cast<short>(kernel.revents & (POLLERR | POLLHUP));
  // POLLHUP once both directions are shut, the reading one by the peer's
  // FIN or by our own SHUT_RD (the kernel's sk_shutdown == SHUTDOWN_MASK).
  if ((peer_done || read_shut_) && write_shut_) ready |= POLLHUP;
  // Until a byte can be in a ring, the kernel's errors are the socket's
  // (e.g. a refused non-blocking connect).
  if (!upgrade_.committed()) ready |= static_cast<short>(kernel.revents & (POLLERR | POLLHUP));
  return static_cast<short>(ready & (events | POLLHUP | POLLERR));
}

}  // namespace vsock::sock
