// The side band, server side: an upgrade request as it arrives, checked,
// redirected, held or answered (early, while its connection waits in the
// backlog).
#include "sock/upgrade/engine.hpp"

namespace vsock::sock::side_band {

bool defers_accept(int listen_fd) {
  int seconds = 0;
  socklen_t len = sizeof seconds;
  return listen_fd >= 0 &&
         sys::real().getsockopt(listen_fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &seconds, &len) == 0 && seconds > 0;
}

void Engine::on_request(Listener& listener, const rdma::CmEvent& event) {
  core::Result<wire::UpgradeRequest> request =
      wire::parse_upgrade_request(event.private_data.bytes, event.private_data.length);
  if (!request) {
    VSOCK_LOG(kInfo, "rdma_cm request with malformed private data: rejected");
    reject(listener, event, 0, wire::RejectReason::kPeer);
    return;
  }
  const uint64_t nonce = request.value().nonce;
  if (!from_connection_peer(listener, event, request.value())) {
    // Another host naming a connection it is not an end of: it would take
    // the connection over (its bytes read as the client's).
    VSOCK_LOG(kInfo, "upgrade request from another address than its connection's client: refused");
    core::stat_add(core::Stat::upgrade_requests_forged);
    reject(listener, event, nonce, wire::RejectReason::kConnection);
    return;
  }
  for (const std::unique_ptr<EarlyUpgrade>& early : listener.early) {
    if (same_connection(early->request, request.value())) {
      reject(listener, event, nonce, wire::RejectReason::kConnection);  // the connection has its upgrade already
      return;
    }
  }
  if (redirect_if_claimed(listener, event, request.value())) return;
  uint64_t handle = reinterpret_cast<uint64_t>(event.id);
  VSOCK_LOG(kDebug, "upgrade request from port %u on %s listener (%s)", request.value().client.port,
            listener.rendezvous ? "the rendezvous" : "a TCP",
            listener.board && listener.board->shared() ? "shared" : "this process only");
  RequestResult result =
      listener.matcher.add_request(request.value(), handle, static_cast<uint64_t>(core::monotonic_ms()));
  if (result.evicted) {
    auto old = listener.requests.find(result.evicted_handle);
    if (old != listener.requests.end()) {
      reject(listener, old->second.event, old->second.request.nonce, wire::RejectReason::kConnection);
      listener.requests.erase(old);
    }
  }
  switch (result.verdict) {
    case RequestVerdict::kDuplicate:
      reject(listener, event, nonce, wire::RejectReason::kConnection);
      return;
    case RequestVerdict::kPending: {
      // Its connection is still in the kernel's backlog (or the client is
      // faster than accept()): answer now, so that a client blocked in
      // connect() does not wait for an accept() that may only come after
      // connect() returns (one thread doing both, or a slow server).
      // Only for a connection that really waits here: a request naming one
      // that does not exist, or one accepted already (a live connection
      // whose upgrade is done: a forger's), gets no queue pair (it waits,
      // then is rejected).
      // Not when another process may accept it (a shared listener): the
      // process that serves it claims it, and the request waits for that.
      const bool shared = listener.rendezvous || (listener.board && listener.board->shared());
      if (!shared && has_room_early(listener) && tcp_connection_in_backlog(request.value())) {
        listener.matcher.remove_request(handle);
        accept_early(listener, event, request.value());
        return;
      }
      if (shared && !listener.rendezvous && !(request.value().flags & wire::kRequestFlagAfterData) &&
          defers_accept(listener.fd)) {
        // No process accepts it before its data, and a client that waits
        // for the upgrade to send its data would wait for nothing.
        listener.matcher.remove_request(handle);
        reject(listener, event, nonce, wire::RejectReason::kAfterData);
        return;
      }
      listener.requests[handle] = HeldRequest{event, request.value()};
      if (shared) wake();  // the thread now looks at the board for its claim
      return;
    }
    case RequestVerdict::kMatched: {
      auto waiting = listener.sockets.find(result.fd);
      if (waiting == listener.sockets.end()) {
        reject(listener, event, nonce, wire::RejectReason::kConnection);
        return;
      }
      StreamSocket* stream = waiting->second;
      listener.sockets.erase(waiting);
      if (stream->awaiting_claim()) {
        // A fork came first: the process that uses the socket claims it,
        // and this request waits for that claim (redirect_claimed).
        listener.matcher.add_request(request.value(), handle, static_cast<uint64_t>(core::monotonic_ms()));
        listener.requests[handle] = HeldRequest{event, request.value()};
        stream->release();
        wake();
        return;
      }
      accept_matched(listener, event, request.value(), stream);
      stream->release();  // the waiting table's reference
      return;
    }
  }
}

// Whether the request came from the IP address its connection's client has
// (rdma_cm's source against the TCP 4-tuple the request names, which the
// matcher compares with the accepted socket's).
bool Engine::from_connection_peer(const Listener& listener, const rdma::CmEvent& request,
                                  const wire::UpgradeRequest& parsed) const {
  sockaddr_storage source{};
  socklen_t length = listener.cm.source_of(request, &source);
  core::Result<wire::FamilyEndpoint> from = wire::endpoint_from_sockaddr(reinterpret_cast<sockaddr*>(&source), length);
  if (!from) return false;
  wire::FamilyEndpoint client = wire::canonical_endpoint(parsed.family, parsed.client);
  return from.value().family == client.family &&
         std::memcmp(from.value().endpoint.ip, client.endpoint.ip, sizeof client.endpoint.ip) == 0;
}

// Under the engine's lock.
bool Engine::redirect_if_claimed(Listener& listener, const rdma::CmEvent& request,
                                 const wire::UpgradeRequest& parsed) {
  if (listener.rendezvous || !listener.board || !listener.board->shared()) return false;
  // A claim is only ever written by a rendezvous listener's process (this
  // one too, if it claimed before it took the listener over): send it there.
  std::optional<Claim> claim = listener.board->find(key_of_request(parsed), core::monotonic_ms(), settle_ms());
  if (!claim) return false;
  reject(listener, request, parsed.nonce, wire::RejectReason::kRedirect, claim->port);
  VSOCK_LOG(kDebug, "request redirected to process %u, port %u", claim->pid, claim->port);
  return true;
}

// Held requests whose connection another process has claimed since they
// came. Under the engine's lock.
void Engine::redirect_claimed(Listener& listener) {
  for (auto it = listener.requests.begin(); it != listener.requests.end();) {
    if (!redirect_if_claimed(listener, it->second.event, it->second.request)) {
      ++it;
      continue;
    }
    listener.matcher.remove_request(it->first);
    it = listener.requests.erase(it);
  }
}

// Under the engine's lock; takes the stream's.
void Engine::accept_matched(Listener& listener, const rdma::CmEvent& request, const wire::UpgradeRequest& parsed,
                            StreamSocket* stream) {
  StreamLock stream_held = stream->lock();
  if (stream->kernel_only()) {
    reject(listener, request, parsed.nonce, wire::RejectReason::kConnection);
    return;
  }
  core::Result<Answered> answered = answer(listener, request, parsed.nonce, /*socket_accepted=*/true);
  if (!answered) {
    stream_held.unlock();
    if (answered.error() == ENOMEM)
      stream->fall_back_now(FallbackReason::kNoResources, "no resources for a channel");
    else
      stream->fall_back_now(FallbackReason::kLocalError, "could not accept the request");
    return;
  }
  stream->set_nonce(parsed.nonce);
  stream->set_channel(std::move(answered.value().channel));
  stream->connection() = std::move(answered.value().connection);
  core::stat_add(core::Stat::upgrade_attempts);
  stream->apply(stream->upgrade().on(UpgradeEvent::kRequestAccepted));
  // The client's Switch must come within this bound, or the server gives up
  // (falls back if it can).
  track(stream, core::monotonic_ms() + settle_ms());
}

// Room for one more early upgrade; a connection whose client has gone
// already (disconnected, never accepted) makes room if need be.
bool Engine::has_room_early(Listener& listener) {
  if (listener.early.size() < kEarlyCapacity) return true;
  for (auto it = listener.early.begin(); it != listener.early.end(); ++it) {
    rdma::CmConnectionState state = (*it)->answered.connection.state();
    if (state == rdma::CmConnectionState::kDisconnected || state == rdma::CmConnectionState::kFailed) {
      listener.early.erase(it);
      return true;
    }
  }
  return false;
}

// Accepts `request` with a fresh channel whose ring the UpgradeAccept
// names. Under the engine's lock. On failure the request has been rejected
// (ENOMEM: no channel could be made; EIO: the queue pair or rdma_accept).
core::Result<Answered> Engine::answer(Listener& listener, const rdma::CmEvent& request, uint64_t nonce,
                                      bool socket_accepted) {
  using R = core::Result<Answered>;
  Answered answered;
  answered.channel = new_channel_locked();
  if (!answered.channel) {
    reject(listener, request, nonce, wire::RejectReason::kConnection);
    return R::fail(ENOMEM);
  }
  rdma::CmQpSetup setup;
  setup.device = &device_;
  setup.existing = &answered.channel->queue_pair();
  core::Result<rdma::CmConnection> prepared = listener.cm.prepare(request, setup);  // rejects on failure
  if (!prepared) return R::fail(EIO);
  answered.connection = std::move(prepared.value());
  if (!answered.channel->post_initial_receives()) {
    answered.connection.reject(nullptr, 0);
    return R::fail(EIO);
  }
  wire::UpgradeAccept accept;
  accept.nonce = nonce;
  accept.flags = socket_accepted ? wire::kAcceptFlagBound : 0;
  accept.ring = answered.channel->local_ring();
  uint8_t bytes[wire::kUpgradeAcceptSize];
  wire::encode(accept, bytes);
  if (!answered.connection.accept(bytes, sizeof bytes)) return R::fail(EIO);  // accept() rejected it
  return R::ok(std::move(answered));
}

// Under the engine's lock. The request is answered either way.
void Engine::accept_early(Listener& listener, const rdma::CmEvent& request, const wire::UpgradeRequest& parsed) {
  core::Result<Answered> answered = answer(listener, request, parsed.nonce, /*socket_accepted=*/false);
  if (!answered) {
    // Rejected already; its socket, once accepted, learns why (on_accepted).
    if (answered.error() == ENOMEM) {
      const int64_t now = core::monotonic_ms();
      auto& list = listener.no_resources;
      while (!list.empty() && (list.size() >= kEarlyCapacity || now - list.front().second >= settle_ms()))
        list.erase(list.begin());
      list.emplace_back(parsed, now);
    }
    return;
  }
  auto early = std::make_unique<EarlyUpgrade>();
  early->since_ms = core::monotonic_ms();
  early->request = parsed;
  early->answered = std::move(answered.value());
  listener.early.push_back(std::move(early));
}

// accept() returned the socket of an early upgrade. Under the engine's lock.
void Engine::bind_early(std::unique_ptr<EarlyUpgrade> early, int fd, StreamSocket* stream) {
  StreamLock stream_held = stream->lock();
  if (stream->kernel_only()) return;  // the client sees the connection end
  rdma::CmConnectionState state = early->answered.connection.state();
  if (state == rdma::CmConnectionState::kDisconnected || state == rdma::CmConnectionState::kFailed) {
    // The client gave up before accept() (it never had our Bound, so all
    // its bytes are on TCP).
    stream_held.unlock();
    stream->fall_back_now(FallbackReason::kTransportError, "the client left the upgrade before accept()");
    return;
  }
  stream->set_nonce(early->request.nonce);
  stream->set_channel(std::move(early->answered.channel));
  stream->connection() = std::move(early->answered.connection);
  core::stat_add(core::Stat::upgrade_attempts);
  stream->apply(stream->upgrade().on(UpgradeEvent::kRequestAccepted));
  // ESTABLISHED already: Bound goes out now; else with the event.
  if (state == rdma::CmConnectionState::kConnected) stream->apply(stream->upgrade().on(UpgradeEvent::kCmEstablished));
  VSOCK_LOG(kDebug, "fd %d: bound to the upgrade accepted while in the backlog (%s)", fd,
            rdma::cm_connection_state_name(state));
  track(stream, core::monotonic_ms() + settle_ms());
}

void Engine::on_connection_event(StreamSocket* stream, const rdma::CmEvent& event) {
  rdma::CmConnection& connection = stream->connection();
  connection.on_event(event);
  switch (connection.state()) {
    case rdma::CmConnectionState::kConnected:
      if (event.type == RDMA_CM_EVENT_ESTABLISHED) stream->apply(stream->upgrade().on(UpgradeEvent::kCmEstablished));
      break;
    case rdma::CmConnectionState::kFailed:
    case rdma::CmConnectionState::kDisconnected:
      stream->on_transport_lost();
      break;
    default:
      break;
  }
}

}  // namespace vsock::sock::side_band
