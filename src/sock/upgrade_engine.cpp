#include "sock/upgrade_engine.hpp"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/clock.hpp"
#include "core/config.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "rdma/cm_event_channel.hpp"
#include "rdma/cm_listener.hpp"
#include "rdma/cm_qp.hpp"
#include "rdma/device.hpp"
#include "sock/held_data_watch.hpp"
#include "sock/offload_policy.hpp"
#include "sock/peer_failure_cache.hpp"
#include "sock/stream_config.hpp"
#include "sock/tcp_lookup.hpp"
#include "sock/upgrade_matcher.hpp"
#include "sock/wire/upgrade_accept.hpp"
#include "sock/wire/upgrade_request.hpp"
#include "sys/real_calls.hpp"
#include "sys/reentry_guard.hpp"

namespace vsock::sock {
namespace {

constexpr size_t kMatcherCapacity = 1024;
constexpr size_t kPeerCacheCapacity = 256;
// Requests answered before accept() (their connection still in the kernel's
// backlog) that one listener holds at most; each holds a channel (rings,
// queue pair). Beyond it a request waits for accept() as the matcher says.
constexpr size_t kEarlyCapacity = 32;
// A closed connection's data and FIN get this long to reach the peer.
constexpr int64_t kCloseDrainMs = 10000;
// How often the thread looks at connections it is draining.
constexpr int kDrainPollMs = 2;
// How often the thread polls connections between rdma_cm's ESTABLISHED and
// the switch (only the queue pair reports Bound and Switch).
constexpr int kSwitchPollMs = 5;
// How often it looks at connections that hold back small writes (Nagle,
// autocork) the application has not flushed: the kernel sends what Nagle
// held when the ACK comes; this is the bound on the extra delay here.
constexpr int kHeldDataPollMs = 2;

uint64_t random_nonce() {
  uint64_t nonce = 0;
  while (::getrandom(&nonce, sizeof nonce, 0) != static_cast<ssize_t>(sizeof nonce) || nonce == 0) {
  }
  return nonce;
}

// A stream the engine holds a reference to.
struct Tracked {
  StreamSocket* stream;
  int64_t deadline_ms;  // the upgrade must have settled by then (0: none)
};

struct Closing {
  StreamSocket* stream;
  int64_t deadline_ms;
};

// A request accepted while its TCP connection was still in the kernel's
// backlog, waiting here for accept() to return its socket. The client
// writes on TCP until our Bound (sent once the socket is ours), so one that
// accept() never returns here — e.g. a forked worker accepted it — is
// simply disconnected after a while and that client stays on TCP.
// A request answered with a fresh channel (UpgradeAccept names its ring).
struct Answered {
  std::unique_ptr<StreamChannel> channel;
  rdma::CmConnection connection;  // declared after the channel: torn down first
};

struct EarlyUpgrade {
  int64_t since_ms;
  wire::UpgradeRequest request;
  Answered answered;
};

struct Listener {
  int fd = -1;
  rdma::CmListener cm;
  UpgradeMatcher matcher{kMatcherCapacity, 0};
  std::map<uint64_t, rdma::CmEvent> requests;  // waiting requests by handle (their cm id)
  std::map<int, StreamSocket*> sockets;         // accepted sockets waiting for their request (retained)
  std::vector<std::unique_ptr<EarlyUpgrade>> early;  // oldest first
};

class Engine final : public UpgradeEngine {
 public:
  Engine(const rdma::Device& device, rdma::CmEventChannel channel, int wake_fd)
      : device_(device),
        channel_(std::move(channel)),
        wake_fd_(wake_fd),
        settings_(core::config().settings),
        cache_(kPeerCacheCapacity, uint64_t{settings_.peer_fail_cache_s} * 1000) {}

  void run();

