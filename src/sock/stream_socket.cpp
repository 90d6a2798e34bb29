// StreamSocket: the upgrade's steps and the waits. The socket-shaped calls
// are in stream_socket_io.cpp.
#include "sock/stream_socket.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>

#include <cerrno>

#include "core/clock.hpp"
#include "core/config.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "sock/wire/switch_message.hpp"
#include "sys/real_calls.hpp"
#include "sys/reentry_guard.hpp"

namespace vsock::sock {
namespace {

// While the upgrade may still change what a socket's readiness means (and
// no fd would tell), sleepers look again this often.
constexpr int kTransitionSliceMs = 5;
// Otherwise they wake this often to let the channel probe an idle peer.
constexpr int kIdleSliceMs = 100;

void count_fallback(FallbackReason reason) {
  using core::Stat;
  switch (reason) {
    case FallbackReason::kNone: return;
    case FallbackReason::kDeclined: core::stat_add(Stat::fallback_declined); return;
    case FallbackReason::kRejected: core::stat_add(Stat::fallback_rejected); return;
    case FallbackReason::kNoListener: core::stat_add(Stat::fallback_no_listener); return;
    case FallbackReason::kUnreachable: core::stat_add(Stat::fallback_unreachable); return;
    case FallbackReason::kTimeout: core::stat_add(Stat::fallback_timeout); return;
    case FallbackReason::kLocalError: core::stat_add(Stat::fallback_local_error); return;
    case FallbackReason::kPeerClosed: core::stat_add(Stat::fallback_peer_closed); return;
    case FallbackReason::kTransportError: core::stat_add(Stat::fallback_transport_error); return;
  }
}

}  // namespace

StreamSocket::StreamSocket(UpgradeRole role, uint64_t nonce) : upgrade_(role), nonce_(nonce) {}

StreamSocket::~StreamSocket() = default;

void StreamSocket::release() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  sys::ReentryGuard guard;  // teardown calls into libibverbs and librdmacm
  delete this;
}

// ------------------------------------------------------------ the upgrade --

void StreamSocket::apply(UpgradeAction action) {
  switch (action) {
    case UpgradeAction::kNone:
      break;
    case UpgradeAction::kSendSwitch:
      send_switch();
      break;
    case UpgradeAction::kFallBack:
      VSOCK_LOG(kDebug, "fd %d: stays on TCP: %s", fd_hint_, upgrade_.why());
      count_fallback(upgrade_.fallback_reason());
      become_kernel_only();
      break;
    case UpgradeAction::kReset:
      reset_connection(upgrade_.error(), upgrade_.why());
      break;
  }
  if (!stats_counted_ && upgrade_.phase() == UpgradePhase::kSwitched) {
    stats_counted_ = true;
    core::stat_add(core::Stat::upgrades_done);
    VSOCK_LOG(kDebug, "fd %d: switched to RDMA (TCP bytes: %llu written, %llu to read)", fd_hint_,
              static_cast<unsigned long long>(writer_.tcp_written()),
              static_cast<unsigned long long>(reader_.switch_count()));
  }
  notify();
}

void StreamSocket::fall_back_now(FallbackReason reason, const char* why) {
  std::unique_lock<std::mutex> held(mu_);
  if (kernel_only()) return;
  // Only while nothing can be in a ring; later the state machine decides.
  if (upgrade_.committed()) return;
  VSOCK_LOG(kDebug, "fd %d: stays on TCP: %s", fd_hint_, why);
  count_fallback(reason);
  become_kernel_only();
  notify();
}

void StreamSocket::become_kernel_only() {
  // The connection goes first: it holds a borrowed handle on the channel's
  // queue pair.
  connection_ = rdma::CmConnection();
  connector_ = rdma::CmConnector();
  channel_.reset();
  kernel_only_.store(true, std::memory_order_release);
}

void StreamSocket::reset_connection(int error, const char* why) {
  if (error_ != 0) return;
  error_ = error != 0 ? error : ECONNRESET;
  core::stat_add(core::Stat::upgrade_resets);
  VSOCK_LOG(kInfo, "fd %d: connection reset: %s", fd_hint_, why);
  if (channel_) channel_->abort();
}

void StreamSocket::send_switch() {
  core::Result<uint64_t> count = writer_.switch_now();
  if (!count || !channel_) {
    reset_connection(EPROTO, "internal: switch without a channel");
    return;
  }
  wire::SwitchMessage message;
  message.nonce = nonce_;
  message.tcp_bytes = count.value();
  message.ring = channel_->local_ring();
  uint8_t bytes[wire::kSwitchMessageSize];
  wire::encode(message, bytes);
  if (!channel_->send_message(bytes, sizeof bytes)) {
    apply(upgrade_.on(UpgradeEvent::kTransportError));
    return;
  }
  apply(upgrade_.on(UpgradeEvent::kSwitchSent));
  if (write_shut_ && channel_) channel_->shutdown_write();
}

