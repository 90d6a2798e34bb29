// The side band, client side: a connecting socket's request, the
// redirects and Rejects that answer it, asking again after the first write.
#include "sock/upgrade/engine.hpp"
#include "sock/upgrade/shared_peer_failures.hpp"

namespace vsock::sock::side_band {

bool Engine::peer_failed_recently(const sockaddr* peer, socklen_t peer_len) {
  std::lock_guard<std::mutex> held(mu_);
  return cache_.should_skip(peer, peer_len, static_cast<uint64_t>(core::monotonic_ms()));
}

// A server that answered Reject kAfterData lately would answer so again:
// the request goes after the first write (check_first_write), and nothing
// waits for it.
bool Engine::ask_after_first_write_at_once(int fd, StreamSocket* stream, const sockaddr* peer, socklen_t peer_len) {
  std::lock_guard<std::mutex> held(mu_);
  if (!after_data_peers_.should_skip(peer, peer_len, static_cast<uint64_t>(core::monotonic_ms()))) return false;
  StreamLock stream_held = stream->lock();
  stream->set_fd_hint(fd);
  core::stat_add(core::Stat::upgrade_attempts);
  stream->apply(stream->upgrade().on(UpgradeEvent::kConnectStarted));
  track(stream, 0);
  wait_for_first_write(tracked_.back());
  stream_held.unlock();
  wake();
  return true;
}

bool Engine::start_connect(int fd, StreamSocket* stream, const sockaddr* peer, socklen_t peer_len) {
  sockaddr_storage local{};
  socklen_t local_len = sizeof local;
  if (sys::real().getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) {
    stream->fall_back_now(FallbackReason::kLocalError, "getsockname failed");
    return false;
  }
  if (ask_after_first_write_at_once(fd, stream, peer, peer_len)) return true;
  {
    std::lock_guard<std::mutex> held(mu_);
    if (attach_parked(fd, stream, reinterpret_cast<sockaddr*>(&local), local_len, peer, peer_len)) return true;
  }
  // Registered before the engine's lock is taken: other connections' events
  // need not wait for it.
  std::unique_ptr<StreamChannel> channel = new_channel();
  std::lock_guard<std::mutex> held(mu_);
  StreamLock stream_held = stream->lock();
  core::Result<bool> started = connect_locked(stream, fd, reinterpret_cast<sockaddr*>(&local), local_len, peer,
                                              peer_len, std::move(channel));
  if (!started) {
    stream_held.unlock();
    stream->fall_back_now(started.error() == EAFNOSUPPORT ? FallbackReason::kDeclined
                          : started.error() == ENOMEM     ? FallbackReason::kNoResources
                                                          : FallbackReason::kLocalError,
                          started.error() == EAFNOSUPPORT ? "address family not upgradable"
                          : started.error() == ENOMEM     ? "no resources for a channel"
                                                          : "rdma_cm could not start");
    return false;
  }
  core::stat_add(core::Stat::upgrade_attempts);
  stream->apply(stream->upgrade().on(UpgradeEvent::kConnectStarted));
  track(stream, 0);
  // An address rdma_cm refuses outright has its outcome already.
  if (stream->connector().outcome() != rdma::CmOutcome::kPending) finish_connect(stream);
  stream_held.unlock();
  wake();
  return true;
}

// Sends the request for `fd`'s connection (local -> peer) to `peer`'s
// address and port with `channel` (null: a fresh one). Under both locks.
// EAFNOSUPPORT: not an upgradable address; ENOMEM: no channel; EIO:
// rdma_cm failed.
core::Result<bool> Engine::connect_locked(StreamSocket* stream, int fd, const sockaddr* local, socklen_t local_len,
                                          const sockaddr* peer, socklen_t peer_len,
                                          std::unique_ptr<StreamChannel> channel, uint16_t request_flags) {
  using R = core::Result<bool>;
  // The request names the TCP connection, whatever port it goes to.
  sockaddr_storage tcp_peer{};
  socklen_t tcp_peer_len = sizeof tcp_peer;
  if (sys::real().getpeername(fd, reinterpret_cast<sockaddr*>(&tcp_peer), &tcp_peer_len) != 0) {
    std::memcpy(&tcp_peer, peer, std::min<size_t>(peer_len, sizeof tcp_peer));
    tcp_peer_len = peer_len;
  }
  core::Result<wire::UpgradeRequest> request = wire::build_upgrade_request(
      local, local_len, reinterpret_cast<sockaddr*>(&tcp_peer), tcp_peer_len, stream->nonce());
  if (!request) return R::fail(EAFNOSUPPORT);
  request.value().flags = request_flags;
  if (!channel) channel = new_channel_locked();
  if (!channel) return R::fail(ENOMEM);
  rdma::CmConnectParams params;
  std::memcpy(&params.destination, peer, std::min<size_t>(peer_len, sizeof params.destination));
  std::memcpy(&params.source, local, std::min<size_t>(local_len, sizeof params.source));
  params.timeout_ms = upgrade_deadline_ms();
  wire::encode(request.value(), params.private_data);
  params.private_data_length = static_cast<uint8_t>(wire::kUpgradeRequestSize);
  rdma::CmQpSetup setup;
  setup.device = &device_;
  setup.existing = &channel->queue_pair();
  core::Result<rdma::CmConnector> connector = rdma::CmConnector::start(channel_, params, setup);
  if (!connector) return R::fail(EIO);
  stream->set_channel(std::move(channel));
  stream->connector() = std::move(connector.value());
  stream->set_fd_hint(fd);
  return R::ok(true);
}

// The server's listener sent us to `port` of the same address, where the
// process that serves the connection listens. Under both locks.
bool Engine::follow_redirect(StreamSocket* stream, uint16_t port) {
  Tracked* tracked = tracked_entry(stream);
  if (tracked == nullptr || tracked->redirects >= kMaxRedirects) return false;
  ++tracked->redirects;
  // A request sent after our first bytes says so at its new address too.
  const uint16_t flags = tracked->first_write_deadline_ms != 0 ? wire::kRequestFlagAfterData : 0;
  if (!ask_again(stream, port, flags)) return false;
  core::stat_add(core::Stat::upgrade_redirects);
  VSOCK_LOG(kDebug, "fd %d: upgrade request redirected to port %u", stream->fd_hint(), port);
  return true;
}

bool Engine::ask_again(StreamSocket* stream, uint16_t port, uint16_t request_flags) {
  int fd = stream->fd_hint();
  SocketNames names;
  if (!read_names(fd, &names)) return false;
  if (port != 0 && names.peer.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&names.peer)->sin_port = htons(port);
  else if (port != 0 && names.peer.ss_family == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&names.peer)->sin6_port = htons(port);
  else if (port != 0)
    return false;
  if (!connect_locked(stream, fd, names.local_addr(), names.local_len, names.peer_addr(), names.peer_len, nullptr,
                      request_flags))
    return false;
  if (stream->connector().outcome() != rdma::CmOutcome::kPending) finish_connect(stream);
  return true;
}

bool Engine::ask_after_first_write(StreamSocket* stream) {
  Tracked* tracked = tracked_entry(stream);
  if (tracked == nullptr || tracked->first_write_deadline_ms != 0) return false;
  wait_for_first_write(*tracked);
  sockaddr_storage peer{};
  socklen_t peer_len = sizeof peer;
  if (sys::real().getpeername(stream->fd_hint(), reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0)
    after_data_peers_.record_failure(reinterpret_cast<sockaddr*>(&peer), peer_len,
                                     static_cast<uint64_t>(core::monotonic_ms()));
  VSOCK_LOG(kDebug, "fd %d: the server accepts after the first bytes: asking again once they are written",
            stream->fd_hint());
  return true;
}

// Under both locks.
void Engine::wait_for_first_write(Tracked& tracked) {
  tracked.first_write_deadline_ms = core::monotonic_ms() + settle_ms();
  tracked.stream->await_first_write_locked();
}

// Under the stream's lock.
void Engine::check_first_write(Tracked& tracked, int64_t now) {
  StreamSocket* stream = tracked.stream;
  if (!stream->awaiting_first_write()) return;
  if (stream->wrote_on_tcp()) {
    stream->first_write_seen();
    if (ask_again(stream, 0, wire::kRequestFlagAfterData)) return;
  } else if (now < tracked.first_write_deadline_ms) {
    return;
  }
  stream->first_write_seen();
  stream->apply(stream->upgrade().on(UpgradeEvent::kCmRefused));
}

void Engine::on_connector_event(StreamSocket* stream, const rdma::CmEvent& event) {
  rdma::CmConnector& connector = stream->connector();
  connector.on_event(event);
  StreamChannel* channel = stream->channel();
  // Receives go up before the peer can send: as soon as the QP exists.
  if (connector.stage() == rdma::CmConnectStage::kConnecting && channel != nullptr) channel->post_initial_receives();
  if (connector.outcome() != rdma::CmOutcome::kPending) finish_connect(stream);
}

// Under the stream's lock.
void Engine::finish_connect(StreamSocket* stream) {
  rdma::CmConnector& connector = stream->connector();
  const rdma::CmConnectResult& result = connector.result();
  UpgradeEvent event = UpgradeEvent::kCmError;
  switch (result.outcome) {
    case rdma::CmOutcome::kPending: return;
    case rdma::CmOutcome::kEstablished: {
      core::Result<wire::UpgradeAccept> accept =
          wire::parse_upgrade_accept(result.private_data.bytes, result.private_data.length);
      StreamChannel* channel = stream->channel();
      // A bad answer is a reject: the connection goes away with the connector.
      if (!accept || accept.value().nonce != stream->nonce() || channel == nullptr) {
        event = UpgradeEvent::kCmRejected;
        break;
      }
      // The send buffer that mirrors the server's ring is registered now: a
      // shortage of ours (budget, locked memory) says nothing of the peer.
      if (rdma::Status started = start_channel_locked(*channel, accept.value().ring); !started) {
        event = short_of_memory(started.error()) ? UpgradeEvent::kNoResources : UpgradeEvent::kCmRejected;
        break;
      }
      stream->connection() = connector.take_connection();
      stream->set_bound_promised((accept.value().flags & wire::kAcceptFlagBound) != 0);
      stream->apply(stream->upgrade().on(UpgradeEvent::kCmEstablished));
      remember_peer_of(stream, &answering_peers_, SharedNews::kRunsLibvsock);
      return;
    }
    case rdma::CmOutcome::kRejected: {
      // The server's library says why (or where to ask instead); a reject
      // without its message is some other rdma_cm application's.
      core::Result<wire::RejectMessage> why =
          wire::parse_reject_message(result.private_data.bytes, result.private_data.length);
      event = UpgradeEvent::kCmRejected;
      if (why && why.value().nonce == stream->nonce()) {
        if (why.value().reason == wire::RejectReason::kRedirect && follow_redirect(stream, why.value().port)) return;
        if (why.value().reason == wire::RejectReason::kAfterData && ask_after_first_write(stream)) return;
        if (why.value().reason != wire::RejectReason::kPeer) event = UpgradeEvent::kCmRefused;
      }
      break;
    }
    case rdma::CmOutcome::kNoListener: event = UpgradeEvent::kCmNoListener; break;
    case rdma::CmOutcome::kUnreachable: event = UpgradeEvent::kCmUnreachable; break;
    case rdma::CmOutcome::kTimeout: event = UpgradeEvent::kCmTimeout; break;
    case rdma::CmOutcome::kAddressError:
    case rdma::CmOutcome::kRouteError:
    case rdma::CmOutcome::kError: event = UpgradeEvent::kCmError; break;
  }
  stream->apply(stream->upgrade().on(event));
  FallbackReason reason = stream->upgrade().fallback_reason();
  // A server that redirected us, or asked for our first bytes, runs
  // libvsock: a timeout after that (a worker slow to open its device) is
  // this connection's, not the peer's.
  const Tracked* tracked = tracked_entry(stream);
  bool peer_answered = tracked != nullptr && (tracked->redirects > 0 || tracked->first_write_deadline_ms != 0);
  // Likewise a timeout to a server that accepted one of our upgrades lately.
  if (reason == FallbackReason::kTimeout && !peer_answered) peer_answered = peer_is_in(stream, &answering_peers_);
  // Only a peer that took our TCP connection and still said no is worth
  // remembering: a refused TCP connect says nothing about its library.
  if (stream->kernel_only() && UpgradeState::remember_peer(reason) && !peer_answered) {
    // "No libvsock there", said by the peer's own host, is worth telling
    // this user's other processes; a timeout or an unreachable peer is not
    // (a busy host, a server slow to start, a link down for a moment).
    const bool plain = reason == FallbackReason::kNoListener || reason == FallbackReason::kRejected;
    remember_peer_of(stream, &cache_, plain ? SharedNews::kPlain : SharedNews::kNone);
  }
}

namespace {
// The connecting socket's peer address; false when the kernel cannot say.
bool peer_address(StreamSocket* stream, sockaddr_storage* peer, socklen_t* len) {
  *len = sizeof *peer;
  int fd = stream->fd_hint();
  return fd >= 0 && sys::real().getpeername(fd, reinterpret_cast<sockaddr*>(peer), len) == 0;
}
}  // namespace

bool Engine::peer_is_in(StreamSocket* stream, PeerFailureCache* peers) {
  sockaddr_storage peer{};
  socklen_t len = 0;
  return peer_address(stream, &peer, &len) &&
         peers->should_skip(reinterpret_cast<sockaddr*>(&peer), len, static_cast<uint64_t>(core::monotonic_ms()));
}

void Engine::remember_peer_of(StreamSocket* stream, PeerFailureCache* peers, SharedNews news) {
  sockaddr_storage peer{};
  socklen_t len = 0;
  if (!peer_address(stream, &peer, &len)) return;
  const auto* at = reinterpret_cast<const sockaddr*>(&peer);
  peers->record_failure(at, len, static_cast<uint64_t>(core::monotonic_ms()));
  if (news == SharedNews::kPlain)
    share_plain_peer(at, len);
  else if (news == SharedNews::kRunsLibvsock)
    forget_plain_peer(at, len);
}

}  // namespace vsock::sock::side_band