  bool start_connect(int fd, StreamSocket* stream, const sockaddr* peer, socklen_t peer_len) override;
  bool peer_failed_recently(const sockaddr* peer, socklen_t peer_len) override;
  uint64_t listen(int fd) override;
  void stop_listening(uint64_t key) override;
  void on_accepted(uint64_t key, int fd, StreamSocket* stream) override;
  void on_closed(StreamSocket* stream, bool drain) override;
  // Makes the thread look at its timers and sockets now.
  void wake();

 private:
  int upgrade_deadline_ms() const { return static_cast<int>(settings_.upgrade_timeout_ms); }
  // How long the other side gets to take its next step once rdma_cm is
  // under way: the client's Switch after our accept, accept() for an early
  // upgrade (then its client stays on TCP).
  int64_t settle_ms() const { return 4 * int64_t{upgrade_deadline_ms()} + 1000; }
  void dispatch(const rdma::CmEvent& event);
  void on_request(Listener& listener, const rdma::CmEvent& event);
  void accept_matched(Listener& listener, const rdma::CmEvent& request, const wire::UpgradeRequest& parsed,
                      StreamSocket* stream);
  void reject(Listener& listener, const rdma::CmEvent& request);
  core::Result<Answered> answer(Listener& listener, const rdma::CmEvent& request, uint64_t nonce);
  bool has_room_early(Listener& listener);
  void accept_early(Listener& listener, const rdma::CmEvent& request, const wire::UpgradeRequest& parsed);
  void bind_early(std::unique_ptr<EarlyUpgrade> early, int fd, StreamSocket* stream);
  void on_connector_event(StreamSocket* stream, const rdma::CmEvent& event);
  void finish_connect(StreamSocket* stream);
  void on_connection_event(StreamSocket* stream, const rdma::CmEvent& event);
  void check_timers();
  static bool switch_in_progress(StreamSocket* stream);
  int next_timeout_ms();
  void track(StreamSocket* stream, int64_t deadline_ms);
  void untrack(StreamSocket* stream);
  void drop_waiting_socket(StreamSocket* stream);
  std::unique_ptr<StreamChannel> new_channel();