void StreamSocket::take_peer_switch() {
  uint8_t bytes[64];
  core::Result<size_t> length = channel_->take_message(bytes, sizeof bytes);
  if (!length) return;
  core::Result<wire::SwitchMessage> message = wire::parse_switch_message(bytes, length.value());
  if (!message || message.value().nonce != nonce_) {
    apply(upgrade_.on(UpgradeEvent::kProtocolError));
    return;
  }
  if (!channel_->started() && !channel_->start(message.value().ring)) {
    apply(upgrade_.on(UpgradeEvent::kProtocolError));
    return;
  }
  core::Result<bool> accepted = reader_.on_switch(message.value().tcp_bytes);
  if (!accepted) {
    apply(upgrade_.on(accepted.error() == ECONNRESET ? UpgradeEvent::kTcpReset : UpgradeEvent::kProtocolError));
    return;
  }
  apply(upgrade_.on(UpgradeEvent::kSwitchReceived));
}

void StreamSocket::advance() {
  if (!channel_ || kernel_only()) return;
  if (channel_->has_message()) take_peer_switch();
  // The peer ended in order before the channel failed: reads drain the ring
  // and see the end of stream (error_locked() agrees); writes fail.
  if (channel_ && channel_->error() != 0 && channel_->ended_in_order() && reader_.on_ring()) return;
  if (channel_ && channel_->error() != 0 && error_ == 0) {
    UpgradePhase phase = upgrade_.phase();
    if (phase != UpgradePhase::kFallback && phase != UpgradePhase::kFailed)
      apply(upgrade_.on(UpgradeEvent::kTransportError));
    else if (phase == UpgradePhase::kFailed)
      error_ = channel_->error();
  }
}

void StreamSocket::on_transport_lost() {
  if (kernel_only()) return;
  // The peer's last writes and its FIN may still wait in the completion
  // queue (a peer that closes and exits disconnects right after them):
  // take them before judging.
  if (channel_ && channel_->started() && channel_->error() == 0) channel_->progress();
  // After an orderly end (the peer's FIN came first) reads still see the
  // data and the end of stream; only a write finds the connection gone.
  if (channel_ && channel_->started() && channel_->peer_finished()) {
    if (channel_->error() == 0) channel_->abort();
    return;
  }
  apply(upgrade_.on(UpgradeEvent::kTransportError));
  if (channel_ && channel_->error() == 0) channel_->abort();
}

void StreamSocket::progress_locked() {
  if (!channel_ || kernel_only()) return;
  channel_->progress();
  advance();
}

int StreamSocket::error_locked() const {
  if (error_ != 0) return error_;
  if (upgrade_.phase() == UpgradePhase::kFailed) return upgrade_.error();
  if (reader_.on_ring() && writer_.switched() && channel_ && channel_->error() != 0 && !channel_->peer_finished())
    return channel_->error();
  return 0;
}

bool StreamSocket::switch_may_come() const {
  if (kernel_only() || upgrade_.switch_received()) return false;
  switch (upgrade_.phase()) {
    case UpgradePhase::kAccepting:
    case UpgradePhase::kEstablished:
      return upgrade_.role() == UpgradeRole::kServer || upgrade_.switch_sent();
    default:
      return false;
  }
}

void StreamSocket::wait_settled(int timeout_ms) {
  std::unique_lock<std::mutex> held(mu_);
  settled_.wait_for(held, std::chrono::milliseconds(timeout_ms),
                    [this] { return kernel_only() || upgrade_.phase() != UpgradePhase::kConnecting; });
}

// --------------------------------------------------------------- closing --

bool StreamSocket::on_last_close() {
  const bool abortive = abort_on_close_.load(std::memory_order_relaxed);
  std::unique_lock<std::mutex> held(mu_);
  closing_ = true;
  if (kernel_only()) return false;
  if (!upgrade_.committed() || !channel_) {
    // Nothing of ours can be in a ring: the kernel's close is the whole story.
    upgrade_.on(UpgradeEvent::kDeclined);
    become_kernel_only();
    return false;
  }
  progress_locked();
  // Unread data at close makes the kernel reset the connection; so do we.
  if (abortive || channel_->readable_bytes() > 0) {
    channel_->abort();
  } else {
    write_shut_ = true;
    if (writer_.switched()) channel_->shutdown_write();
  }
  return true;
}

