// StreamSocket: going back to TCP (docs/protocol.md §5). A socket whose
// connection is handed to another process (fork, vfork, SCM_RIGHTS) posts
// a Revert and leaves the socket to the kernel; its peer reads its ring up
// to the Revert's count, writes on TCP again what the reverting side had
// not consumed, and leaves the socket to the kernel too.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <new>

#include "core/clock.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "sock/stream/stream_socket.hpp"
#include "sock/wire/revert_message.hpp"
#include "sys/real_calls.hpp"

namespace vsock::sock {

// ------------------------------------------------------ the handing side --

bool StreamSocket::revert_begin(int fd) {
  if (kernel_only()) return false;
  // Not upgrading anywhere yet: whichever process uses it first claims it
  // (a server socket still waiting for its request goes up for claim too;
  // the engine answers no request for a socket that awaits its claim).
  if (awaiting_claim_.load(std::memory_order_acquire)) return false;
  if (goes_up_for_claim_locked()) {
    awaiting_claim_.store(true, std::memory_order_release);
    VSOCK_LOG(kDebug, "fd %d: handed over before its upgrade began: the process that uses it claims it", fd);
    return false;
  }
  last_fd_ = fd;
  progress_locked();  // a Revert of the peer's may be waiting: then we answer it
  if (kernel_only()) return false;
  if (resuming_ && !take_resume_record(fd) && error_ == 0) {
    // Going on over TCP after RDMA failed, and the peer's record or our
    // ring part is not taken yet: another process cannot take them over.
    reset_tcp(fd, "handed to another process while resuming on TCP");
    become_kernel_only();
    return false;
  }
  // Nothing of ours can be in a ring, and the peer cannot have committed:
  // a client before its Switch, a server before its Bound. Falling back
  // tears the attempt down and the peer falls back too.
  const bool client = upgrade_.role() == UpgradeRole::kClient;
  const bool may_be_in_ring = client ? upgrade_.switch_sent() : upgrade_.cm_established();
  if (!may_be_in_ring || !channel_ || error_ != 0 || upgrade_.phase() == UpgradePhase::kFailed) {
    if (may_be_in_ring) reset_tcp(fd, "the connection was reset before it was handed over");
    VSOCK_LOG(kDebug, "fd %d: handed to another process before the switch: stays on TCP", fd);
    if (!may_be_in_ring) core::stat_add(core::Stat::fallback_declined);
    become_kernel_only();
    return false;
  }
  if (reader_.token_pending()) {
    // The server, before the client's token came (§2): it is behind the
    // TCP part in the kernel's stream, where the other process would read
    // it as data. Found now, the switch counts; refused, all is TCP's; due
    // and on its way, revert_finish() waits for it (bounded).
    check_token_locked(fd);
    if (kernel_only()) return false;
    if (reader_.token_pending() && !reader_.token_due()) {
      reset_tcp(fd, "handed to another process before the client's token came");
      become_kernel_only();
      return false;
    }
  }
  if (peer_reverted_ && reader_.ring_left() == 0) return false;  // the peer's Revert came first and is read
  // Everything write() took goes into the ring before the Revert: its
  // count is final then. (Bounded: the handoff's deadline.)
  if (!writer_.reverted()) {
    channel_->flush();
    if (channel_->unposted_bytes() > 0 || channel_->error() != 0) {
      reset_tcp(fd, "data could not be posted before the handover");
      become_kernel_only();
      return false;
    }
  }
  wire::RevertMessage message;
  message.nonce = nonce_;
  message.ring_written = writer_.switched() ? channel_->ring_written() : 0;
  message.ring_consumed = reader_.switch_known() ? channel_->ring_consumed() : 0;
  uint8_t bytes[wire::kRevertMessageSize];
  wire::encode(message, bytes);
  if (!channel_->send_message(bytes, sizeof bytes)) {
    reset_tcp(fd, "the Revert could not be posted");
    become_kernel_only();
    return false;
  }
  channel_->stop_sending();
  if (!writer_.reverted()) writer_.revert();
  revert_posted_ = true;
  core::stat_add(core::Stat::reverts_sent);
  if (handback_at_close_) core::stat_add(core::Stat::close_handbacks);
  VSOCK_LOG(kDebug, "fd %d: handed to another process: Revert (ring bytes written %llu, consumed %llu)", fd,
            static_cast<unsigned long long>(message.ring_written),
            static_cast<unsigned long long>(message.ring_consumed));
  return true;
}

bool StreamSocket::revert_pending() const {
  return revert_posted_ && !kernel_only() && channel_ && channel_->error() == 0 && !channel_->message_delivered();
}

void StreamSocket::revert_poll() {
  if (!channel_ || kernel_only()) return;
  channel_->progress();
  take_peer_messages();
}

void StreamSocket::revert_finish(int fd, int64_t deadline_ms) {
  if (kernel_only() || awaiting_claim_.load(std::memory_order_acquire)) return;  // nothing began here
  if (revert_posted_ && channel_) {
    const bool delivered = channel_->message_delivered();
    // Nothing arrives any more: a Revert of the peer's that is not in the
    // queue now was not acknowledged either, so its sender resets.
    channel_->queue_pair().to_error();
    for (int round = 0; round < 64; ++round) {
      core::Result<int> taken = channel_->progress();
      take_peer_messages();
      if (!taken || taken.value() == 0) break;
    }
    if (!delivered) {
      reset_tcp(fd, "the Revert was not acknowledged");
      become_kernel_only();
      return;
    }
  }
  // The server: a client Switch that crossed our Revert (taken above) has
  // its token behind the TCP part (§2), where the other process would read
  // it as data. Taken out if it is next; else the stream cannot be handed
  // over whole.
  while (reader_.token_due() && !kernel_only() && core::monotonic_ms() < deadline_ms) {
    check_token_locked(fd);
    if (!reader_.token_due() || kernel_only()) break;
    pollfd pfd{fd, POLLIN, 0};
    sys::real().poll(&pfd, 1, 10);
  }
  if (kernel_only()) return;  // refused: the stream was TCP's alone
  if (reader_.token_pending()) {
    reset_tcp(fd, "handed to another process before the client's token came");
    become_kernel_only();
    return;
  }
  // Our token (the client's, §2) comes right after our TCP part, before
  // anything else on TCP.
  wait_for_token_locked(nullptr, deadline_ms);
  if (token_owed_) {
    reset_tcp(fd, "the token could not be written before the handover");
    become_kernel_only();
    return;
  }
  // What the peer gave up (its crossing Revert, or one taken earlier) goes
  // on TCP before anything this process or the other writes.
  flush_resend_locked();
  while (resend_pending() && core::monotonic_ms() < deadline_ms) {
    pollfd pfd{resend_fd_, POLLOUT, 0};
    sys::real().poll(&pfd, 1, static_cast<int>(deadline_ms - core::monotonic_ms()));
    flush_resend_locked();
  }
  if (resend_pending()) {
    reset_tcp(fd, "the bytes the peer gave up could not be written in time");
  } else if (peer_reverted_ && !revert_posted_ && reader_.ring_left() != 0) {
    reset_tcp(fd, "unread ring bytes of a peer that already went back to TCP");
  }
  if (resend_fd_ >= 0) {
    sys::real().close(resend_fd_);
    resend_fd_ = -1;
  }
  resend_.clear();
  become_kernel_only();
}

bool StreamSocket::goes_up_for_claim_locked() const {
  return upgrade_.role() == UpgradeRole::kServer && upgrade_.phase() == UpgradePhase::kKernel && !channel_ &&
         rendezvous_;
}

void StreamSocket::forget_parent_objects() {
  // Leaked on purpose: destroying them would act on the parent's queue
  // pair, rings and rdma_cm id through the inherited verbs and cm fds.
  (void)channel_.release();
  new (&connection_) rdma::CmConnection();
  new (&connector_) rdma::CmConnector();
}

void StreamSocket::abandon_in_child() {
  if (awaiting_claim_.load(std::memory_order_acquire)) return;  // nothing of the parent's to forget
  forget_parent_objects();
  kernel_only_.store(true, std::memory_order_release);
  note_route_changed();
}

void StreamSocket::reset_tcp(int fd, const char* why) {
  VSOCK_LOG(kInfo, "fd %d: connection reset: %s", fd, why);
  core::stat_add(core::Stat::upgrade_resets);
  // connect(AF_UNSPEC) disconnects a TCP socket: RST to the peer, and
  // ECONNRESET here, for every process that shares the socket.
  sockaddr unspec{};
  unspec.sa_family = AF_UNSPEC;
  sys::real().connect(fd, &unspec, sizeof unspec);
}

// --------------------------------------------------------- the peer side --

void StreamSocket::take_peer_revert(const uint8_t* bytes, size_t length) {
  core::Result<wire::RevertMessage> parsed = wire::parse_revert_message(bytes, length);
  if (!parsed || parsed.value().nonce != nonce_ || peer_reverted_) {
    apply(upgrade_.on(UpgradeEvent::kProtocolError));
    return;
  }
  const wire::RevertMessage& message = parsed.value();
  // Our direction: what the peer's application had not consumed is in its
  // ring, which it gave up: write it again on TCP, then go on there.
  if (writer_.switched() && channel_) {
    core::Result<size_t> unsent = channel_->stop_writing(message.ring_consumed, &resend_);
    if (!unsent) {
      apply(upgrade_.on(UpgradeEvent::kProtocolError));
      return;
    }
  } else if (message.ring_consumed != 0) {
    apply(upgrade_.on(UpgradeEvent::kProtocolError));
    return;
  }
  if (!writer_.reverted()) writer_.revert();
  if (channel_) channel_->stop_sending();
  // The peer's direction: our ring up to its count, then TCP. (After our
  // own Revert we read TCP only: the peer writes again what we left.)
  if (!revert_posted_ && !reader_.on_revert(message.ring_written)) {
    apply(upgrade_.on(UpgradeEvent::kProtocolError));
    return;
  }
  peer_reverted_ = true;
  core::stat_add(core::Stat::reverts_received);
  VSOCK_LOG(kDebug, "fd %d: the peer went back to TCP: ring part %llu bytes left, %zu bytes to write again",
            fd_hint_, static_cast<unsigned long long>(revert_posted_ ? 0 : reader_.ring_left()), resend_.size());
  notify();
}

void StreamSocket::flush_resend_locked() {
  if (kernel_only()) return;
  if (resend_done_ < resend_.size()) {
    if (resend_fd_ < 0) {
      // Our own reference: the application may close its fd before the
      // kernel took everything (and the FIN must come after it).
      resend_fd_ = dup_own_fd();
      if (resend_fd_ < 0) return;  // no fd of ours is open now: the next call brings one
    }
    while (resend_done_ < resend_.size()) {
      ssize_t n = sys::real().send(resend_fd_, resend_.data() + resend_done_, resend_.size() - resend_done_,
                                   MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n <= 0) {
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
          // The connection is gone: so are the bytes, as the kernel's
          // would be.
          resend_.clear();
          resend_done_ = 0;
        }
        break;
      }
      resend_done_ += static_cast<size_t>(n);
      core::stat_transfer(core::Stat::tcp_bytes_sent, core::Stat::tcp_sends, static_cast<uint64_t>(n));
    }
    if (resend_done_ < resend_.size()) return;
  }
  resend_.clear();
  resend_done_ = 0;
  if (resend_fd_ >= 0) {
    if (resend_shut_wr_) sys::real().shutdown(resend_fd_, SHUT_WR);
    sys::real().close(resend_fd_);
    resend_fd_ = -1;
  }
  finish_peer_revert_locked();
}

void StreamSocket::set_fd_hint(int fd) {
  fd_hint_ = fd;
  // One kernel socket for the stream's whole life: its inode is asked once.
  struct stat st {};
  if (inode_ == 0 && ::fstat(fd, &st) == 0) inode_ = st.st_ino;
}

int StreamSocket::dup_own_fd(int candidate) const {
  // After the application's close, only our own dups are left.
  for (int fd : {close_fd_, token_fd_, last_fd_, fd_hint_, candidate}) {
    if (fd < 0 || inode_ == 0) continue;
    int copy = sys::real().fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) continue;
    struct stat st {};
    if (::fstat(copy, &st) == 0 && st.st_ino == inode_) return copy;
    sys::real().close(copy);
  }
  return -1;
}

void StreamSocket::finish_peer_revert_locked() {
  // Both directions are plain TCP once the ring part is read and the
  // bytes the peer gave up are written: the kernel serves the socket.
  if (!peer_reverted_ || revert_posted_ || resend_pending() || resuming_ || reader_.ring_left() != 0) return;
  VSOCK_LOG(kDebug, "fd %d: back on TCP", fd_hint_);
  become_kernel_only();
  notify();
}

}  // namespace vsock::sock
