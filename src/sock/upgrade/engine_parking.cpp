// The side band, parked channels (docs/protocol.md §1.2): a connection
// whose stream ended cleanly on both sides leaves its queue pair
// connected, and the next connection between the same two processes takes
// it with an Attach: no rdma_cm round trip, no queue pair, no registration.
#include <algorithm>

#include "sock/upgrade/engine.hpp"
#include "sock/wire/attach_message.hpp"

namespace vsock::sock::side_band {
namespace {

// Matcher handles of Attaches: rdma_cm ids are pointers, never this high.
constexpr uint64_t kAttachHandleBit = uint64_t{1} << 63;

bool endpoint_of(const sockaddr* address, socklen_t length, wire::FamilyEndpoint* out) {
  core::Result<wire::FamilyEndpoint> endpoint = wire::endpoint_from_sockaddr(address, length);
  if (!endpoint) return false;
  *out = wire::canonical_endpoint(endpoint.value().family, endpoint.value().endpoint);
  return true;
}

bool connection_peer(const rdma::CmConnection& connection, wire::FamilyEndpoint* out) {
  sockaddr_storage peer{};
  socklen_t length = connection.peer_address(&peer);
  return length != 0 && endpoint_of(reinterpret_cast<const sockaddr*>(&peer), length, out);
}

// A progress() that took completions, or a message waiting: do not sleep.
bool has_news(StreamChannel& channel) {
  core::Result<int> progressed = channel.progress();
  return (progressed && progressed.value() > 0) || channel.has_message();
}

bool send_bytes(StreamChannel& channel, const uint8_t* bytes, size_t length) {
  return static_cast<bool>(channel.send_message(bytes, length));
}

}  // namespace

// ------------------------------------------------------------ parking --

bool Engine::park_closed(Closing& closing, int64_t now) {
  StreamSocket* stream = closing.stream;
  if (!settings_.park_channels) return true;
  StreamLock stream_held = stream->lock();
  StreamChannel* channel = stream->kernel_only() ? nullptr : stream->channel();
  if (channel == nullptr || stream->connection().state() != rdma::CmConnectionState::kConnected) return true;
  stream->progress_locked();  // the peer's CLOSED may be in the CQ
  const bool client = stream->role() == UpgradeRole::kClient;
  // The server's Park may have come already, right after its CLOSED (the
  // channel keeps it apart from the stream's messages).
  bool park_came = false;
  uint8_t message[StreamChannel::kControlMessageMax];
  if (const size_t length = channel->take_message_after_close(message); length != 0) {
    if (!client || !wire::parse_park(message, length)) return true;  // something else: not reusable
    park_came = true;
  }
  if (!channel->reusable()) {
    // Only the peer's CLOSED missing (its application has not closed yet):
    // wait a while for it.
    const bool closed_may_come =
        channel->error() == 0 && channel->started() && channel->all_sent() && !channel->peer_closed();
    if (!closed_may_come) return true;
    // Meanwhile nothing may land in the closed socket's ring.
    channel->revoke_ring();
    if (closing.park_until_ms == 0) closing.park_until_ms = now + ParkedChannels::kParkWaitMs;
    return now >= closing.park_until_ms;
  }
  wire::FamilyEndpoint peer;
  if (!connection_peer(stream->connection(), &peer)) return true;
  if (!client) peer.endpoint.port = 0;  // a client's rdma_cm port says nothing of its next connection
  if (!parked_.has_room(peer)) return true;
  core::Result<StreamChannel> reused = StreamChannel::reuse(std::move(*channel));
  if (!reused) return true;  // nothing moved: torn down with the stream, connection first
  auto parked = std::make_unique<ParkedChannel>();
  parked->connection = std::move(stream->connection());
  parked->channel = std::make_unique<StreamChannel>(std::move(reused.value()));
  stream->take_channel();  // what is left of it holds nothing
  parked->client = client;
  parked->ready = !client || park_came;
  parked->peer = peer;
  parked->since_ms = now;
  if (!client) {
    uint8_t park[wire::kParkMessageSize];
    wire::encode_park(park);
    if (!send_bytes(*parked->channel, park, sizeof park)) return true;  // torn down with `parked`
  }
  core::stat_add(core::Stat::channels_parked);
  VSOCK_LOG(kDebug, "channel of a closed connection parked (%s side, %zu parked)", client ? "client" : "server",
            parked_.size() + 1);
  parked_.add(std::move(parked));
  return true;
}

void Engine::serve_parked(int64_t now) {
  for (std::unique_ptr<ParkedChannel>& expired : parked_.expire(now)) {
    VSOCK_LOG(kDebug, "parked channel unused for too long: closed");
    expired.reset();
  }
  for (size_t i = 0; i < parked_.size();) {
    ParkedChannel& parked = parked_.at(i);
    StreamChannel& channel = *parked.channel;
    core::Result<int> progressed = channel.progress();
    const rdma::CmConnectionState state = parked.connection.state();
    if (!progressed || channel.error() != 0 || state != rdma::CmConnectionState::kConnected) {
      parked_.take(i);  // the peer dropped its side, or the queue pair failed
      continue;
    }
    if (!channel.has_message()) {
      ++i;
      continue;
    }
    uint8_t message[StreamChannel::kControlMessageMax];
    core::Result<size_t> taken = channel.take_message(message, sizeof message);
    const size_t length = taken ? taken.value() : 0;
    const wire::ParkedMessageKind kind = wire::parked_message_kind(message, length);
    if (parked.client && !parked.ready && kind == wire::ParkedMessageKind::kPark && wire::parse_park(message, length)) {
      parked.ready = true;
      parked.since_ms = now;
      ++i;
      continue;
    }
    if (!parked.client && kind == wire::ParkedMessageKind::kAttach) {
      core::Result<wire::UpgradeRequest> request = wire::parse_attach(message, length);
      if (request) {
        const size_t before = parked_.size();
        on_attach(i, request.value());
        if (parked_.size() == before) ++i;  // refused: still parked
        continue;
      }
    }
    // Anything else on a parked channel breaks the protocol: it goes.
    VSOCK_LOG(kInfo, "unexpected message on a parked channel (%zu bytes, kind %d, %s side): closed", length,
              static_cast<int>(kind), parked.client ? "client" : "server");
    core::stat_add(core::Stat::stream_violations);
    parked_.take(i);
  }
}

bool Engine::yield_parked_memory() {
  if (parked_.size() == 0) return false;
  parked_.take(0);  // the oldest; its peer drops its side at the disconnect
  core::stat_add(core::Stat::parked_yielded);
  VSOCK_LOG(kDebug, "a parked channel closed: a new connection needs its memory");
  wake();  // the side-band thread may sleep on its completion fd
  return true;
}

// ------------------------------------------------------------ the server --

Listener* Engine::tcp_listener_for(const wire::UpgradeRequest& request) {
  wire::FamilyEndpoint server = wire::canonical_endpoint(request.family, request.server);
  for (auto& [key, listener] : listeners_) {
    if (listener->rendezvous || listener->fd < 0 || listener->closed_ms != 0) continue;
    if (!listener->bound_known) {
      // A listening socket cannot be bound again: asked once.
      sockaddr_storage local{};
      socklen_t length = sizeof local;
      if (sys::real().getsockname(listener->fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) continue;
      if (!endpoint_of(reinterpret_cast<const sockaddr*>(&local), length, &listener->bound)) continue;
      listener->bound_known = true;
    }
    const wire::FamilyEndpoint& bound = listener->bound;
    if (bound.endpoint.port != server.endpoint.port) continue;
    static const uint8_t kAny[16] = {};
    const bool wildcard = std::memcmp(bound.endpoint.ip, kAny, sizeof kAny) == 0;
    if (wildcard || same_address(bound, server)) return listener.get();
  }
  return nullptr;
}

void Engine::refuse_attach(ParkedChannel& parked, uint64_t nonce) {
  wire::RejectMessage reject;
  reject.nonce = nonce;
  reject.reason = wire::RejectReason::kConnection;
  uint8_t bytes[wire::kRejectMessageSize];
  wire::encode(reject, bytes);
  send_bytes(*parked.channel, bytes, sizeof bytes);
  core::stat_add(core::Stat::attach_refused);
}

// Under the engine's lock. Serves what needs nothing from another process:
// a socket accept() has returned here, or will within kAttachHoldMs (else,
// still in the backlog, as an early upgrade), of a listener only this
// process uses. A shared listener's is refused, and the client's rdma_cm
// request goes the way of §1.1.
void Engine::on_attach(size_t index, const wire::UpgradeRequest& request) {
  ParkedChannel& parked = parked_.at(index);
  const uint64_t nonce = request.nonce;
  wire::FamilyEndpoint client = wire::canonical_endpoint(request.family, request.client);
  if (!same_address(parked.peer, client)) {
    // The channel's process names a connection of another host's.
    core::stat_add(core::Stat::upgrade_requests_forged);
    refuse_attach(parked, nonce);
    return;
  }
  Listener* listener = tcp_listener_for(request);
  if (listener == nullptr || (listener->board && listener->board->shared())) {
    refuse_attach(parked, nonce);
    return;
  }
  for (const std::unique_ptr<EarlyUpgrade>& early : listener->early) {
    if (same_connection(early->request, request)) {
      refuse_attach(parked, nonce);
      return;
    }
  }
  const uint64_t handle = kAttachHandleBit | ++attach_handles_;
  RequestResult result = listener->matcher.add_request(request, handle, static_cast<uint64_t>(core::monotonic_ms()));
  if (result.evicted) {
    auto old = listener->requests.find(result.evicted_handle);
    if (old != listener->requests.end()) {
      reject(*listener, old->second.event, old->second.request.nonce, wire::RejectReason::kConnection);
      listener->requests.erase(old);
    }
  }
  switch (result.verdict) {
    case RequestVerdict::kDuplicate:
      refuse_attach(parked, nonce);
      return;
    case RequestVerdict::kPending:
      // accept() has not returned it yet: held until it does (the matcher
      // keeps the request), kAttachHoldMs at most.
      // (This is the side band's thread: its next sleep keeps the hold's
      // deadline, next_timeout_ms.)
      listener->attaches[handle] = Listener::HeldAttach{parked_.take(index), request, core::monotonic_ms()};
      return;
    case RequestVerdict::kMatched:
      break;
  }
  auto waiting = listener->sockets.find(result.fd);
  if (waiting == listener->sockets.end() || waiting->second->awaiting_claim()) {
    // A fork came first (the process that uses it claims it): the socket
    // waits for the rdma_cm request the refusal brings.
    SocketNames names;
    if (waiting != listener->sockets.end() && read_names(result.fd, &names))
      (void)listener->matcher.add_socket(result.fd, names.local_addr(), names.local_len, names.peer_addr(),
                                         names.peer_len, static_cast<uint64_t>(core::monotonic_ms()));
    refuse_attach(parked, nonce);
    return;
  }
  StreamSocket* stream = waiting->second;
  listener->sockets.erase(waiting);
  answer_attach(*listener, parked_.take(index), request, stream);
  stream->release();  // the waiting table's reference
}

bool Engine::take_held_attach(Listener& listener, uint64_t handle, int fd, StreamSocket* stream) {
  auto held = listener.attaches.find(handle);
  if (held == listener.attaches.end()) return false;
  Listener::HeldAttach attach = std::move(held->second);
  listener.attaches.erase(held);
  listener.matcher.remove_socket(fd);
  answer_attach(listener, std::move(attach.parked), attach.request, stream);
  return true;
}

void Engine::expire_held_attaches(Listener& listener, int64_t now) {
  for (auto it = listener.attaches.begin(); it != listener.attaches.end();) {
    if (now - it->second.since_ms < kAttachHoldMs) {
      ++it;
      continue;
    }
    Listener::HeldAttach attach = std::move(it->second);
    listener.matcher.remove_request(it->first);
    it = listener.attaches.erase(it);
    // Still in the backlog: answered now, as an early upgrade (a program
    // that connects and then accepts in one thread waits for this).
    if (has_room_early(listener) && tcp_connection_in_backlog(attach.request)) {
      answer_attach(listener, std::move(attach.parked), attach.request, nullptr);
      continue;
    }
    refuse_attach(*attach.parked, attach.request.nonce);
    attach.parked->since_ms = now;
    if (parked_.has_room(attach.parked->peer)) parked_.add(std::move(attach.parked));
  }
}

void Engine::answer_attach(Listener& listener, std::unique_ptr<ParkedChannel> parked,
                           const wire::UpgradeRequest& request, StreamSocket* stream) {
  wire::UpgradeAccept accept;
  accept.nonce = request.nonce;
  accept.flags = stream != nullptr ? wire::kAcceptFlagBound : 0;
  accept.ring = parked->channel->local_ring();
  uint8_t bytes[wire::kAttachedMessageSize];
  wire::encode_attached(accept, bytes);
  if (!send_bytes(*parked->channel, bytes, sizeof bytes)) {
    if (stream != nullptr) stream->fall_back_now(FallbackReason::kTransportError, "the parked channel failed");
    return;
  }
  core::stat_add(core::Stat::upgrade_attached);
  if (stream == nullptr) {
    auto upgrade = std::make_unique<EarlyUpgrade>();
    upgrade->since_ms = core::monotonic_ms();
    upgrade->request = request;
    upgrade->answered.channel = std::move(parked->channel);
    upgrade->answered.connection = std::move(parked->connection);
    listener.early.push_back(std::move(upgrade));
    return;
  }
  StreamLock stream_held = stream->lock();
  if (stream->kernel_only()) return;  // the channel goes: the client's Attach fails, it stays on TCP
  stream->set_nonce(request.nonce);
  stream->set_channel(std::move(parked->channel));
  stream->connection() = std::move(parked->connection);
  core::stat_add(core::Stat::upgrade_attempts);
  stream->apply(stream->upgrade().on(UpgradeEvent::kRequestAccepted));
  stream->apply(stream->upgrade().on(UpgradeEvent::kCmEstablished));  // the queue pair is connected
  track(stream, core::monotonic_ms() + settle_ms());
}

// ------------------------------------------------------------ the client --

bool Engine::attach_parked(int fd, StreamSocket* stream, const sockaddr* local, socklen_t local_len,
                           const sockaddr* peer, socklen_t peer_len) {
  wire::FamilyEndpoint server;
  if (!settings_.park_channels || parked_.size() == 0 || !endpoint_of(peer, peer_len, &server)) return false;
  std::unique_ptr<ParkedChannel> parked = parked_.take_ready(server);
  if (!parked) return false;
  core::Result<wire::UpgradeRequest> request = wire::build_upgrade_request(local, local_len, peer, peer_len, stream->nonce());
  if (!request) {
    parked_.add(std::move(parked));
    return false;
  }
  uint8_t bytes[wire::kAttachMessageSize];
  wire::encode_attach(request.value(), bytes);
  if (!send_bytes(*parked->channel, bytes, sizeof bytes)) return false;  // the channel goes
  StreamLock stream_held = stream->lock();
  stream->set_channel(std::move(parked->channel));
  stream->connection() = std::move(parked->connection);
  stream->set_fd_hint(fd);
  core::stat_add(core::Stat::upgrade_attempts);
  stream->apply(stream->upgrade().on(UpgradeEvent::kConnectStarted));
  track(stream, 0);
  // As long as an rdma_cm request would get (a loaded host answers late;
  // one given up on while its answer is under way stays on TCP).
  tracked_.back().attach_deadline_ms = core::monotonic_ms() + std::max<int64_t>(kAttachWaitMs, upgrade_deadline_ms());
  VSOCK_LOG(kDebug, "fd %d: upgrade asked on a parked channel", fd);
  stream_held.unlock();
  wake();
  return true;
}

void Engine::check_attach(Tracked& tracked, int64_t now) {
  StreamSocket* stream = tracked.stream;
  StreamChannel* channel = stream->channel();
  if (stream->kernel_only() || channel == nullptr) {
    tracked.attach_deadline_ms = 0;
    return;
  }
  core::Result<int> progressed = channel->progress();
  if (!progressed || channel->error() != 0 ||
      stream->connection().state() != rdma::CmConnectionState::kConnected)
    return attach_failed(tracked, false, "the parked channel failed");
  if (!channel->has_message()) {
    if (now >= tracked.attach_deadline_ms) attach_failed(tracked, false, "no answer to the Attach");
    return;
  }
  uint8_t message[StreamChannel::kControlMessageMax];
  core::Result<size_t> taken = channel->take_message(message, sizeof message);
  const size_t length = taken ? taken.value() : 0;
  if (wire::parked_message_kind(message, length) == wire::ParkedMessageKind::kReject) {
    core::Result<wire::RejectMessage> why = wire::parse_reject_message(message, length);
    const bool ours = why && why.value().nonce == stream->nonce();
    return attach_failed(tracked, ours, ours ? "the Attach was refused" : "a bad answer to the Attach");
  }
  core::Result<wire::UpgradeAccept> accept = wire::parse_attached(message, length);
  if (!accept || accept.value().nonce != stream->nonce())
    return attach_failed(tracked, false, "a bad answer to the Attach");
  if (rdma::Status started = start_channel_locked(*channel, accept.value().ring); !started)
    return attach_failed(tracked, false, "the server's ring could not be mirrored");
  tracked.attach_deadline_ms = 0;
  core::stat_add(core::Stat::upgrade_attached);
  stream->set_bound_promised((accept.value().flags & wire::kAcceptFlagBound) != 0);
  stream->apply(stream->upgrade().on(UpgradeEvent::kCmEstablished));
  remember_peer_of(stream, &answering_peers_, SharedNews::kRunsLibvsock);
}

void Engine::attach_failed(Tracked& tracked, bool keep_channel, const char* why) {
  StreamSocket* stream = tracked.stream;
  tracked.attach_deadline_ms = 0;
  core::stat_add(core::Stat::attach_failed);
  VSOCK_LOG(kDebug, "fd %d: %s: asking with rdma_cm", stream->fd_hint(), why);
  std::unique_ptr<StreamChannel> channel = stream->take_channel();
  rdma::CmConnection connection = std::move(stream->connection());
  wire::FamilyEndpoint server;
  if (keep_channel && channel && connection_peer(connection, &server)) {
    auto parked = std::make_unique<ParkedChannel>();
    parked->channel = std::move(channel);
    parked->connection = std::move(connection);
    parked->client = true;
    parked->ready = true;
    parked->peer = server;
    parked->since_ms = core::monotonic_ms();
    parked_.add(std::move(parked));
  }
  if (!ask_again(stream, 0, 0)) stream->apply(stream->upgrade().on(UpgradeEvent::kCmError));
}

// ------------------------------------------------------------- waiting --

// A connecting client's channel while its Attach waits, or its switch
// while connect() waits for it: nobody else sleeps on its completion fd
// then (connect() waits on the socket's condition), so the thread may read
// its events. Under the stream's lock.
StreamChannel* Engine::watched_channel(const Tracked& tracked) {
  StreamSocket* stream = tracked.stream;
  if (stream->kernel_only() || stream->channel() == nullptr) return nullptr;
  if (tracked.attach_deadline_ms != 0) return stream->channel();
  const bool connecting = stream->role() == UpgradeRole::kClient && !stream->upgrade_settled();
  return connecting && switch_in_progress(stream) ? stream->channel() : nullptr;
}

bool Engine::add_channel_fds(std::vector<pollfd>* fds) {
  bool quiet = true;
  for (size_t i = 0; i < parked_.size(); ++i) {
    StreamChannel& channel = *parked_.at(i).channel;
    if (!channel.arm()) continue;
    if (has_news(channel)) quiet = false;
    fds->push_back(pollfd{channel.completion_fd(), POLLIN, 0});
  }
  for (const Tracked& tracked : tracked_) {
    StreamLock stream_held = tracked.stream->lock();
    StreamChannel* channel = watched_channel(tracked);
    if (channel == nullptr || !channel->arm()) continue;
    if (has_news(*channel)) quiet = false;
    fds->push_back(pollfd{channel->completion_fd(), POLLIN, 0});
  }
  return quiet;
}

void Engine::drain_channel_events(const std::vector<pollfd>& woken) {
  // By fd: the lists may have changed while the thread slept (a channel
  // that now has a woken one's number has at worst nothing to read).
  auto did_wake = [&woken](int fd) {
    return std::any_of(woken.begin(), woken.end(),
                       [fd](const pollfd& p) { return p.fd == fd && (p.revents & POLLIN) != 0; });
  };
  for (size_t i = 0; i < parked_.size(); ++i) {
    StreamChannel& channel = *parked_.at(i).channel;
    if (did_wake(channel.completion_fd())) channel.drain_events();
  }
  for (const Tracked& tracked : tracked_) {
    StreamLock stream_held = tracked.stream->lock();
    StreamChannel* channel = watched_channel(tracked);
    // A stream's event taken here is one that a quiet epoll entry of the
    // application's would have woken for: say so (managed_socket.hpp).
    if (channel != nullptr && did_wake(channel->completion_fd()))
      note_wake_events_taken(channel->drain_events().value_or(0));
  }
}

}  // namespace vsock::sock::side_band