void StreamSocket::finish_at_exit(int timeout_ms) {
  std::unique_lock<std::mutex> held(mu_);
  if (kernel_only() || !channel_ || !upgrade_.committed() || !writer_.switched()) return;
  channel_->shutdown_write();
  const int64_t deadline = core::monotonic_ms() + timeout_ms;
  while (channel_ && channel_->error() == 0 && !channel_->all_sent() && core::monotonic_ms() < deadline)
    progress_locked();
}

bool StreamSocket::close_finished() {
  std::unique_lock<std::mutex> held(mu_);
  if (kernel_only() || !channel_) return true;
  progress_locked();
  if (!channel_ || channel_->error() != 0) return true;
  if (!writer_.switched()) return false;  // the Switch is still due (the server's)
  return channel_->all_sent();
}

// ----------------------------------------------------------------- waiting --

uint64_t StreamSocket::activity() {
  std::unique_lock<std::mutex> held(mu_);
  uint64_t value = eagain_count_;
  if (channel_) value += channel_->counters().data_received + channel_->counters().credits_received +
                         channel_->counters().messages_received;
  return value;
}

int StreamSocket::wake_fds(int fd, short events, pollfd* out, int* slice_ms) {
  std::unique_lock<std::mutex> held(mu_);
  int n = 0;
  short tcp_events = 0;
  if ((events & POLLIN) && !reader_.on_ring()) tcp_events |= POLLIN;
  if ((events & POLLOUT) && writer_.tcp_allowed()) tcp_events |= POLLOUT;
  if (tcp_events != 0 || kernel_only()) out[n++] = pollfd{fd, static_cast<short>(tcp_events | POLLRDHUP), 0};
  bool pending = false;
  if (channel_ && !kernel_only()) {
    channel_->arm();
    // A completion already in the queue would not wake the fd.
    pending = channel_->progress().value() > 0;
    if (pending) advance();
    out[n++] = pollfd{channel_->completion_fd(), POLLIN, 0};
  }
  bool transitional = !kernel_only() && upgrade_.phase() != UpgradePhase::kSwitched &&
                      upgrade_.phase() != UpgradePhase::kFailed;
  *slice_ms = pending ? 0 : transitional ? kTransitionSliceMs : kIdleSliceMs;
  return n;
}

core::Result<bool> StreamSocket::wait(std::unique_lock<std::mutex>& held, int fd, WaitFor what, int64_t deadline_ms) {
  using R = core::Result<bool>;
  pollfd fds[2];
  int n = 0;
  bool tcp_wanted = what == WaitFor::kRead ? (!reader_.on_ring() && !reader_.tcp_ended()) || kernel_only()
                                           : writer_.tcp_allowed() || kernel_only();
  if (tcp_wanted) fds[n++] = pollfd{fd, static_cast<short>(what == WaitFor::kRead ? POLLIN : POLLOUT), 0};
  int channel_index = -1;
  StreamChannel* channel = kernel_only() ? nullptr : channel_.get();
  if (channel != nullptr && channel->started()) {
    // Spin first (the profile's budget): a reply that is microseconds away
    // is not worth a sleep and a wake-up.
    const int64_t spin_until = core::monotonic_us() + core::config().settings.spin_us;
    while (core::monotonic_us() < spin_until) {
      if (channel->progress().value() > 0) {
        advance();
        return R::ok(true);
      }
    }
  }
  if (channel != nullptr) {
    channel->arm();
    // A completion that came before the arm would not wake the fd.
    if (channel->progress().value() > 0) {
      advance();
      return R::ok(true);
    }
    channel_index = n;
    fds[n++] = pollfd{channel->completion_fd(), POLLIN, 0};
  }
  bool transitional = !kernel_only() && upgrade_.phase() != UpgradePhase::kSwitched;
  int slice = transitional ? kTransitionSliceMs : kIdleSliceMs;
  int64_t now = core::monotonic_ms();
  if (deadline_ms >= 0) {
    if (now >= deadline_ms) return R::fail(EAGAIN);
    if (deadline_ms - now < slice) slice = static_cast<int>(deadline_ms - now);
  }
  held.unlock();
  int rc = sys::real().poll(fds, static_cast<nfds_t>(n), slice);
  int saved = errno;
  held.lock();
  if (rc < 0 && saved == EINTR) return R::fail(EINTR);
  // The channel may have been replaced or dropped while we slept.
  if (channel_index >= 0 && channel == channel_.get() && channel_ && (fds[channel_index].revents & POLLIN))
    channel_->drain_events();
  if (rc == 0 && channel == channel_.get() && channel_) channel_->note_idle(slice);
  if (deadline_ms >= 0 && core::monotonic_ms() >= deadline_ms) return R::fail(EAGAIN);
  return R::ok(true);
}

}  // namespace vsock::sock
