// StreamSocket: the upgrade's steps and the waits. The socket-shaped calls
// are in stream_socket_io.cpp.
#include "sock/stream/stream_socket.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/clock.hpp"
#include "core/config.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "sock/wait/signal_restart.hpp"
#include "sock/wait/spin_budget.hpp"
#include "sock/wire/bound_message.hpp"
#include "sock/wire/byte_order.hpp"
#include "sock/wire/protocol.hpp"
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
// The last close() waits at most this long for its data and FIN to be
// acknowledged, and gives up sooner when no completion at all comes for
// kCloseStallMs (a peer that does not take them: the engine goes on).
constexpr int kCloseFlushMs = 2000;
constexpr int kCloseStallMs = 500;
// A flush looks again at least this often (another thread may take the
// completion event it sleeps on).
constexpr int kFlushSliceMs = 10;

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
    case FallbackReason::kRefused: core::stat_add(Stat::fallback_refused); return;
    case FallbackReason::kNoRequest: core::stat_add(Stat::fallback_no_request); return;
    case FallbackReason::kNoResources: core::stat_add(Stat::fallback_no_resources); return;
  }
}

std::atomic<StreamSocket::ClaimHandler> g_claim_handler{nullptr};

}  // namespace

void StreamSocket::set_claim_handler(ClaimHandler handler) { g_claim_handler.store(handler); }

void StreamSocket::claim_now(int fd) {
  if (!awaiting_claim_.exchange(false, std::memory_order_acq_rel)) return;  // another thread claimed it
  ClaimHandler handler = g_claim_handler.load();
  if (handler != nullptr) {
    sys::ReentryGuard guard;
    handler(this, fd);
  }
}

StreamSocket::StreamSocket(UpgradeRole role, uint64_t nonce) : upgrade_(role), nonce_(nonce) {}

StreamSocket::~StreamSocket() {
  if (resend_fd_ >= 0) sys::real().close(resend_fd_);
  if (token_fd_ >= 0) sys::real().close(token_fd_);
  if (close_fd_ >= 0) sys::real().close(close_fd_);
}

void StreamSocket::release() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  sys::ReentryGuard guard;  // teardown calls into libibverbs and librdmacm
  delete this;
}

// ------------------------------------------------------------ the upgrade --

