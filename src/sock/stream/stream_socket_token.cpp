// StreamSocket: the token that binds the queue pair to the TCP connection
// (docs/protocol.md §2, "Who may switch"). The server chose it and sent it
// in Bound; the client writes it on TCP right after its switch point once
// its Switch is delivered. The server takes nothing from the queue pair —
// ring data, FIN, a Revert — and sends no Switch of its own until it has
// read the token there: nobody but the TCP connection's client can write
// into that stream, so a request forged for somebody else's connection
// (its 4-tuple is no secret on the client's host) gets nowhere, and the
// connection goes on on TCP, every byte of it the real client's.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/clock.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "sock/stream/stream_socket.hpp"
#include "sys/real_calls.hpp"

namespace vsock::sock {

StreamSocket::TcpAtSwitchPoint StreamSocket::peek_switch_point_locked(int fd) {
  uint8_t seen[wire::kSwitchTokenSize];
  const ssize_t n = sys::real().recv(fd, seen, sizeof seen, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0) return errno == EAGAIN || errno == EINTR ? TcpAtSwitchPoint::kNothingYet : TcpAtSwitchPoint::kError;
  // Our application's own SHUT_RD, not the client's end: the kernel reads
  // 0 from an empty queue then, yet still queues what comes, and the token
  // may be on its way.
  if (n == 0) return read_shut_ ? TcpAtSwitchPoint::kNothingYet : TcpAtSwitchPoint::kEnd;
  if (std::memcmp(seen, token_, static_cast<size_t>(n)) != 0) return TcpAtSwitchPoint::kOtherBytes;
  // (A prefix: the rest is on its way. The client's own bytes match a
  // prefix of n random bytes once in 2^(8n): that connection waits for its
  // next bytes, never misreads one.)
  return static_cast<size_t>(n) == sizeof seen ? TcpAtSwitchPoint::kToken : TcpAtSwitchPoint::kTokenPrefix;
}

void StreamSocket::check_token_locked(int fd) {
  if (kernel_only() || !reader_.token_due()) return;
  int own = -1;
  if (fd < 0) {
    own = dup_own_fd();
    if (own < 0) return;  // no fd of ours is open now: the next call brings one
    fd = own;
  }
  const TcpAtSwitchPoint seen = peek_switch_point_locked(fd);
  bool found = false;
  if (seen == TcpAtSwitchPoint::kToken) {
    // Peeked whole: the same bytes are there to take.
    uint8_t token[wire::kSwitchTokenSize];
    found = sys::real().recv(fd, token, sizeof token, MSG_DONTWAIT) == static_cast<ssize_t>(sizeof token);
  }
  if (own >= 0) sys::real().close(own);
  // Not yet: the engine's deadline bounds the wait.
  if (seen == TcpAtSwitchPoint::kNothingYet || seen == TcpAtSwitchPoint::kTokenPrefix) return;
  if (!found) {
    refuse_switch_locked(seen == TcpAtSwitchPoint::kEnd ? "TCP ended where its token should be"
                                                         : "no token at its switch point");
    return;
  }
  reader_.on_token();
  token_guard_ = false;
  VSOCK_LOG(kDebug, "fd %d: the client's token came on TCP after %llu bytes", fd_hint_,
            static_cast<unsigned long long>(reader_.switch_count()));
  // The Switch counts now: ours goes out (onto a failed queue pair, the
  // state machine resets: the client's direction was on the ring).
  apply(upgrade_.on(UpgradeEvent::kSwitchReceived));
  if (!held_revert_.empty() && !kernel_only()) {
    std::vector<uint8_t> revert;
    revert.swap(held_revert_);
    take_peer_revert(revert.data(), revert.size());
  }
}

void StreamSocket::refuse_switch_locked(const char* why) {
  core::stat_add(core::Stat::upgrade_tokens_refused);
  VSOCK_LOG(kWarn, "fd %d: a Switch that is not the TCP client's (%s): dropped, the connection stays on TCP",
            fd_hint_, why);
  if (reader_.token_pending()) reader_.forget_switch();
  token_guard_ = false;
  held_revert_.clear();
  // Nothing of the queue pair was taken and ours never switched: a
  // fallback, not a reset (the TCP connection is not the forger's to end).
  apply(upgrade_.on(UpgradeEvent::kTransportError));
}

bool StreamSocket::switch_came_since_look_locked() {
  if (!token_guard_ || reader_.switch_known() || kernel_only() || !channel_) return false;
  progress_locked();
  return reader_.switch_known() || kernel_only();
}

bool StreamSocket::flush_token_locked(int fd) {
  if (!token_owed_) return true;
  if (!channel_ || kernel_only()) {
    token_owed_ = false;
    return true;
  }
  if (!channel_->message_delivered()) {
    // A Switch that failed was perhaps never the server's: no token then,
    // and the server finds none at the count (§2).
    if (channel_->error() != 0) token_owed_ = false;
    return !token_owed_;
  }
  // The call's own fd while it lasts; a dup of ours once the token must
  // wait for room (the application may close its fd first).
  if (token_fd_ < 0 && fd < 0) {
    token_fd_ = dup_own_fd();
    if (token_fd_ < 0) return false;
  }
  const int out = token_fd_ >= 0 ? token_fd_ : fd;
  while (token_sent_ < sizeof token_) {
    ssize_t n = sys::real().send(out, token_ + token_sent_, sizeof token_ - token_sent_, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      token_sent_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (token_fd_ < 0) token_fd_ = dup_own_fd(fd);
      return false;
    }
    break;  // the connection is gone: so is the need
  }
  token_owed_ = false;
  if (token_fd_ >= 0) sys::real().close(token_fd_);
  token_fd_ = -1;
  return true;
}

void StreamSocket::wait_for_token_locked(StreamLock* held, int64_t deadline_ms) {
  for (;;) {
    if (!token_owed_ || !channel_ || kernel_only()) return;
    progress_locked();  // takes our Switch's completion, then writes the token (advance)
    flush_token_locked();
    if (!token_owed_ || !channel_ || kernel_only()) return;
    const int64_t left = deadline_ms - core::monotonic_ms();
    if (left <= 0) return;
    // Delivered (the token's fd is open): room on TCP is what is missing.
    // Else the Switch's completion: armed first, and a completion that came
    // before the arm is looked for (it would raise no event).
    const bool on_channel = token_fd_ < 0;
    if (on_channel) {
      channel_->arm();
      if (channel_->progress().value() > 0) continue;
    }
    pollfd pfd = on_channel ? pollfd{channel_->completion_fd(), POLLIN, 0} : pollfd{token_fd_, POLLOUT, 0};
    StreamChannel* channel = channel_.get();
    if (held != nullptr) held->unlock();
    sys::real().poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, kTokenPollSliceMs)));
    if (held != nullptr) relock(*held);
    if (on_channel && channel_.get() == channel && channel_ && (pfd.revents & POLLIN))
      note_wake_events_taken(channel_->take_event().value_or(0));
  }
}

}  // namespace vsock::sock