  const rdma::Device& device_;
  rdma::CmEventChannel channel_;
  int wake_fd_;
  const core::Settings& settings_;
  std::mutex mu_;
  PeerFailureCache cache_;
  uint64_t next_key_ = 1;
  std::map<uint64_t, std::unique_ptr<Listener>> listeners_;
  std::vector<Tracked> tracked_;
  std::vector<Closing> closing_;
};

std::unique_ptr<StreamChannel> Engine::new_channel() {
  core::Result<StreamChannel> made = StreamChannel::create(device_, StreamConfig::from_settings(settings_));
  if (!made) return nullptr;
  return std::make_unique<StreamChannel>(std::move(made.value()));
}

void Engine::wake() {
  uint64_t one = 1;
  (void)!sys::real().write(wake_fd_, &one, sizeof one);
}

void Engine::track(StreamSocket* stream, int64_t deadline_ms) {
  stream->retain();
  tracked_.push_back(Tracked{stream, deadline_ms});
}

void Engine::untrack(StreamSocket* stream) {
  auto it = std::find_if(tracked_.begin(), tracked_.end(), [&](const Tracked& t) { return t.stream == stream; });
  if (it == tracked_.end()) return;
  tracked_.erase(it);
  stream->release();
}

// ------------------------------------------------------------------ client --

bool Engine::peer_failed_recently(const sockaddr* peer, socklen_t peer_len) {
  std::lock_guard<std::mutex> held(mu_);
  return cache_.should_skip(peer, peer_len, static_cast<uint64_t>(core::monotonic_ms()));
}

bool Engine::start_connect(int fd, StreamSocket* stream, const sockaddr* peer, socklen_t peer_len) {
  sockaddr_storage local{};
  socklen_t local_len = sizeof local;
  if (sys::real().getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) {
    stream->fall_back_now(FallbackReason::kLocalError, "getsockname failed");
    return false;
  }
  core::Result<wire::UpgradeRequest> request =
      wire::build_upgrade_request(reinterpret_cast<sockaddr*>(&local), local_len, peer, peer_len, stream->nonce());
  if (!request) {
    stream->fall_back_now(FallbackReason::kDeclined, "address family not upgradable");
    return false;
  }
  std::unique_ptr<StreamChannel> channel = new_channel();
  if (!channel) {
    stream->fall_back_now(FallbackReason::kLocalError, "no resources for a channel");
    return false;
  }
  rdma::CmConnectParams params;
  std::memcpy(&params.destination, peer, std::min<size_t>(peer_len, sizeof params.destination));
  params.source = local;
  params.timeout_ms = upgrade_deadline_ms();
  wire::encode(request.value(), params.private_data);
  params.private_data_length = static_cast<uint8_t>(wire::kUpgradeRequestSize);
  rdma::CmQpSetup setup;
  setup.device = &device_;
  setup.existing = &channel->queue_pair();

  std::lock_guard<std::mutex> held(mu_);
  std::unique_lock<std::mutex> stream_held = stream->lock();
  core::Result<rdma::CmConnector> connector = rdma::CmConnector::start(channel_, params, setup);
  if (!connector) {
    stream_held.unlock();
    stream->fall_back_now(FallbackReason::kLocalError, "rdma_cm could not start");
    return false;
  }
  stream->set_channel(std::move(channel));
  stream->connector() = std::move(connector.value());
  stream->set_fd_hint(fd);
  core::stat_add(core::Stat::upgrade_attempts);
  stream->apply(stream->upgrade().on(UpgradeEvent::kConnectStarted));
  track(stream, 0);
  // An address rdma_cm refuses outright has its outcome already.
  if (stream->connector().outcome() != rdma::CmOutcome::kPending) finish_connect(stream);
  stream_held.unlock();
  wake();
  return true;
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
      if (!accept || accept.value().nonce != stream->nonce() || channel == nullptr ||
          !channel->start(accept.value().ring)) {
        event = UpgradeEvent::kCmRejected;
        break;
      }
      stream->connection() = connector.take_connection();
      stream->apply(stream->upgrade().on(UpgradeEvent::kCmEstablished));
      return;
    }
    case rdma::CmOutcome::kRejected: event = UpgradeEvent::kCmRejected; break;
    case rdma::CmOutcome::kNoListener: event = UpgradeEvent::kCmNoListener; break;
    case rdma::CmOutcome::kUnreachable: event = UpgradeEvent::kCmUnreachable; break;
    case rdma::CmOutcome::kTimeout: event = UpgradeEvent::kCmTimeout; break;
    case rdma::CmOutcome::kAddressError:
    case rdma::CmOutcome::kRouteError:
    case rdma::CmOutcome::kError: event = UpgradeEvent::kCmError; break;
  }
  stream->apply(stream->upgrade().on(event));
  FallbackReason reason = stream->upgrade().fallback_reason();
  if (stream->kernel_only() && UpgradeState::remember_peer(reason)) {
    // Only a peer that took our TCP connection and still said no is worth
    // remembering: a refused TCP connect says nothing about its library.
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof peer;
    int fd = stream->fd_hint();
    if (fd >= 0 && sys::real().getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0)
      cache_.record_failure(reinterpret_cast<sockaddr*>(&peer), peer_len, static_cast<uint64_t>(core::monotonic_ms()));
  }
}

// ------------------------------------------------------------------ server --