void StreamSocket::apply(UpgradeAction action) {
  // At trace level each step of the upgrade is a line with its time: what
  // a connection's set-up spends where (docs/performance.md).
  VSOCK_LOG(kTrace, "fd %d: upgrade event %s, now %s", fd_hint_, event_name(upgrade_.last_event()),
            phase_name(upgrade_.phase()));
  switch (action) {
    case UpgradeAction::kNone:
      break;
    case UpgradeAction::kSendSwitch:
      if (!writer_.reverted()) send_switch();  // after a Revert the connection stays on TCP
      break;
    case UpgradeAction::kSendBound:
      send_bound();
      break;
    case UpgradeAction::kFallBack:
      VSOCK_LOG(kDebug, "fd %d: stays on TCP: %s", fd_hint_, upgrade_.why());
      count_fallback(upgrade_.fallback_reason());
      become_kernel_only();
      break;
    case UpgradeAction::kReset:
      // A message of the peer's that failed its parser or came out of
      // order (Bound, Switch, Revert): the peer broke the protocol, as a
      // bad immediate does (counted by StreamChannel::violation).
      if (upgrade_.error() == EPROTO && error_ == 0 &&
          (upgrade_.last_event() == UpgradeEvent::kProtocolError ||
           upgrade_.last_event() == UpgradeEvent::kSwitchReceived ||
           upgrade_.last_event() == UpgradeEvent::kBoundReceived))
        core::stat_add(core::Stat::stream_violations);
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
  StreamLock held = lock_call();
  if (kernel_only()) return;
  // Only while nothing can be in a ring; later the state machine decides.
  // After a Revert the ring part still has to be read.
  if (upgrade_.committed() || peer_reverted_ || revert_posted_) return;
  if (token_guard_ || reader_.token_pending()) {
    // The client's Switch may be in the completion queue, and its token on
    // TCP: take it first. Once it came, the token decides (§2), not a clock.
    progress_locked();
    if (kernel_only() || reader_.switch_known()) return;
  }
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
  note_route_changed();
}

void StreamSocket::reset_connection(int error, const char* why) {
  if (error_ != 0) return;
  error_ = error != 0 ? error : ECONNRESET;
  core::stat_add(core::Stat::upgrade_resets);
  VSOCK_LOG(kInfo, "fd %d: connection reset: %s (%s, last event %s)", fd_hint_, why, phase_name(upgrade_.phase()),
            event_name(upgrade_.last_event()));
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
  if (!channel_->send_message(bytes, sizeof bytes) && !channel_->peer_finished()) {
    apply(upgrade_.on(UpgradeEvent::kTransportError));
    return;
  }
  // (Failed after the peer's FIN: it closed and went before our Switch
  // could go. What it wrote still reads to the end; our direction counts
  // as switched, onto a dead channel: writes fail, as to a closed peer.)
  apply(upgrade_.on(UpgradeEvent::kSwitchSent));
  // The client proves on TCP that the Switch is the TCP client's (§2).
  if (upgrade_.role() == UpgradeRole::kClient && !kernel_only()) token_owed_ = true;
  if (write_shut_ && channel_) channel_->shutdown_write();
}

void StreamSocket::send_bound() {
  wire::BoundMessage message;
  message.nonce = nonce_;
  // The token (§2): random, never all zero (the unset value), the same in
  // every Bound of the connection.
  auto unset = [this] { return std::all_of(token_, token_ + sizeof token_, [](uint8_t b) { return b == 0; }); };
  while (unset() && ::getrandom(token_, sizeof token_, 0) != static_cast<ssize_t>(sizeof token_)) {
  }
  std::memcpy(message.token, token_, sizeof token_);
  message.tcp_read = reader_.tcp_read();
  bound_count_ = message.tcp_read;
  bound_sent_ms_ = core::monotonic_ms();
  uint8_t bytes[wire::kBoundMessageSize];
  wire::encode(message, bytes);
  // From here on the token may come on TCP (once our peer's Switch is in
  // the completion queue): reads look before they take.
  token_guard_ = true;
  if (!channel_ || !channel_->send_message(bytes, sizeof bytes)) apply(upgrade_.on(UpgradeEvent::kTransportError));
}

void StreamSocket::take_peer_messages(int fd) {
  while (channel_ && !kernel_only() && channel_->has_message()) {
    uint8_t bytes[StreamChannel::kControlMessageMax];
    core::Result<size_t> length = channel_->take_message(bytes, sizeof bytes);
    if (!length) return;
    const bool revert = length.value() >= 4 && wire::load_be32(bytes) == wire::kRevertMagic;
    if (revert && reader_.token_pending() && held_revert_.empty()) {
      // The client handed the connection on before we found its token:
      // its Revert counts once the token does (check_token_locked).
      held_revert_.assign(bytes, bytes + length.value());
    } else if (revert) {
      take_peer_revert(bytes, length.value());
    } else {
      take_peer_switch(bytes, length.value(), fd);
    }
  }
}

void StreamSocket::take_peer_switch(const uint8_t* bytes, size_t length, int fd) {
  if (peer_reverted_) {  // nothing comes after a Revert
    apply(upgrade_.on(UpgradeEvent::kProtocolError));
    return;
  }
  if (upgrade_.role() == UpgradeRole::kClient && !upgrade_.switch_sent()) {
    take_bound(bytes, length);  // the server's messages before our Switch
    return;
  }
  // The server, before the client's token proved the queue pair's peer to
  // be the TCP client: whatever that peer sends, the connection is not its
  // to break. A bad message only ends the attempt (§2).
  const bool unproven = upgrade_.role() == UpgradeRole::kServer && !upgrade_.switch_received();
  core::Result<wire::SwitchMessage> message = wire::parse_switch_message(bytes, length);
  if (!message || message.value().nonce != nonce_) {
    if (unproven) return refuse_switch_locked("a bad Switch");
    apply(upgrade_.on(UpgradeEvent::kProtocolError));
    return;
  }
  if (unproven && (!token_guard_ || reader_.switch_known()))
    return refuse_switch_locked(reader_.switch_known() ? "a second Switch" : "a Switch before our Bound");
  if (!channel_->started() && !channel_->start(message.value().ring)) {
    if (unproven) return refuse_switch_locked("a bad ring in its Switch");
    apply(upgrade_.on(UpgradeEvent::kProtocolError));
    return;
  }
  if (unproven) {
    // Its count must be where the client's token is on TCP; until we read
    // it there the Switch counts for nothing (check_token_locked).
    if (!reader_.on_switch(message.value().tcp_bytes, true))
      return refuse_switch_locked("a count TCP has already passed");
    check_token_locked(fd);
    return;
  }
  core::Result<bool> accepted = reader_.on_switch(message.value().tcp_bytes);
  if (!accepted) {
    apply(upgrade_.on(accepted.error() == ECONNRESET ? UpgradeEvent::kTcpReset : UpgradeEvent::kProtocolError));
    return;
  }
  apply(upgrade_.on(UpgradeEvent::kSwitchReceived));
}

void StreamSocket::take_bound(const uint8_t* bytes, size_t length) {
  core::Result<wire::BoundMessage> bound = wire::parse_bound_message(bytes, length);
  // A count beyond what we wrote, or another token than the first Bound's:
  // the server broke the protocol.
  const bool ok = bound && bound.value().nonce == nonce_ && bound.value().tcp_read <= writer_.tcp_written() &&
                  (!bound_seen_ || std::memcmp(token_, bound.value().token, sizeof token_) == 0);
  if (!ok) {
    apply(upgrade_.on(UpgradeEvent::kProtocolError));
    return;
  }
  std::memcpy(token_, bound.value().token, sizeof token_);
  bound_seen_ = true;
  if (bound.value().tcp_read < writer_.tcp_written()) {
    // The server has not read all we wrote on TCP yet. Switching here
    // would put our token behind bytes it has not read, and a process it
    // hands the socket to would read the token as data (§2). Our writes
    // wait a little for it to catch up; it sends Bound again when it has.
    // (Not after an urgent byte of ours: it never will.)
    bound_behind_ = !urgent_on_tcp_;
    if (bound_behind_) write_hold_until_ms_ = core::monotonic_ms() + kCatchUpHoldMs;
    return;
  }
  bound_behind_ = false;
  apply(upgrade_.on(UpgradeEvent::kBoundReceived));
}

void StreamSocket::offer_switch_point_locked(int fd) {
  if (fd < 0 || kernel_only() || !channel_ || upgrade_.role() != UpgradeRole::kServer || !token_guard_ ||
      reader_.switch_known() || reader_.tcp_ended() || reader_.tcp_read() == bound_count_)
    return;
  int waiting = 0;
  if (sys::real().ioctl(fd, FIONREAD, &waiting) != 0 || waiting != 0) return;
  send_bound();
}

bool StreamSocket::peer_never_switched() const {
  // Our direction switched (committed), the peer's did not: a queue pair
  // that fails now takes none of the peer's bytes with it.
  return upgrade_.committed() && !reader_.switch_known();
}

bool StreamSocket::peer_closed_ring() const {
  return channel_ && channel_->error() != 0 && channel_->peer_finished() && !channel_->peer_reset() &&
         writer_.switched() && !peer_reverted_ && !revert_posted_ && error_ == 0 && !kernel_only();
}

bool StreamSocket::writes_to_kernel() const {
  return kernel_only() || writer_.tcp_allowed() || (!write_shut_ && (peer_closed_ring() || peer_gone_unswitched()));
}

bool StreamSocket::peer_gone_unswitched() const {
  // E.g. the server closed while our Switch was on its way (its Bound had
  // just come): TCP is the whole connection, as it was, and the kernel
  // answers our writes as it answers a write to a closed peer. Not once a
  // byte of ours went into the ring: those are lost, the connection with them.
  return channel_ && channel_->error() != 0 && peer_never_switched() && !peer_reverted_ && !revert_posted_ &&
         error_ == 0 && !kernel_only() && channel_->ring_written() == 0 && channel_->unposted_bytes() == 0;
}

void StreamSocket::advance(int fd) {
  if (!channel_ || kernel_only()) return;
  // A client's messages are the stream's once its channel is established:
  // before, on a parked channel, they answer its Attach (the engine's).
  if (channel_->has_message() && (upgrade_.role() == UpgradeRole::kServer || upgrade_.cm_established()))
    take_peer_messages(fd);
  if (token_owed_) flush_token_locked(fd);
  if (reader_.token_due()) check_token_locked(fd);
  if (kernel_only()) return;
  // RDMA failed before the client's token came: whether the client's
  // direction was on the ring is for the token to say (§2).
  if (channel_->error() != 0 && reader_.token_pending()) return;
  if (peer_reverted_) {
    // The peer's direction is on TCP after the ring part; ours on TCP
    // after the bytes it gave up. The channel's failure (the peer tore its
    // side down) no longer matters.
    flush_resend_locked();
    return;
  }
  if (revert_posted_) return;  // ours: the handoff decides what a failure means
  if (channel_ && channel_->error() != 0 && error_ == 0 && !peer_never_switched()) {
    if (resume_on_tcp()) return;
    // A failure after the peer's FIN that cannot resume (ours ended too,
    // or the peer broke the protocol) ends nothing the reader still needs:
    // reads see the data and the end of stream, only writes fail
    // (StreamChannel::write). Not a reset.
    if (channel_->peer_finished()) return;
    UpgradePhase phase = upgrade_.phase();
    if (phase != UpgradePhase::kFallback && phase != UpgradePhase::kFailed)
      apply(upgrade_.on(UpgradeEvent::kTransportError));
    else if (phase == UpgradePhase::kFailed)
      error_ = channel_->error();
  }
}

void StreamSocket::on_transport_lost() {
  if (kernel_only()) return;
  // What the queue already holds came before the disconnect: a FIN there
  // (the peer closed, then its process went) is an orderly end. Several
  // rounds: one progress() takes a bounded batch.
  for (int round = 0; round < 64 && channel_ && !kernel_only(); ++round) {
    core::Result<int> taken = channel_->progress();
    advance();
    if (!taken || taken.value() == 0) break;
  }
  if (kernel_only()) return;
  // After a Revert (either way) the connection is TCP's: tearing the queue
  // pair down is how the peer says it took ours.
  if (peer_reverted_ || revert_posted_) return;
  // When the peer never switched, its whole stream, and its FIN or RST,
  // are on TCP.
  if (channel_ && peer_never_switched()) {
    if (channel_->error() == 0) channel_->abort();
    return;
  }
  // The link, the device or the peer's RDMA side went: the connection goes
  // on over TCP if it can (a peer whose process is gone shows there),
  // half-closed ones too.
  if (channel_) channel_->fail_transport("the rdma_cm connection ended");
  // The client's token decides what this failure means (§2): wait for it.
  if (reader_.token_pending()) {
    check_token_locked(-1);
    if (kernel_only() || reader_.token_pending()) return;
  }
  if (resume_on_tcp()) return;
  // After an orderly end that cannot resume (both FINs crossed) reads
  // still see the data and the end of stream; only a write finds the
  // connection gone.
  if (channel_ && channel_->started() && channel_->peer_finished()) return;
  apply(upgrade_.on(UpgradeEvent::kTransportError));
  if (channel_ && channel_->error() == 0) channel_->abort();
}

void StreamSocket::set_no_delay(bool on) {
  StreamLock held = lock_call();
  no_delay_.store(on, std::memory_order_relaxed);
  apply_coalescing_locked();
}

void StreamSocket::apply_coalescing_locked() {
  if (!channel_) return;
  const StreamConfig& config = channel_->config();
  channel_->set_coalescing(config.autocork || (config.nagle && !no_delay_.load(std::memory_order_relaxed)));
}

bool StreamSocket::holds_data_locked() const {
  return channel_ && !kernel_only() && channel_->started() && channel_->held_bytes() > 0;
}

bool StreamSocket::ring_may_grow_locked() const {
  return channel_ && !kernel_only() && channel_->started() && channel_->ring_may_grow();
}

void StreamSocket::progress_locked(int fd) {
  if (!channel_ || kernel_only()) return;
  channel_->progress();
  advance(fd);
}

int StreamSocket::take_error_locked() {
  int error = error_locked();
  if (error == 0 || error_reported_) return 0;
  error_reported_ = true;
  return error;
}

bool StreamSocket::take_so_error(int fd, int* error) {
  StreamLock held = lock_call();
  if (kernel_only() || !upgrade_.committed()) return false;
  progress_locked();
  // The kernel's pending error is consumed here either way: past this
  // point the kernel socket's news (its RST follows our RESET) is not
  // reported a second time.
  int kernel = 0;
  socklen_t len = sizeof kernel;
  if (sys::real().getsockopt(fd, SOL_SOCKET, SO_ERROR, &kernel, &len) != 0) return false;
  if (kernel != 0 && !reader_.on_ring() && error_locked() == 0) {
    // Bytes still to come on TCP will not: the connection is broken.
    apply(upgrade_.on(UpgradeEvent::kTcpReset));
    error_reported_ = true;
    *error = kernel;
    return true;
  }
  *error = take_error_locked();
  return true;
}

int StreamSocket::error_locked() const {
  if (error_ != 0) return error_;
  if (upgrade_.phase() == UpgradePhase::kFailed) return upgrade_.error();
  // After the peer's FIN, a queue pair that fails is its close's doing
  // (peer_closed_ring: the kernel socket tells the rest); its RESET is
  // the connection's reset, as the kernel's RST, which reads EPIPE in
  // CLOSE_WAIT (the peer's FIN came, ours did not go).
  if (reader_.on_ring() && writer_.switched() && !peer_reverted_ && channel_ && channel_->error() != 0 &&
      (!channel_->peer_finished() || channel_->peer_reset()))
    return channel_->peer_finished() && !write_shut_ ? EPIPE : channel_->error();
  return 0;
}

bool StreamSocket::switch_may_come() const {
  // (A Switch taken whose token is still to come counts as come.)
  if (kernel_only() || upgrade_.switch_received() || reader_.switch_known() || peer_reverted_) return false;
  // A failed queue pair delivers nothing more (its completions come in
  // order: a Switch posted before the failure was taken before the error).
  if (channel_ && channel_->error() != 0) return false;
  switch (upgrade_.phase()) {
    case UpgradePhase::kAccepting:
    case UpgradePhase::kEstablished:
      return upgrade_.role() == UpgradeRole::kServer || upgrade_.switch_sent();
    default:
      return false;
  }
}

bool StreamSocket::upgrade_settled() const {
  if (kernel_only() || asked_for_first_write_) return true;
  if (upgrade_.phase() == UpgradePhase::kConnecting) return false;
  // The side-band thread takes the promised Bound and sends our Switch;
  // after a Bound behind our TCP bytes, the next one, once the server has
  // caught up (take_bound).
  return (!bound_promised_ && !bound_behind_) || upgrade_.phase() != UpgradePhase::kEstablished ||
         upgrade_.switch_sent();
}

void StreamSocket::wait_settled(int timeout_ms) {
  StreamLock held = lock_call();
  settled_.wait_for(held, std::chrono::milliseconds(timeout_ms), [this] { return upgrade_settled(); });
}

void StreamSocket::await_first_write_locked() {
  awaiting_first_write_ = true;
  asked_for_first_write_ = true;
  notify();
}

void StreamSocket::hold_writes_until_settled(int timeout_ms) {
  StreamLock held = lock_call();
  if (upgrade_settled()) return;
  write_hold_until_ms_ = core::monotonic_ms() + timeout_ms;
}

bool StreamSocket::writes_held(int fd) {
  if (write_hold_until_ms_ == 0) return false;
  if (!upgrade_settled() && core::monotonic_ms() < write_hold_until_ms_) {
    // A kernel connect that failed (refused, unreachable) is no upgrade
    // to wait for: its error is the kernel's to report, with POLLOUT.
    pollfd kernel{fd, 0, 0};
    if (fd < 0 || sys::real().poll(&kernel, 1, 0) <= 0 || (kernel.revents & (POLLERR | POLLHUP)) == 0) return true;
  }
  write_hold_until_ms_ = 0;
  write_hold_released_ = true;  // a new POLLOUT edge (activity())
  return false;
}

// --------------------------------------------------------------- closing --

bool StreamSocket::on_last_close() {
  const bool abortive = abort_on_close_.load(std::memory_order_relaxed);
  StreamLock held = lock_call();
  closing_ = true;
  if (kernel_only()) return false;
  if (switch_may_be_coming_locked() && !tcp_rules_out_switch_locked()) {
    // The server, a Bound just sent: the client may be switching now, its
    // token on its way on TCP. The kernel's close would reset the
    // connection on that token (unread data), so the engine finishes the
    // close (close_finished): as a switched connection if the Switch and
    // its token come within kSwitchAfterCloseMs of that Bound, else as the
    // kernel would. Our dup keeps the socket open meanwhile.
    if (close_fd_ < 0) close_fd_ = dup_own_fd();
    if (close_fd_ >= 0) {
      write_shut_ = true;
      close_waits_for_switch_ = true;
      return true;
    }
  }
  if (!upgrade_.committed() || !channel_) {
    // Nothing of ours can be in a ring: the kernel's close is the whole story.
    end_upgrade_at_close_locked();
    return false;
  }
  progress_locked();
  if (peer_reverted_) {
    // On TCP again: the kernel's close ends it, after what the peer gave
    // up (our own dup keeps the socket open until the engine wrote it)
    // and, after a resume, once the peer's record is off TCP.
    write_shut_ = true;
    resend_shut_wr_ = true;
    if (resume_settled_locked()) return false;
    if (close_fd_ < 0) close_fd_ = dup_own_fd();
    return true;
  }
  // Unread data at close makes the kernel reset the connection; so do we.
  // Unread TCP bytes before the switch point count too: the kernel resets
  // the TCP connection for them, and the peer reads the ring, not TCP.
  const bool unread = channel_->readable_bytes() > 0 || (reader_.switch_known() && reader_.tcp_remaining() > 0);
  if (abortive || unread) {
    channel_->abort();
    return true;
  }
  write_shut_ = true;
  // The token still owed keeps the socket open (our dup) until it is on
  // TCP: the server reads nothing of ours before it (§2).
  if (token_owed_ && token_fd_ < 0) token_fd_ = dup_own_fd();
  // Done here, not by the engine: the side-band thread dies with an
  // _exit() right after close(), and what it had not posted would be lost.
  if (writer_.switched()) {
    // Should RDMA fail before the peer has it all, the connection resumes
    // on TCP (§5.1): the kernel's socket must stay open until then.
    if (close_fd_ < 0) close_fd_ = dup_own_fd();
    channel_->close_write();  // FIN, then CLOSED: nothing more is read here
    if (!flush_locked(held, kCloseFlushMs))
      VSOCK_LOG(kDebug, "fd %d: close: data or FIN not acknowledged yet; the engine goes on", fd_hint_);
  }
  return true;
}

void StreamSocket::finish_at_exit(int64_t deadline_ms) {
  StreamLock held = lock_call();
  if (kernel_only()) return;
  if (!peer_reverted_) {
    if (!channel_ || !upgrade_.committed() || !writer_.switched()) return;
    channel_->close_write();
    const int64_t left = deadline_ms - core::monotonic_ms();
    flush_locked(held, left > 0 ? static_cast<int>(left) : 0, false);
    // The token before the process (and its socket) goes (§2).
    wait_for_token_locked(&held, deadline_ms);
    if (kernel_only() || !peer_reverted_) return;
  }
  // Back on TCP: a Revert came, or RDMA failed during the flush. (No
  // shutdown: another process may hold the socket; the kernel's close at
  // exit sends the FIN when ours was the last.)
  while (!resume_settled_locked() && core::monotonic_ms() < deadline_ms) {
    held.unlock();
    sys::real().poll(nullptr, 0, kFlushSliceMs);
    relock(held);
    progress_locked();
  }
}

void StreamSocket::finish_closed_at_exit(int64_t deadline_ms) {
  while (!close_finished() && core::monotonic_ms() < deadline_ms) sys::real().poll(nullptr, 0, kFlushSliceMs);
}

bool StreamSocket::flush_locked(StreamLock& held, int timeout_ms, bool stall_ends) {
  const int64_t start = core::monotonic_ms();
  int64_t last_completion = start;
  uint64_t completions = channel_ ? channel_->counters().completions : 0;
  for (;;) {
    progress_locked();
    StreamChannel* channel = kernel_only() ? nullptr : channel_.get();
    if (channel == nullptr || channel->error() != 0 || channel->all_sent()) return true;
    const int64_t now = core::monotonic_ms();
    if (channel->counters().completions != completions) {
      completions = channel->counters().completions;
      last_completion = now;
    }
    if (now - start >= timeout_ms || (stall_ends && now - last_completion >= kCloseStallMs)) return false;
    channel->arm();
    // A completion that came before the arm would not wake the fd.
    if (channel->progress().value() > 0) continue;
    pollfd pfd{channel->completion_fd(), POLLIN, 0};
    held.unlock();
    sys::real().poll(&pfd, 1, kFlushSliceMs);
    relock(held);
    // After commit the channel stays (no fallback), but check as wait() does.
    if (channel == channel_.get() && channel_ && (pfd.revents & POLLIN))
      note_wake_events_taken(channel_->take_event().value_or(0));
  }
}

void StreamSocket::end_upgrade_at_close_locked() {
  // An upgrade still under way ends here: counted as the peer counts our
  // close (the TCP connection ended before the upgrade did), so that every
  // attempt is either done or has its reason.
  const UpgradePhase phase = upgrade_.phase();
  if (!upgrade_.committed() && (phase == UpgradePhase::kConnecting || phase == UpgradePhase::kAccepting ||
                                phase == UpgradePhase::kEstablished)) {
    VSOCK_LOG(kDebug, "fd %d: stays on TCP: closed before the upgrade completed (%s)", fd_hint_, phase_name(phase));
    count_fallback(FallbackReason::kPeerClosed);
  }
  upgrade_.on(UpgradeEvent::kDeclined);
  become_kernel_only();
}

bool StreamSocket::switch_may_be_coming_locked() const {
  return upgrade_.role() == UpgradeRole::kServer && token_guard_ && !upgrade_.committed() && channel_ &&
         channel_->error() == 0 && !revert_posted_ && !peer_reverted_ &&
         core::monotonic_ms() - bound_sent_ms_ < kSwitchAfterCloseMs;
}

bool StreamSocket::tcp_rules_out_switch_locked() {
  // A client switches only at our latest Bound's count, its token next on
  // TCP (§2). Unread bytes there that are not the token, or its end, or a
  // read past that count: this client writes on TCP, and a close with
  // unread bytes is the kernel's reset, now, not after a wait.
  if (reader_.switch_known()) return false;  // the token is check_token_locked()'s
  // Our own copy once the close waits (no new fd each look: a copy takes
  // the lowest free number, which may be one the application just closed).
  const int fd = close_fd_ >= 0 ? close_fd_ : dup_own_fd();
  if (fd < 0) return false;
  const TcpAtSwitchPoint seen = peek_switch_point_locked(fd);
  if (fd != close_fd_) sys::real().close(fd);
  switch (seen) {
    case TcpAtSwitchPoint::kNothingYet:
      return false;  // nothing unread (or our own SHUT_RD's 0): the token may still come
    case TcpAtSwitchPoint::kTokenPrefix:
    case TcpAtSwitchPoint::kToken:
      return reader_.tcp_read() != bound_count_;  // the token, but not where a Bound put the switch
    case TcpAtSwitchPoint::kOtherBytes:
    case TcpAtSwitchPoint::kEnd:
    case TcpAtSwitchPoint::kError:
      break;
  }
  return true;
}

bool StreamSocket::close_finished() {
  StreamLock held = lock_call();
  if (kernel_only() || !channel_) return drop_close_fd_locked();
  progress_locked();
  if (close_waits_for_switch_ && !kernel_only() && !upgrade_.committed()) {
    // Closed while the client's Switch could be coming (on_last_close).
    if (switch_may_be_coming_locked() && !tcp_rules_out_switch_locked()) return false;
    end_upgrade_at_close_locked();  // no Switch came after our Bound
    return drop_close_fd_locked();
  }
  if (close_waits_for_switch_ && !kernel_only() && channel_ && channel_->readable_bytes() > 0 &&
      !channel_->aborted()) {
    // The client switched after our close and wrote: unread data at close
    // resets the connection, as the kernel's does.
    channel_->abort();
    return false;
  }
  if (peer_reverted_) return resume_settled_locked() && drop_close_fd_locked();
  if (token_owed_ && !flush_token_locked()) return false;  // the engine's deadline bounds it
  if (!channel_ || channel_->error() != 0) return drop_close_fd_locked();
  if (!writer_.switched()) return false;  // the Switch is still due (the server's)
  if (close_waits_for_switch_ && !channel_->close_requested()) channel_->close_write();  // switched after the close
  return channel_->all_sent() && drop_close_fd_locked();
}

bool StreamSocket::drop_close_fd_locked() {
  if (close_fd_ >= 0) {
    sys::real().close(close_fd_);
    close_fd_ = -1;
  }
  return true;
}

void StreamSocket::close_own_dups_in_child() {
  for (int* fd : {&resend_fd_, &token_fd_, &close_fd_}) {
    if (*fd < 0) continue;
    sys::real().close(*fd);
    *fd = -1;
  }
}

// ----------------------------------------------------------------- waiting --

uint64_t StreamSocket::activity(int fd) {
  StreamLock held = lock_call();
  // Right after a look whose answer may be reused, this taking changes
  // nothing (on the ring: no TCP arrivals to note, no write hold to end),
  // so it keeps that answer usable: edge-triggered looks ask for both.
  if (last_look_.reusable && mu_.takes() == last_look_.takes + 1) last_look_.takes = mu_.takes();
  if (!kernel_only() && !reader_.on_ring()) note_tcp_arrivals_locked(fd);
  // Our own shutdown changes readiness too (POLLIN|POLLRDHUP after SHUT_RD,
  // POLLHUP once both directions are shut), as the kernel's wake-up on it.
  writes_held();  // ends a hold that is over: its release is an edge
  uint64_t value = eagain_count_ + tcp_arrived_ + (read_shut_ ? 1 : 0) + (write_shut_ ? 2 : 0) + (write_hold_released_ ? 4 : 0);
  if (channel_) value += channel_->counters().data_received + channel_->counters().credits_received +
                         channel_->counters().messages_received;
  return value;
}

// The socket is not in the kernel's epoll set, so the kernel's edge for new
// TCP data is ours to give: bytes read plus bytes waiting only grow when
// some arrive.
void StreamSocket::note_tcp_arrivals_locked(int fd) {
  int waiting = 0;
  if (fd < 0 || sys::real().ioctl(fd, FIONREAD, &waiting) != 0 || waiting < 0) return;
  tcp_arrived_ = std::max(tcp_arrived_, reader_.tcp_read() + static_cast<uint64_t>(waiting));
}

int StreamSocket::wake_fds(int fd, short events, pollfd* out, int* slice_ms) {
  claim_if_awaited(fd);
  StreamLock held = lock_call();
  int n = 0;
  short tcp_events = 0;
  if ((events & POLLIN) && !reader_.on_ring()) tcp_events |= POLLIN;
  if ((events & POLLOUT) && writes_to_kernel() && !writes_held(fd)) tcp_events |= POLLOUT;
  if (events & POLLPRI) tcp_events |= POLLPRI;  // urgent data is TCP's
  if (tcp_events != 0 || kernel_only()) out[n++] = pollfd{fd, static_cast<short>(tcp_events | POLLRDHUP), 0};
  bool pending = false;
  if (channel_ && !kernel_only()) {
    // The application is about to sleep: what it holds goes now.
    if (channel_->started()) channel_->flush();
    channel_->arm();
    // A completion already in the queue would not wake the fd.
    pending = channel_->progress().value() > 0;
    if (pending) advance(fd);
    // advance() may have left the socket to the kernel (fallback, or the
    // peer's Revert fully taken): no channel to watch then, and slice 0
    // makes the caller look again at once.
    if (channel_ && !kernel_only()) out[n++] = pollfd{channel_->completion_fd(), POLLIN, 0};
  }
  bool transitional = !kernel_only() && upgrade_.phase() != UpgradePhase::kSwitched &&
                      upgrade_.phase() != UpgradePhase::kFailed;
  *slice_ms = pending ? 0 : transitional ? kTransitionSliceMs : kIdleSliceMs;
  if (!pending) core::stat_add(core::Stat::wait_sleeps);
  if (!pending && channel_ && !kernel_only() && channel_->started() && channel_->error() == 0 &&
      channel_->note_sleep(core::monotonic_ms())) {
    look_for_peer_resume(fd);
    if (resuming_) *slice_ms = 0;  // readiness changed: the caller looks again at once
  }
  return n;
}

bool StreamSocket::wake_fds_tell_all(int /*fd*/) {
  StreamLock held = lock_call();
  return on_ring_for_good_locked();
}

bool StreamSocket::on_ring_for_good_locked() const {
  return !kernel_only() && channel_ && channel_->started() && channel_->error() == 0 &&
         upgrade_.phase() == UpgradePhase::kSwitched && !resuming_ && !peer_reverted_ && !closing_ &&
         write_hold_until_ms_ == 0;
}

core::Result<bool> StreamSocket::wait(StreamLock& held, int fd, WaitFor what, int64_t deadline_ms) {
  using R = core::Result<bool>;
  pollfd fds[2];
  int n = 0;
  bool tcp_wanted = what == WaitFor::kRead ? (!reader_.on_ring() && !reader_.tcp_ended()) || kernel_only()
                                           : writes_to_kernel() && !writes_held(fd);
  if (tcp_wanted) fds[n++] = pollfd{fd, static_cast<short>(what == WaitFor::kRead ? POLLIN : POLLOUT), 0};
  int channel_index = -1;
  StreamChannel* channel = kernel_only() ? nullptr : channel_.get();
  if (channel != nullptr && channel->started()) {
    // The application waits: nothing more is coming to coalesce with.
    channel->flush();
    // Spin first (the profile's budget, never past the deadline): a reply
    // that is microseconds away is not worth a sleep and a wake-up.
    // The lock stays held between looks unless another thread waits for
    // it: then it is let go, so that the other thread can send or receive
    // on the socket meanwhile; if it took what we wait for (data or credit
    // arrived, bytes moved in our direction) the caller looks again.
    auto marker = [what](const StreamCounters& c) {
      return what == WaitFor::kRead ? c.data_received + c.messages_received + c.bytes_read
                                    : c.credits_received + c.bytes_written;
    };
    SpinBudget spin(core::config().settings.spin_us, deadline_ms < 0 ? -1 : deadline_ms * 1000,
                    SpinHistory::of_this_thread());
    for (;;) {
      if (channel->progress().value() > 0) {
        advance(fd);
        return R::ok(true);
      }
      if (lock_waiters_.load(std::memory_order_relaxed) == 0) {
        if (!spin.next()) break;
        continue;
      }
      const uint64_t before = marker(channel->counters());
      held.unlock();
      bool more = spin.next();
      // Give the waiter time to take the lock (it says so by leaving
      // lock_waiters_), within the spin budget.
      while (more && lock_waiters_.load(std::memory_order_relaxed) != 0) more = spin.next();
      relock(held);
      if (kernel_only() || channel_.get() != channel || channel->error() != 0) return R::ok(false);
      if (marker(channel->counters()) != before) return R::ok(false);
      if (!more) break;
    }
  }
  if (channel != nullptr) {
    channel->arm();
    // A completion that came before the arm would not wake the fd.
    if (channel->progress().value() > 0) {
      advance(fd);
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
  core::stat_add(core::Stat::wait_sleeps);
  held.unlock();
  int rc = sys::real().poll(fds, static_cast<nfds_t>(n), slice);
  int saved = errno;
  relock(held);
  if (rc < 0 && saved == EINTR) {
    // The kernel restarts a socket call without a timeout (SO_RCVTIMEO /
    // SO_SNDTIMEO) after an SA_RESTART handler; with one it says EINTR.
    if (deadline_ms < 0 && handlers_restart_calls()) return R::ok(false);
    return R::fail(EINTR);
  }
  // The channel may have been replaced or dropped while we slept.
  if (channel_index >= 0 && channel == channel_.get() && channel_ && (fds[channel_index].revents & POLLIN))
    note_wake_events_taken(channel_->take_event().value_or(0));
  if (rc == 0 && channel == channel_.get() && channel_ && channel_->note_idle(slice)) look_for_peer_resume(fd);
  if (deadline_ms >= 0 && core::monotonic_ms() >= deadline_ms) return R::fail(EAGAIN);
  return R::ok(false);
}

}  // namespace vsock::sock
