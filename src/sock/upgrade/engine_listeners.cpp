// The side band, server side: a TCP listener's rdma_cm side, and the
// sockets accept() returns from it, matched with their requests.
#include "sock/upgrade/engine.hpp"

namespace vsock::sock::side_band {

bool read_names(int fd, SocketNames* names) {
  return fd >= 0 &&
         sys::real().getsockname(fd, reinterpret_cast<sockaddr*>(&names->local), &names->local_len) == 0 &&
         sys::real().getpeername(fd, reinterpret_cast<sockaddr*>(&names->peer), &names->peer_len) == 0;
}

uint64_t Engine::listen(int fd, std::shared_ptr<RendezvousBoard> board) {
  sockaddr_storage local{};
  socklen_t local_len = sizeof local;
  if (sys::real().getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return 0;
  if (board) board->set_address(reinterpret_cast<sockaddr*>(&local), local_len);
  std::lock_guard<std::mutex> held(mu_);
  auto listener = std::make_unique<Listener>();
  listener->fd = fd;
  listener->board = std::move(board);
  listener->matcher = UpgradeMatcher(kMatcherCapacity, uint64_t{settings_.upgrade_timeout_ms} * 4);
  core::Result<wire::FamilyEndpoint> named = wire::endpoint_from_sockaddr(reinterpret_cast<sockaddr*>(&local), local_len);
  if (named) close_lingering(named.value().endpoint.port);  // listen() again on a port just closed
  core::Result<rdma::CmListener> cm = rdma::CmListener::create(channel_, reinterpret_cast<sockaddr*>(&local), 128);
  if (!cm) {
    VSOCK_LOG(kInfo, "listener fd %d: no rdma_cm listener (%s): its connections stay on TCP", fd,
              std::strerror(cm.error()));
    return 0;
  }
  listener->cm = std::move(cm.value());
  uint64_t key = next_key_++;
  listeners_[key] = std::move(listener);
  return key;
}

void Engine::stop_listening(uint64_t key, const RendezvousBoard* board) {
  std::lock_guard<std::mutex> held(mu_);
  auto it = listeners_.find(key);
  if (it == listeners_.end() && board != nullptr) it = listener_entry_of(board);
  if (it == listeners_.end()) return;
  Listener& listener = *it->second;
  // Connections still in the backlog are reset by the kernel: their
  // upgrades end with them (the clients see DISCONNECTED). Those accepted
  // wait for their claim: the listener lingers for them (awaits_requests).
  drop_early_in_backlog(listener);
  // The owner of a shared board closed its last listener of the port, but
  // a process it forked, or one that joined, still listens there: the
  // port's requests still come here, to be redirected to their claimers.
  if (listener.closed_ms == 0 && !listener.rendezvous && listener.board && listener.board->shared() &&
      listener.board->owner() == static_cast<uint32_t>(::getpid()) && listening_elsewhere(listener)) {
    listener.closed_ms = core::monotonic_ms();
    listener.kept = true;
    listener.kept_look_ms = listener.closed_ms;
    listener.fd = -1;
    VSOCK_LOG(kDebug, "listener closed here, but its port is listened on elsewhere: its rdma_cm side stays");
    return;
  }
  if (awaits_requests(listener) && listener.closed_ms == 0) {
    listener.closed_ms = core::monotonic_ms();  // lingers for the requests of what it accepted
    wake();
    return;
  }
  close_listener(it);
}

// Whether a TCP socket still listens on the board's address and port.
bool Engine::listening_elsewhere(const Listener& listener) const {
  sockaddr_storage address{};
  socklen_t length = listener.board ? listener.board->address(&address) : 0;
  return length != 0 && tcp_listening_on(reinterpret_cast<sockaddr*>(&address), length);
}

uint64_t Engine::take_kept_listener(int fd, const sockaddr* local, socklen_t length,
                                    std::shared_ptr<RendezvousBoard>* board) {
  core::Result<wire::FamilyEndpoint> at = wire::endpoint_from_sockaddr(local, length);
  if (!at) return 0;
  std::lock_guard<std::mutex> held(mu_);
  for (auto& [key, listener] : listeners_) {
    if (!listener->kept || !listener->board) continue;
    sockaddr_storage address{};
    socklen_t address_len = listener->board->address(&address);
    core::Result<wire::FamilyEndpoint> its =
        wire::endpoint_from_sockaddr(reinterpret_cast<sockaddr*>(&address), address_len);
    if (!its || its.value().family != at.value().family || !(its.value().endpoint == at.value().endpoint)) continue;
    listener->kept = false;
    listener->closed_ms = 0;
    listener->fd = fd;
    *board = listener->board;
    return key;
  }
  return 0;
}

void Engine::listener_moved(uint64_t key, int fd) {
  std::lock_guard<std::mutex> held(mu_);
  auto it = listeners_.find(key);
  if (it != listeners_.end()) it->second->fd = fd;
}

// Whether what the listener accepted may still need its rdma_cm side: a
// socket waits for its request, a request for its claim, or a socket of a
// shared listener for its first use (the claim). Under the engine's lock.
bool Engine::awaits_requests(const Listener& listener) const {
  if (listener.matcher.waiting_sockets() > 0 || !listener.requests.empty()) return true;
  if (!listener.board) return false;
  for (const Unclaimed& entry : unclaimed_)
    if (entry.stream->rendezvous().get() == listener.board.get()) return true;
  return false;
}

// Under the engine's lock.
void Engine::close_listener(std::map<uint64_t, std::unique_ptr<Listener>>::iterator it) {
  Listener& listener = *it->second;
  for (auto& [handle, held_request] : listener.requests)
    reject(listener, held_request.event, held_request.request.nonce, wire::RejectReason::kConnection);
  listener.requests.clear();
  for (auto& [fd, stream] : listener.sockets) {
    stream->fall_back_now(FallbackReason::kDeclined, "listener closed before the request came");
    stream->release();
  }
  listener.sockets.clear();
  listener.early.clear();
  listeners_.erase(it);
}

// Closed listeners whose accepted sockets all had their requests, or whose
// linger is over; with `port`, also those on that port (a new listen()
// there needs the rdma_cm port). Under the engine's lock.
void Engine::close_lingering(uint16_t port) {
  const int64_t now = core::monotonic_ms();
  for (auto it = listeners_.begin(); it != listeners_.end();) {
    Listener& listener = *it->second;
    bool done = listener.closed_ms != 0 &&
                (((!awaits_requests(listener) || now - listener.closed_ms >= settle_ms()) && !still_kept(listener, now)) ||
                 (port != 0 && listener.cm.port() == port));
    if (!done) {
      ++it;
      continue;
    }
    auto next = std::next(it);
    close_listener(it);
    it = next;
  }
}

// A kept listener (stop_listening) stays while its port is listened on
// elsewhere, looked at every kKeptLookMs. Under the engine's lock.
bool Engine::still_kept(Listener& listener, int64_t now) {
  if (!listener.kept) return false;
  if (now - listener.kept_look_ms < kKeptLookMs) return true;
  listener.kept_look_ms = now;
  if (listening_elsewhere(listener)) return true;
  listener.kept = false;
  VSOCK_LOG(kDebug, "nobody listens on the port of a kept rdma_cm listener any more: closed");
  return false;
}

// Every reject says why, so that the client remembers only a refusal of
// the whole peer (protocol.md §1: Reject).
void Engine::reject(Listener& listener, const rdma::CmEvent& request, uint64_t nonce, wire::RejectReason reason,
                    uint16_t port) {
  wire::RejectMessage message;
  message.nonce = nonce;
  message.reason = reason;
  message.port = port;
  uint8_t bytes[wire::kRejectMessageSize];
  wire::encode(message, bytes);
  listener.cm.reject(request, bytes, sizeof bytes);
}

void Engine::on_accepted(uint64_t key, int fd, StreamSocket* stream) {
  SocketNames names;
  bool named = read_names(fd, &names);
  std::lock_guard<std::mutex> held(mu_);
  auto it = listeners_.find(key);
  if (!named || it == listeners_.end()) {
    stream->fall_back_now(FallbackReason::kDeclined, "listener does not upgrade");
    return;
  }
  upgrade_here(*it->second, fd, stream, names);
}

// Under the engine's lock.
void Engine::upgrade_here(Listener& listener, int fd, StreamSocket* stream, const SocketNames& names) {
  stream->set_fd_hint(fd);
  auto early = find_early(listener, names);
  if (early != listener.early.end()) {
    std::unique_ptr<EarlyUpgrade> taken = std::move(*early);
    listener.early.erase(early);
    bind_early(std::move(taken), fd, stream);
    return;
  }
  for (auto at = listener.no_resources.begin(); at != listener.no_resources.end(); ++at) {
    if (!wire::upgrade_request_matches(at->first, names.local_addr(), names.local_len, names.peer_addr(),
                                       names.peer_len))
      continue;
    listener.no_resources.erase(at);
    stream->fall_back_now(FallbackReason::kNoResources, "no resources for a channel when its request came");
    return;
  }
  add_accepted(listener, fd, stream, names);
}

// Under the engine's lock.
void Engine::drop_early_in_backlog(Listener& listener) {
  auto& early = listener.early;
  early.erase(std::remove_if(early.begin(), early.end(), [](const std::unique_ptr<EarlyUpgrade>& e) { return !e->accepted; }),
              early.end());
}

std::vector<std::unique_ptr<EarlyUpgrade>>::iterator Engine::find_early(Listener& listener,
                                                                         const SocketNames& names) {
  return std::find_if(listener.early.begin(), listener.early.end(), [&](const std::unique_ptr<EarlyUpgrade>& e) {
    return wire::upgrade_request_matches(e->request, names.local_addr(), names.local_len, names.peer_addr(),
                                         names.peer_len);
  });
}

// The socket waits for its request in `listener`'s matcher, or takes the
// one that waits there. Under the engine's lock.
void Engine::add_accepted(Listener& listener, int fd, StreamSocket* stream, const SocketNames& names) {
  core::Result<SocketResult> added =
      listener.matcher.add_socket(fd, names.local_addr(), names.local_len, names.peer_addr(), names.peer_len,
                                  static_cast<uint64_t>(core::monotonic_ms()));
  if (!added) {
    stream->fall_back_now(FallbackReason::kDeclined, "unreadable address");
    return;
  }
  const SocketResult& result = added.value();
  if (result.evicted) {
    auto old = listener.sockets.find(result.evicted_fd);
    if (old != listener.sockets.end()) {
      old->second->fall_back_now(FallbackReason::kDeclined, "too many sockets waiting for their request");
      old->second->release();
      listener.sockets.erase(old);
    }
  }
  // A socket under a reused fd number replaced one that never matched.
  auto stale = listener.sockets.find(fd);
  if (stale != listener.sockets.end()) {
    // (The same socket again: it went up for claim at a fork and this
    // process claimed it back.)
    if (stale->second != stream) stale->second->fall_back_now(FallbackReason::kDeclined, "closed before its request came");
    stale->second->release();
    listener.sockets.erase(stale);
  }
  if (!result.matched) {
    stream->retain();
    listener.sockets[fd] = stream;
    wake();  // the thread now has a matcher deadline to keep
    return;
  }
  if (take_held_attach(listener, result.handle, fd, stream)) return;
  auto request = listener.requests.find(result.handle);
  if (request == listener.requests.end()) {
    stream->fall_back_now(FallbackReason::kDeclined, "request vanished");
    return;
  }
  rdma::CmEvent event = request->second.event;
  listener.requests.erase(request);
  listener.matcher.remove_socket(fd);
  accept_matched(listener, event, result.request, stream);
}

std::map<uint64_t, std::unique_ptr<Listener>>::iterator Engine::listener_entry_of(const RendezvousBoard* board) {
  return std::find_if(listeners_.begin(), listeners_.end(),
                      [&](const auto& entry) { return entry.second->board.get() == board && !entry.second->rendezvous; });
}

Listener* Engine::listener_of(const RendezvousBoard* board) {
  auto it = listener_entry_of(board);
  return it == listeners_.end() ? nullptr : it->second.get();
}

}  // namespace vsock::sock::side_band
