// StreamSocket: carrying on over TCP when RDMA fails under a switched
// connection (docs/protocol.md §5.1). After the Switch no application byte
// travels on the kernel TCP socket, so the library owns that stream: each
// side whose queue pair fails writes a Resume record there, then again
// every byte of its direction the peer may not have received (from the
// peer's last credit on: the send buffer still holds them), then goes on
// writing on TCP. It reads its ring up to what arrived, then TCP: the
// peer's record, the bytes it resent that the ring already had (skipped),
// and the rest. The application sees nothing. A peer whose process is gone
// shows up on TCP as the kernel shows it (end of file or a reset), so only
// that ends the connection.
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "core/log.hpp"
#include "core/stats.hpp"
#include "sock/stream/stream_socket.hpp"
#include "sock/upgrade/failed_paths.hpp"
#include "sock/wire/message_header.hpp"
#include "sock/wire/resume_record.hpp"
#include "sys/real_calls.hpp"

namespace vsock::sock {

bool StreamSocket::resume_on_tcp() {
  if (resuming_) return true;
  if (!channel_ || kernel_only() || error_ != 0 || peer_reverted_ || revert_posted_) return false;
  if (!channel_->failed_resumably() || !channel_->started()) return false;
  // Both directions on rings: each side knows where its TCP part ends.
  if (!writer_.switched() || writer_.reverted() || !reader_.switch_known()) return false;
  // Nothing is left to carry on when both directions ended on the ring
  // (the peer's FIN came, ours was acknowledged), or when the peer closed
  // its socket (its FIN, then CLOSED: it reads nothing more, and its
  // process may be gone): reads see the end, writes fail, as after the
  // kernel's close. A half-closed connection (a FIN without CLOSED)
  // resumes like an open one: the side that shut down writes its record,
  // what the peer had not credited, and then the kernel's FIN; the side
  // that got that FIN on the ring reads the record and the end on TCP.
  // Each side decides alone, and a FIN that one side saw and the other did
  // not (its completion came after the failure) must not make them
  // disagree, so neither skips the exchange for a FIN alone.
  if (channel_->peer_finished() && (channel_->peer_closed() || (channel_->write_shut() && channel_->all_sent())))
    return false;
  // The peer's direction: our ring up to what arrived, then TCP.
  const uint64_t received = channel_->ring_received();
  if (!reader_.on_revert(received)) return false;
  // Ours: the record, then every byte from the peer's last credit on.
  wire::ResumeRecord record;
  record.nonce = nonce_;
  record.resend_from = channel_->ring_credited();
  record.ring_written = channel_->ring_written() + channel_->unposted_bytes();
  resend_.resize(wire::kResumeRecordSize);
  resend_done_ = 0;
  wire::encode(record, resend_.data());
  core::Result<size_t> resent = channel_->stop_writing(record.resend_from, &resend_);
  if (!resent) {  // cannot happen: the credited position is always held
    resend_.clear();
    return false;
  }
  writer_.revert();
  peer_reverted_ = true;
  resuming_ = true;
  note_route_changed();
  resumed_ = true;
  resume_peer_unread_ = resent.value() > 0;
  resend_shut_wr_ = write_shut_;  // the kernel's FIN after what we resend
  core::stat_add(core::Stat::stream_resumes);
  note_peer_path_failed();
  VSOCK_LOG(kInfo, "fd %d: RDMA failed (%s): the connection goes on over TCP (%llu ring bytes to read, %zu to resend)",
            fd_hint_, channel_->failure(), static_cast<unsigned long long>(reader_.ring_left()), resent.value());
  flush_resend_locked();
  notify();
  return true;
}

void StreamSocket::look_for_peer_resume(int fd) {
  if (tcp_closed_under_rings_ || resuming_ || !channel_ || kernel_only() || error_ != 0) return;
  if (channel_->error() != 0 || !writer_.switched() || writer_.reverted() || !reader_.on_ring()) return;
  pollfd tcp{fd, POLLIN | POLLRDHUP, 0};
  if (sys::real().poll(&tcp, 1, 0) <= 0) return;
  // The peer's kernel ended TCP with nothing before the end: its process
  // closed the socket (the ring carries its FIN) or died (its queue pair
  // went with it, which a probe finds). Nothing more to look for here, and
  // a level-triggered end would be seen on every look. A reset is not
  // peeked at: that would take its error from the socket.
  if ((tcp.revents & POLLERR) != 0 || ((tcp.revents & POLLIN) == 0 && (tcp.revents & (POLLRDHUP | POLLHUP)) != 0)) {
    tcp_closed_under_rings_ = true;
    return;
  }
  if ((tcp.revents & POLLIN) == 0) return;
  // Peeked, never read: resume_on_tcp()'s reader takes the record later.
  uint8_t head[wire::kMessageHeaderSize];
  ssize_t n = sys::real().recv(fd, head, sizeof head, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) tcp_closed_under_rings_ = true;
  if (n < static_cast<ssize_t>(sizeof head) || !wire::begins_resume_record(head, sizeof head, nonce_)) return;
  // What arrived on the ring before the peer's failure is taken first.
  channel_->progress();
  channel_->fail_transport("the peer resumed on TCP");
  advance();
}

void StreamSocket::note_peer_path_failed() const {
  int own = dup_own_fd();
  if (own < 0) return;
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  if (sys::real().getpeername(own, reinterpret_cast<sockaddr*>(&peer), &len) == 0)
    note_failed_path(reinterpret_cast<sockaddr*>(&peer), len);
  sys::real().close(own);
}

core::Result<bool> StreamSocket::take_resume_record(int fd) {
  using R = core::Result<bool>;
  if (!resuming_) return R::ok(true);
  if (!reader_.tcp_again()) return R::fail(EAGAIN);  // the TCP and ring parts come first
  while (resume_have_ < wire::kResumeRecordSize) {
    ssize_t n = sys::real().recv(fd, resume_in_ + resume_have_, wire::kResumeRecordSize - resume_have_, MSG_DONTWAIT);
    if (n > 0) {
      resume_have_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return R::fail(EAGAIN);
    if ((n == 0 || (n < 0 && errno == ECONNRESET)) && resume_have_ == 0) {
      // The peer's process is gone (its kernel closed the socket, or reset
      // it when our record came) without a record. After its FIN on the
      // ring that is the orderly end it was: its stream is whole. Else the
      // kernel shows a dead peer's close as a reset when it had unread
      // data, and as the end of the stream otherwise: here that data is
      // what it had not credited.
      if (resume_peer_unread_ && !channel_->peer_finished())
        return lose_resume(ECONNRESET, "the peer's process went with our bytes unread");
      VSOCK_LOG(kDebug, "fd %d: resuming: the peer closed TCP without a record", fd_hint_);
      resuming_ = false;
      finish_peer_revert_locked();
      return R::ok(true);
    }
    return lose_resume(n < 0 ? errno : ECONNRESET, "the peer's TCP ended inside its Resume record");
  }
  if (!resume_skip_known_) {
    core::Result<wire::ResumeRecord> parsed = wire::parse_resume_record(resume_in_, resume_have_);
    const uint64_t received = reader_.ring_read();  // the ring part, all read by now
    if (!parsed || parsed.value().nonce != nonce_ || parsed.value().resend_from > received ||
        received > parsed.value().ring_written) {
      core::stat_add(core::Stat::stream_violations);
      return lose_resume(EPROTO, "a bad Resume record on TCP");
    }
    resume_skip_ = received - parsed.value().resend_from;
    resume_skip_known_ = true;
    VSOCK_LOG(kDebug, "fd %d: the peer's Resume record: resend from %llu, ring written %llu; our ring had %llu",
              fd_hint_, static_cast<unsigned long long>(parsed.value().resend_from),
              static_cast<unsigned long long>(parsed.value().ring_written), static_cast<unsigned long long>(received));
  }
  // What the peer resent that our ring had already: discarded unread.
  while (resume_skip_ > 0) {
    ssize_t n = sys::real().recv(fd, nullptr, resume_skip_, MSG_TRUNC | MSG_DONTWAIT);
    if (n > 0) {
      resume_skip_ -= static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return R::fail(EAGAIN);
    return lose_resume(n < 0 ? errno : ECONNRESET, "the peer's TCP ended inside the bytes it resent");
  }
  resuming_ = false;
  VSOCK_LOG(kDebug, "fd %d: resumed on TCP", fd_hint_);
  finish_peer_revert_locked();
  return R::ok(true);
}

bool StreamSocket::resume_settled_locked() {
  flush_resend_locked();
  if (resuming_ && reader_.tcp_again()) {
    int own = dup_own_fd();
    if (own >= 0) {
      take_resume_record(own);
      sys::real().close(own);
    }
  }
  return !resuming_ && !resend_pending();
}

core::Result<bool> StreamSocket::lose_resume(int error, const char* why) {
  resuming_ = false;
  reset_connection(error == EPROTO ? EPROTO : ECONNRESET, why);
  return core::Result<bool>::fail(error_);
}

}  // namespace vsock::sock