uint64_t Engine::listen(int fd) {
  sockaddr_storage local{};
  socklen_t local_len = sizeof local;
  if (sys::real().getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return 0;
  std::lock_guard<std::mutex> held(mu_);
  auto listener = std::make_unique<Listener>();
  listener->fd = fd;
  listener->matcher = UpgradeMatcher(kMatcherCapacity, uint64_t{settings_.upgrade_timeout_ms} * 4);
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

void Engine::stop_listening(uint64_t key) {
  std::lock_guard<std::mutex> held(mu_);
  auto it = listeners_.find(key);
  if (it == listeners_.end()) return;
  Listener& listener = *it->second;
  for (auto& [handle, request] : listener.requests) reject(listener, request);
  listener.requests.clear();
  for (auto& [fd, stream] : listener.sockets) {
    stream->fall_back_now(FallbackReason::kDeclined, "listener closed before the request came");
    stream->release();
  }
  listener.sockets.clear();
  // Connections still in the backlog are reset by the kernel: their
  // upgrades end with them (the clients see DISCONNECTED).
  listener.early.clear();
  listeners_.erase(it);
}

void Engine::reject(Listener& listener, const rdma::CmEvent& request) { listener.cm.reject(request, nullptr, 0); }

void Engine::on_accepted(uint64_t key, int fd, StreamSocket* stream) {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof local, peer_len = sizeof peer;
  bool named = sys::real().getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0 &&
               sys::real().getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0;
  std::lock_guard<std::mutex> held(mu_);
  auto it = listeners_.find(key);
  if (!named || it == listeners_.end()) {
    stream->fall_back_now(FallbackReason::kDeclined, "listener does not upgrade");
    return;
  }
  Listener& listener = *it->second;
  stream->set_fd_hint(fd);
  for (auto early = listener.early.begin(); early != listener.early.end(); ++early) {
    if (!wire::upgrade_request_matches((*early)->request, reinterpret_cast<sockaddr*>(&local), local_len,
                                       reinterpret_cast<sockaddr*>(&peer), peer_len))
      continue;
    std::unique_ptr<EarlyUpgrade> taken = std::move(*early);
    listener.early.erase(early);
    bind_early(std::move(taken), fd, stream);
    return;
  }
  core::Result<SocketResult> added =
      listener.matcher.add_socket(fd, reinterpret_cast<sockaddr*>(&local), local_len,
                                  reinterpret_cast<sockaddr*>(&peer), peer_len,
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
    stale->second->fall_back_now(FallbackReason::kDeclined, "closed before its request came");
    stale->second->release();
    listener.sockets.erase(stale);
  }
  if (!result.matched) {
    stream->retain();
    listener.sockets[fd] = stream;
    wake();  // the thread now has a matcher deadline to keep
    return;
  }
  auto request = listener.requests.find(result.handle);
  if (request == listener.requests.end()) {
    stream->fall_back_now(FallbackReason::kDeclined, "request vanished");
    return;
  }
  rdma::CmEvent event = request->second;
  listener.requests.erase(request);
  listener.matcher.remove_socket(fd);
  accept_matched(listener, event, result.request, stream);
}

void Engine::on_request(Listener& listener, const rdma::CmEvent& event) {
  core::Result<wire::UpgradeRequest> request =
      wire::parse_upgrade_request(event.private_data.bytes, event.private_data.length);
  if (!request) {
    VSOCK_LOG(kInfo, "rdma_cm request with malformed private data: rejected");
    reject(listener, event);
    return;
  }
  for (const std::unique_ptr<EarlyUpgrade>& early : listener.early) {
    if (same_connection(early->request, request.value())) {
      reject(listener, event);  // the connection has its upgrade already
      return;
    }
  }
  uint64_t handle = reinterpret_cast<uint64_t>(event.id);
  RequestResult result =
      listener.matcher.add_request(request.value(), handle, static_cast<uint64_t>(core::monotonic_ms()));
  if (result.evicted) {
    auto old = listener.requests.find(result.evicted_handle);
    if (old != listener.requests.end()) {
      reject(listener, old->second);
      listener.requests.erase(old);
    }
  }
  switch (result.verdict) {
    case RequestVerdict::kDuplicate:
      reject(listener, event);
      return;
    case RequestVerdict::kPending:
      // Its connection is still in the kernel's backlog (or the client is
      // faster than accept()): answer now, so that a client blocked in
      // connect() does not wait for an accept() that may only come after
      // connect() returns (one thread doing both, or a slow server).
      // Only for a connection that really waits here: a request naming one
      // that does not exist gets no queue pair (it waits, then is rejected).
      if (has_room_early(listener) && tcp_connection_exists(request.value())) {
        listener.matcher.remove_request(handle);
        accept_early(listener, event, request.value());
        return;
      }
      listener.requests[handle] = event;
      return;
    case RequestVerdict::kMatched: {
      auto waiting = listener.sockets.find(result.fd);
      if (waiting == listener.sockets.end()) {
        reject(listener, event);
        return;
      }
      StreamSocket* stream = waiting->second;
      listener.sockets.erase(waiting);
      accept_matched(listener, event, request.value(), stream);
      stream->release();  // the waiting table's reference
      return;
    }
  }
}

// Under the engine's lock; takes the stream's.
void Engine::accept_matched(Listener& listener, const rdma::CmEvent& request, const wire::UpgradeRequest& parsed,
                            StreamSocket* stream) {
  std::unique_lock<std::mutex> stream_held = stream->lock();
  if (stream->kernel_only()) {
    reject(listener, request);
    return;
  }
  core::Result<Answered> answered = answer(listener, request, parsed.nonce);
  if (!answered) {
    stream_held.unlock();
    stream->fall_back_now(FallbackReason::kLocalError,
                          answered.error() == ENOMEM ? "no resources for a channel" : "could not accept the request");
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
core::Result<Answered> Engine::answer(Listener& listener, const rdma::CmEvent& request, uint64_t nonce) {
  using R = core::Result<Answered>;
  Answered answered;
  answered.channel = new_channel();
  if (!answered.channel) {
    reject(listener, request);
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
  accept.ring = answered.channel->local_ring();
  uint8_t bytes[wire::kUpgradeAcceptSize];
  wire::encode(accept, bytes);
  if (!answered.connection.accept(bytes, sizeof bytes)) return R::fail(EIO);  // accept() rejected it
  return R::ok(std::move(answered));
}

// Under the engine's lock. The request is answered either way.
void Engine::accept_early(Listener& listener, const rdma::CmEvent& request, const wire::UpgradeRequest& parsed) {
  core::Result<Answered> answered = answer(listener, request, parsed.nonce);
  if (!answered) return;
  auto early = std::make_unique<EarlyUpgrade>();
  early->since_ms = core::monotonic_ms();
  early->request = parsed;
  early->answered = std::move(answered.value());
  listener.early.push_back(std::move(early));
}

// accept() returned the socket of an early upgrade. Under the engine's lock.
void Engine::bind_early(std::unique_ptr<EarlyUpgrade> early, int fd, StreamSocket* stream) {
  std::unique_lock<std::mutex> stream_held = stream->lock();
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

// --------------------------------------------------------- the thread --

void Engine::dispatch(const rdma::CmEvent& event) {
  for (auto& [key, listener] : listeners_) {
    for (const std::unique_ptr<EarlyUpgrade>& early : listener->early) {
      if (!early->answered.connection.owns(event)) continue;
      early->answered.connection.on_event(event);
      return;
    }
    if (!listener->cm.owns(event)) continue;
    if (event.type == RDMA_CM_EVENT_CONNECT_REQUEST) on_request(*listener, event);
    return;
  }
  for (const Tracked& tracked : tracked_) {
    StreamSocket* stream = tracked.stream;
    std::unique_lock<std::mutex> stream_held = stream->lock();
    if (stream->connector().owns(event)) {
      on_connector_event(stream, event);
      return;
    }
    if (stream->connection().owns(event)) {
      on_connection_event(stream, event);
      return;
    }
  }
  VSOCK_LOG(kDebug, "rdma_cm event %s for no one", rdma::cm_event_name(event.type));
}

void Engine::check_timers() {
  const int64_t now = core::monotonic_ms();
  for (auto& [key, listener] : listeners_) {
    Expired expired = listener->matcher.expire(static_cast<uint64_t>(now));
    for (uint64_t handle : expired.rejected_handles) {
      auto it = listener->requests.find(handle);
      if (it == listener->requests.end()) continue;
      reject(*listener, it->second);
      listener->requests.erase(it);
    }
    for (int fd : expired.tcp_fds) {
      auto it = listener->sockets.find(fd);
      if (it == listener->sockets.end()) continue;
      it->second->fall_back_now(FallbackReason::kDeclined, "no upgrade request came");
      it->second->release();
      listener->sockets.erase(it);
    }
  }
  for (auto& [key, listener] : listeners_) {
    auto& early = listener->early;
    early.erase(std::remove_if(early.begin(), early.end(),
                               [&](const std::unique_ptr<EarlyUpgrade>& e) {
                                 return now - e->since_ms >= settle_ms();
                               }),
                early.end());
  }
  for (size_t i = 0; i < tracked_.size();) {
    StreamSocket* stream = tracked_[i].stream;
    bool drop = false;
    {
      std::unique_lock<std::mutex> stream_held = stream->lock();
      if (stream->connector().outcome() == rdma::CmOutcome::kPending &&
          stream->upgrade().phase() == UpgradePhase::kConnecting) {
        if (stream->connector().check_deadline() != rdma::CmOutcome::kPending) finish_connect(stream);
      }
      // The switch goes on while the application does not touch the
      // socket: the Bound, the Switch and the reply to it are taken here.
      if (switch_in_progress(stream)) stream->progress_locked();
      // Small writes held back (Nagle, autocork) while the application is
      // busy elsewhere go out once the completion they wait for is in and
      // the coalescing window has passed.
      if (stream->holds_data_locked()) stream->progress_locked();
      UpgradePhase phase = stream->upgrade().phase();
      if (tracked_[i].deadline_ms != 0 && now >= tracked_[i].deadline_ms && phase != UpgradePhase::kSwitched &&
          phase != UpgradePhase::kFailed && !stream->kernel_only()) {
        tracked_[i].deadline_ms = 0;
        if (stream->upgrade().cm_established()) {
          // The peer never switched (its process stopped?): nothing can be
          // in our ring yet unless committed, then the state machine resets.
          stream_held.unlock();
          stream->fall_back_now(FallbackReason::kTimeout, "the peer's Switch never came");
          stream_held.lock();
        } else {
          stream->apply(stream->upgrade().on(UpgradeEvent::kCmTimeout));
        }
      }
      drop = stream->kernel_only();
    }
    if (drop) {
      tracked_.erase(tracked_.begin() + static_cast<long>(i));
      stream->release();
      continue;
    }
    ++i;
  }
  for (size_t i = 0; i < closing_.size();) {
    StreamSocket* stream = closing_[i].stream;
    if (stream->close_finished() || now >= closing_[i].deadline_ms) {
      closing_.erase(closing_.begin() + static_cast<long>(i));
      untrack(stream);
      stream->release();  // the closing list's reference: tears the connection down
      continue;
    }
    ++i;
  }
}

// rdma_cm is up but a Switch is still to come or to answer: messages only
// the queue pair reports (no cm event wakes the thread for them).
bool Engine::switch_in_progress(StreamSocket* stream) {
  if (stream->kernel_only()) return false;
  // A peer's Revert gave bytes back to write on TCP: written here too, as
  // the kernel would send them while the application does something else.
  if (stream->resend_pending()) return true;
  const UpgradeState& state = stream->upgrade();
  return state.cm_established() && state.phase() == UpgradePhase::kEstablished;
}

int Engine::next_timeout_ms() {
  clear_held_data_note();  // before looking: a writer that holds data after this wakes us
  if (!closing_.empty()) return kDrainPollMs;
  int64_t now = core::monotonic_ms();
  int64_t soonest = now + 1000;
  bool waiting = false;
  for (auto& [key, listener] : listeners_)
    waiting = waiting || listener->matcher.waiting_requests() > 0 || listener->matcher.waiting_sockets() > 0 ||
              !listener->early.empty();
  if (waiting) soonest = std::min<int64_t>(soonest, now + 50);
  for (const Tracked& tracked : tracked_) {
    if (tracked.deadline_ms != 0) soonest = std::min(soonest, tracked.deadline_ms);
    std::unique_lock<std::mutex> stream_held = tracked.stream->lock();
    if (switch_in_progress(tracked.stream)) soonest = std::min<int64_t>(soonest, now + kSwitchPollMs);
    if (tracked.stream->holds_data_locked()) soonest = std::min<int64_t>(soonest, now + kHeldDataPollMs);
    if (tracked.stream->connector().outcome() == rdma::CmOutcome::kPending &&
        tracked.stream->upgrade().phase() == UpgradePhase::kConnecting)
      soonest = std::min<int64_t>(soonest, now + tracked.stream->connector().remaining_ms());
  }
  return static_cast<int>(std::max<int64_t>(0, soonest - now));
}

void Engine::run() {
  sys::ReentryGuard guard;  // everything this thread calls goes straight to libc
  for (;;) {
    int timeout;
    {
      std::lock_guard<std::mutex> held(mu_);
      timeout = next_timeout_ms();
    }
    pollfd fds[2] = {{channel_.fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    sys::real().poll(fds, 2, timeout);
    if (fds[1].revents & POLLIN) {
      uint64_t value;
      (void)!sys::real().read(wake_fd_, &value, sizeof value);
    }
    std::lock_guard<std::mutex> held(mu_);
    for (int i = 0; i < 64; ++i) {
      core::Result<rdma::CmEvent> event = channel_.next_event(0);
      if (!event) break;
      dispatch(event.value());
    }
    check_timers();
  }
}

// ----------------------------------------------------------------- closing --

void Engine::drop_waiting_socket(StreamSocket* stream) {
  for (auto& [key, listener] : listeners_) {
    for (auto it = listener->sockets.begin(); it != listener->sockets.end(); ++it) {
      if (it->second != stream) continue;
      listener->matcher.remove_socket(it->first);
      listener->sockets.erase(it);
      stream->release();
      return;
    }
  }
}

void Engine::on_closed(StreamSocket* stream, bool drain) {
  std::lock_guard<std::mutex> held(mu_);
  drop_waiting_socket(stream);
  if (!drain) {
    untrack(stream);
    return;
  }
  stream->retain();
  closing_.push_back(Closing{stream, core::monotonic_ms() + kCloseDrainMs});
  wake();
}

// ------------------------------------------------------------- the engine --

Engine* g_engine = nullptr;
std::mutex g_engine_lock;
bool g_engine_failed = false;

// A child of fork() has none of the parent's threads: it starts its own
// engine when it needs one. The parent's objects are left alone (their
// rdma_cm and verbs handles are the parent's).
void forget_engine_in_child() {
  set_held_data_waker(nullptr, nullptr);
  new (&g_engine_lock) std::mutex();
  g_engine = nullptr;
  g_engine_failed = false;
}

__attribute__((constructor)) void install_engine_fork_handler() {
  pthread_atfork(nullptr, nullptr, forget_engine_in_child);
}

}  // namespace

UpgradeEngine* upgrade_engine() {
  std::lock_guard<std::mutex> held(g_engine_lock);
  if (g_engine != nullptr || g_engine_failed) return g_engine;
  g_engine_failed = true;
  rdma::Device* device = offload_device();
  if (device == nullptr) return nullptr;
  sys::ReentryGuard guard;
  core::Result<rdma::CmEventChannel> channel = rdma::CmEventChannel::create();
  if (!channel) return nullptr;
  int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) return nullptr;
  // Never destroyed: sockets may be closed by static destructors at exit.
  Engine* engine = new Engine(*device, std::move(channel.value()), wake_fd);
  // The thread takes no signal: the application's handlers must run on its
  // own threads, interrupting their calls as the kernel would.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  std::thread thread([engine] { engine->run(); });
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  thread.detach();
  set_held_data_waker([](void* context) { static_cast<Engine*>(context)->wake(); }, engine);
  g_engine = engine;
  g_engine_failed = false;
  return g_engine;
}

uint64_t new_nonce() { return random_nonce(); }

}  // namespace vsock::sock
