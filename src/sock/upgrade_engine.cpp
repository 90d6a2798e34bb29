#include "sock/upgrade_engine.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
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
#include "sock/upgrade/listener_boards.hpp"
#include "sock/upgrade/process_liveness.hpp"
#include "sock/upgrade_matcher.hpp"
#include "sock/wire/reject_message.hpp"
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
// How often a listener shared with other processes looks at its board for
// the claims of requests it holds (the claim comes with the first use of
// the socket in the process that serves it).
constexpr int kBoardPollMs = 2;
// A redirected request is redirected once: a second redirect is refused.
constexpr int kMaxRedirects = 1;
// How long a process that inherited a listener waits for the owner it
// replaces (a daemon()'s parent on its way out) to release the port.
constexpr int64_t kAdoptMs = 5000;
constexpr int kAdoptPollMs = 10;
// How long the listener's own process leaves a socket it accepted to be
// claimed by first use (here or in a process it forks) before it claims
// it itself.
constexpr int64_t kClaimWindowMs = 50;
// How often it looks at connections that hold back small writes (Nagle,
// autocork) the application has not flushed: the kernel sends what Nagle
// held when the ACK comes; this is the bound on the extra delay here.
constexpr int kHeldDataPollMs = 2;
// How often a client asked for its first bytes (Reject kAfterData) looks
// whether the application wrote them.
constexpr int kFirstWritePollMs = 2;

uint64_t random_nonce() {
  uint64_t nonce = 0;
  while (::getrandom(&nonce, sizeof nonce, 0) != static_cast<ssize_t>(sizeof nonce) || nonce == 0) {
  }
  return nonce;
}

// An accepted socket's two ends, as the kernel names them.
struct SocketNames {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof local, peer_len = sizeof peer;
  const sockaddr* local_addr() const { return reinterpret_cast<const sockaddr*>(&local); }
  const sockaddr* peer_addr() const { return reinterpret_cast<const sockaddr*>(&peer); }
};

// getsockname() and getpeername() of `fd`; false if either fails.
bool read_names(int fd, SocketNames* names) {
  return fd >= 0 &&
         sys::real().getsockname(fd, reinterpret_cast<sockaddr*>(&names->local), &names->local_len) == 0 &&
         sys::real().getpeername(fd, reinterpret_cast<sockaddr*>(&names->peer), &names->peer_len) == 0;
}

// TCP_DEFER_ACCEPT on a listener: accept() returns a connection only once
// its first data came (Apache's default on Linux).
bool defers_accept(int listen_fd) {
  int seconds = 0;
  socklen_t len = sizeof seconds;
  return listen_fd >= 0 &&
         sys::real().getsockopt(listen_fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &seconds, &len) == 0 && seconds > 0;
}

// A stream the engine holds a reference to.
struct Tracked {
  StreamSocket* stream;
  int64_t deadline_ms;  // the upgrade must have settled by then (0: none)
  int redirects;        // client: how often the request was redirected
  // client: the server asked for our first bytes (Reject kAfterData); the
  // request goes again once they are written, until then at most (0: not
  // asked).
  int64_t first_write_deadline_ms = 0;
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

// A request waiting for its socket: the rdma_cm event to answer and what
// it asked for.
struct HeldRequest {
  rdma::CmEvent event;
  wire::UpgradeRequest request;
};

// A TCP listener's rdma_cm side (fd >= 0), or the process's rendezvous
// listener (fd -1): where requests redirected to this process arrive for
// the sockets it claimed from listeners other processes own.
struct Listener {
  int fd = -1;
  bool rendezvous = false;
  rdma::CmListener cm;
  std::shared_ptr<RendezvousBoard> board;  // TCP listeners: may be null
  UpgradeMatcher matcher{kMatcherCapacity, 0};
  std::map<uint64_t, HeldRequest> requests;  // waiting requests by handle (their cm id)
  std::map<int, StreamSocket*> sockets;         // accepted sockets waiting for their request (retained)
  std::vector<std::unique_ptr<EarlyUpgrade>> early;  // oldest first
  // The TCP listener was closed: the rdma_cm side stays until the sockets
  // it accepted have had their requests (a server that closes its listener
  // right after accept()), settle_ms() at most (0: open).
  int64_t closed_ms = 0;
};

class Engine final : public UpgradeEngine {
 public:
  Engine(const rdma::Device& device, rdma::CmEventChannel channel, int wake_fd)
      : device_(device),
        channel_(std::move(channel)),
        wake_fd_(wake_fd),
        settings_(core::config().settings),
        cache_(kPeerCacheCapacity, uint64_t{settings_.peer_fail_cache_s} * 1000),
        after_data_peers_(kPeerCacheCapacity, uint64_t{settings_.peer_fail_cache_s} * 1000),
        // Keys name listeners across processes: a child's listen key is not
        // its parent's (the child inherits the parent's keys in its sockets).
        next_key_((uint64_t{static_cast<uint32_t>(::getpid())} << 32) | 1) {}

  void run();

  bool start_connect(int fd, StreamSocket* stream, const sockaddr* peer, socklen_t peer_len) override;
  bool peer_failed_recently(const sockaddr* peer, socklen_t peer_len) override;
  uint64_t listen(int fd, std::shared_ptr<RendezvousBoard> board) override;
  void stop_listening(uint64_t key, const RendezvousBoard* board) override;
  void close_listener(std::map<uint64_t, std::unique_ptr<Listener>>::iterator it);
  void close_lingering(uint16_t port);
  void adopt_listeners(const std::vector<std::shared_ptr<RendezvousBoard>>& boards) override;
  void on_accepted(uint64_t key, int fd, StreamSocket* stream) override;
  void claim(int fd, StreamSocket* stream) override;
  void on_accepted_shared(int fd, StreamSocket* stream) override;
  void on_closed(StreamSocket* stream, bool drain) override;
  // Makes the thread look at its timers and sockets now.
  void wake();
  // In a child of fork(): drops the child's copies of the engine's fds. The
  // rdma_cm ids (the listeners among them) live as long as any process
  // holds their channel open; a listener whose owner exited (daemon()'s
  // parent) must go, so that the process that goes on can take it over.
  void close_fds_in_child() {
    sys::real().close(channel_.fd());
    sys::real().close(wake_fd_);
  }

 private:
  int upgrade_deadline_ms() const { return static_cast<int>(settings_.upgrade_timeout_ms); }
  // How long the other side gets to take its next step once rdma_cm is
  // under way: the client's Switch after our accept, accept() for an early
  // upgrade (then its client stays on TCP).
  int64_t settle_ms() const { return 4 * int64_t{upgrade_deadline_ms()} + 1000; }
  void dispatch(const rdma::CmEvent& event);
  void on_request(Listener& listener, const rdma::CmEvent& event);
  void add_accepted(Listener& listener, int fd, StreamSocket* stream, const SocketNames& names);
  // The early upgrade answered for the connection `names` names, or end().
  std::vector<std::unique_ptr<EarlyUpgrade>>::iterator find_early(Listener& listener, const SocketNames& names);
  void accept_matched(Listener& listener, const rdma::CmEvent& request, const wire::UpgradeRequest& parsed,
                      StreamSocket* stream);
  // `port`: kRedirect's, 0 for the other reasons.
  void reject(Listener& listener, const rdma::CmEvent& request, uint64_t nonce, wire::RejectReason reason,
              uint16_t port = 0);
  // Shared listeners: a request whose connection another process claimed
  // is sent there (a Reject that redirects). True if it was.
  bool redirect_if_claimed(Listener& listener, const rdma::CmEvent& request, const wire::UpgradeRequest& parsed);
  bool from_connection_peer(const Listener& listener, const rdma::CmEvent& request,
                            const wire::UpgradeRequest& parsed) const;
  void redirect_claimed(Listener& listener);
  // The TCP listener (not a rendezvous one) whose board is `board`.
  std::map<uint64_t, std::unique_ptr<Listener>>::iterator listener_entry_of(const RendezvousBoard* board);
  Listener* listener_of(const RendezvousBoard* board);
  Listener* rendezvous_listener();
  // Takes over the rdma_cm side of a listener whose owner is gone (a
  // daemon()'s parent). False while the owner lives or holds the port.
  bool adopt(const std::shared_ptr<RendezvousBoard>& board);
  void retry_adoptions();
  core::Result<bool> connect_locked(StreamSocket* stream, int fd, const sockaddr* local, socklen_t local_len,
                                    const sockaddr* peer, socklen_t peer_len, std::unique_ptr<StreamChannel> channel,
                                    uint16_t request_flags = 0);
  bool follow_redirect(StreamSocket* stream, uint16_t port);
  // Sends the connection's request again to `port` (0: the server's own)
  // with `request_flags`. Under both locks.
  bool ask_again(StreamSocket* stream, uint16_t port, uint16_t request_flags);
  // Reject kAfterData: ends the client's wait, asks again after its first
  // write (check_first_write). False the second time.
  bool ask_after_first_write(StreamSocket* stream);
  // start_connect() to a server in after_data_peers_: no request before
  // the first write. True if so.
  bool ask_after_first_write_at_once(int fd, StreamSocket* stream, const sockaddr* peer, socklen_t peer_len);
  void check_first_write(Tracked& tracked, int64_t now);
  // socket_accepted: the socket is ours already, Bound follows ESTABLISHED
  // (kAcceptFlagBound tells the client so).
  core::Result<Answered> answer(Listener& listener, const rdma::CmEvent& request, uint64_t nonce,
                                bool socket_accepted);
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
  Tracked* tracked_entry(StreamSocket* stream);
  void untrack(StreamSocket* stream);
  void drop_waiting_socket(StreamSocket* stream);
  std::unique_ptr<StreamChannel> new_channel();

  const rdma::Device& device_;
  rdma::CmEventChannel channel_;
  int wake_fd_;
  const core::Settings& settings_;
  std::mutex mu_;
  PeerFailureCache cache_;
  // Servers that answered Reject kAfterData (a shared listener with
  // TCP_DEFER_ACCEPT): later connections to them write first and ask once
  // (with kRequestFlagAfterData), for the cache period.
  PeerFailureCache after_data_peers_;
  uint64_t next_key_;
  std::map<uint64_t, std::unique_ptr<Listener>> listeners_;
  uint64_t rendezvous_key_ = 0;  // listeners_ key of the rendezvous listener (0: none yet)
  struct Adoption {
    std::shared_ptr<RendezvousBoard> board;
    int64_t until_ms;
  };
  std::vector<Adoption> adoptions_;
  // Sockets this process accepted from a shared listener it owns, not used
  // yet (on_accepted_shared). Each holds a reference.
  struct Unclaimed {
    StreamSocket* stream;
    int fd;
    int64_t since_ms;
    uint64_t forks;  // fork_generation() at accept
  };
  std::vector<Unclaimed> unclaimed_;
  void claim_locked(int fd, StreamSocket* stream);
  void claim_unused();
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
  tracked_.push_back(Tracked{stream, deadline_ms, 0});
}

Tracked* Engine::tracked_entry(StreamSocket* stream) {
  auto it = std::find_if(tracked_.begin(), tracked_.end(), [&](const Tracked& t) { return t.stream == stream; });
  return it == tracked_.end() ? nullptr : &*it;
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

// A server that answered Reject kAfterData lately would answer so again:
// the request goes after the first write (check_first_write), and nothing
// waits for it.
bool Engine::ask_after_first_write_at_once(int fd, StreamSocket* stream, const sockaddr* peer, socklen_t peer_len) {
  std::lock_guard<std::mutex> held(mu_);
  if (!after_data_peers_.should_skip(peer, peer_len, static_cast<uint64_t>(core::monotonic_ms()))) return false;
  std::unique_lock<std::mutex> stream_held = stream->lock();
  stream->set_fd_hint(fd);
  core::stat_add(core::Stat::upgrade_attempts);
  stream->apply(stream->upgrade().on(UpgradeEvent::kConnectStarted));
  track(stream, 0);
  tracked_.back().first_write_deadline_ms = core::monotonic_ms() + settle_ms();
  stream->await_first_write_locked();
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
  // Registered before the engine's lock is taken: other connections' events
  // need not wait for it.
  std::unique_ptr<StreamChannel> channel = new_channel();
  std::lock_guard<std::mutex> held(mu_);
  std::unique_lock<std::mutex> stream_held = stream->lock();
  core::Result<bool> started = connect_locked(stream, fd, reinterpret_cast<sockaddr*>(&local), local_len, peer,
                                              peer_len, std::move(channel));
  if (!started) {
    stream_held.unlock();
    stream->fall_back_now(started.error() == EAFNOSUPPORT ? FallbackReason::kDeclined : FallbackReason::kLocalError,
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
  if (!channel) channel = new_channel();
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
  tracked->first_write_deadline_ms = core::monotonic_ms() + settle_ms();
  stream->await_first_write_locked();
  sockaddr_storage peer{};
  socklen_t peer_len = sizeof peer;
  if (sys::real().getpeername(stream->fd_hint(), reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0)
    after_data_peers_.record_failure(reinterpret_cast<sockaddr*>(&peer), peer_len,
                                     static_cast<uint64_t>(core::monotonic_ms()));
  VSOCK_LOG(kDebug, "fd %d: the server accepts after the first bytes: asking again once they are written",
            stream->fd_hint());
  return true;
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
      if (!accept || accept.value().nonce != stream->nonce() || channel == nullptr ||
          !channel->start(accept.value().ring)) {
        event = UpgradeEvent::kCmRejected;
        break;
      }
      stream->connection() = connector.take_connection();
      stream->set_bound_promised((accept.value().flags & wire::kAcceptFlagBound) != 0);
      stream->apply(stream->upgrade().on(UpgradeEvent::kCmEstablished));
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
  const bool peer_answered = tracked != nullptr && (tracked->redirects > 0 || tracked->first_write_deadline_ms != 0);
  if (stream->kernel_only() && UpgradeState::remember_peer(reason) && !peer_answered) {
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
  // upgrades end with them (the clients see DISCONNECTED).
  listener.early.clear();
  if (listener.matcher.waiting_sockets() > 0 && listener.closed_ms == 0) {
    listener.closed_ms = core::monotonic_ms();  // lingers for the requests of what it accepted
    wake();
    return;
  }
  close_listener(it);
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
                (listener.matcher.waiting_sockets() == 0 || now - listener.closed_ms >= settle_ms() ||
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
  Listener& listener = *it->second;
  stream->set_fd_hint(fd);
  auto early = find_early(listener, names);
  if (early != listener.early.end()) {
    std::unique_ptr<EarlyUpgrade> taken = std::move(*early);
    listener.early.erase(early);
    bind_early(std::move(taken), fd, stream);
    return;
  }
  add_accepted(listener, fd, stream, names);
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

// This process's rendezvous listener, made on first use: any address, a
// port of rdma_cm's choosing. Under the engine's lock; null if none can be.
Listener* Engine::rendezvous_listener() {
  auto it = listeners_.find(rendezvous_key_);
  if (rendezvous_key_ != 0 && it != listeners_.end()) return it->second.get();
  sockaddr_in any{};
  any.sin_family = AF_INET;
  core::Result<rdma::CmListener> cm = rdma::CmListener::create(channel_, reinterpret_cast<sockaddr*>(&any), 128);
  if (!cm) {
    VSOCK_LOG(kInfo, "no rendezvous listener (%s): sockets handed to this process stay on TCP",
              std::strerror(cm.error()));
    return nullptr;
  }
  auto listener = std::make_unique<Listener>();
  listener->rendezvous = true;
  listener->cm = std::move(cm.value());
  listener->matcher = UpgradeMatcher(kMatcherCapacity, uint64_t{settings_.upgrade_timeout_ms} * 4);
  rendezvous_key_ = next_key_++;
  Listener* made = listener.get();
  listeners_[rendezvous_key_] = std::move(listener);
  VSOCK_LOG(kDebug, "rendezvous listener on port %u", made->cm.port());
  return made;
}

void Engine::claim(int fd, StreamSocket* stream) {
  std::lock_guard<std::mutex> held(mu_);
  claim_locked(fd, stream);
}

void Engine::on_accepted_shared(int fd, StreamSocket* stream) {
  std::lock_guard<std::mutex> held(mu_);
  Listener* listener = listener_of(stream->rendezvous().get());
  if (listener == nullptr) return;  // another process's listener
  // Answered from the backlog before the listener became shared: that
  // client waits for our Bound, and no other process can give it. This
  // process serves the socket then (a fork later hands it back to TCP).
  SocketNames names;
  if (!listener->early.empty() && read_names(fd, &names)) {
    auto early = find_early(*listener, names);
    if (early != listener->early.end() && stream->take_claim()) {
      std::unique_ptr<EarlyUpgrade> taken = std::move(*early);
      listener->early.erase(early);
      stream->set_fd_hint(fd);
      bind_early(std::move(taken), fd, stream);
      return;
    }
  }
  stream->retain();
  unclaimed_.push_back(Unclaimed{stream, fd, core::monotonic_ms(), fork_generation()});
  wake();
}

// Under the engine's lock.
void Engine::claim_unused() {
  const int64_t now = core::monotonic_ms();
  for (size_t i = 0; i < unclaimed_.size();) {
    Unclaimed entry = unclaimed_[i];
    const bool settled = !entry.stream->awaiting_claim() || entry.stream->kernel_only() ||
                         entry.forks != fork_generation();  // used, gone, or maybe the other process's now
    if (!settled && now - entry.since_ms < kClaimWindowMs) {
      ++i;
      continue;
    }
    unclaimed_.erase(unclaimed_.begin() + static_cast<long>(i));
    if (!settled && entry.stream->take_claim()) claim_locked(entry.fd, entry.stream);
    entry.stream->release();
  }
}

// Under the engine's lock.
void Engine::claim_locked(int fd, StreamSocket* stream) {
  std::shared_ptr<RendezvousBoard> board = stream->rendezvous();
  SocketNames names;
  std::optional<ConnectionKey> key;
  if (board && read_names(fd, &names))
    key = key_of_accepted(names.local_addr(), names.local_len, names.peer_addr(), names.peer_len);
  if (!key) {
    stream->fall_back_now(FallbackReason::kDeclined, "unreadable address");
    return;
  }
  stream->set_fd_hint(fd);
  VSOCK_LOG(kDebug, "fd %d: claimed for an upgrade in this process (listener owner %u)", fd, board->owner());
  if (board->owner() != static_cast<uint32_t>(::getpid()) && !process_alive(board->owner())) adopt(board);
  if (Listener* owner = listener_of(board.get())) {
    // Ours: as if accept() had handed it over here.
    add_accepted(*owner, fd, stream, names);
    return;
  }
  Listener* rendezvous = rendezvous_listener();
  if (rendezvous == nullptr) {
    stream->fall_back_now(FallbackReason::kLocalError, "no rendezvous listener");
    return;
  }
  // The socket waits in our matcher before the claim is visible, so a
  // redirected request always finds it here.
  add_accepted(*rendezvous, fd, stream, names);
  if (!board->claim(*key, Claim{static_cast<uint32_t>(::getpid()), rendezvous->cm.port()}, core::monotonic_ms(),
                    settle_ms())) {
    drop_waiting_socket(stream);
    stream->fall_back_now(FallbackReason::kLocalError, "the listener's rendezvous board is full");
    return;
  }
  core::stat_add(core::Stat::rendezvous_claims);
}

void Engine::adopt_listeners(const std::vector<std::shared_ptr<RendezvousBoard>>& boards) {
  std::lock_guard<std::mutex> held(mu_);
  const int64_t until = core::monotonic_ms() + kAdoptMs;
  for (const std::shared_ptr<RendezvousBoard>& board : boards) {
    if (board->owner() != static_cast<uint32_t>(::getpid())) adoptions_.push_back(Adoption{board, until});
  }
  wake();
}

// Under the engine's lock.
void Engine::retry_adoptions() {
  const int64_t now = core::monotonic_ms();
  for (auto it = adoptions_.begin(); it != adoptions_.end();) {
    if (adopt(it->board)) {
      it = adoptions_.erase(it);
    } else if (now >= it->until_ms) {
      VSOCK_LOG(kInfo, "the owner of an inherited listener did not go: its connections stay on TCP here");
      it = adoptions_.erase(it);
    } else {
      ++it;
    }
  }
}

// Under the engine's lock.
bool Engine::adopt(const std::shared_ptr<RendezvousBoard>& board) {
  if (listener_of(board.get()) != nullptr) return true;
  uint32_t owner = board->owner();
  if (owner != static_cast<uint32_t>(::getpid()) && process_alive(owner)) return false;
  sockaddr_storage address{};
  socklen_t length = board->address(&address);
  if (length == 0) return false;
  core::Result<rdma::CmListener> cm = rdma::CmListener::create(channel_, reinterpret_cast<sockaddr*>(&address), 128);
  if (!cm) return false;  // EADDRINUSE: the old owner's id is not gone yet
  auto listener = std::make_unique<Listener>();
  listener->cm = std::move(cm.value());
  listener->board = board;
  listener->matcher = UpgradeMatcher(kMatcherCapacity, uint64_t{settings_.upgrade_timeout_ms} * 4);
  listeners_[next_key_++] = std::move(listener);
  board->set_owner(static_cast<uint32_t>(::getpid()));
  VSOCK_LOG(kInfo, "took over the rdma_cm side of a listener from process %u", owner);
  return true;
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
      // that does not exist gets no queue pair (it waits, then is rejected).
      // Not when another process may accept it (a shared listener): the
      // process that serves it claims it, and the request waits for that.
      const bool shared = listener.rendezvous || (listener.board && listener.board->shared());
      if (!shared && has_room_early(listener) && tcp_connection_exists(request.value())) {
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
  std::unique_lock<std::mutex> stream_held = stream->lock();
  if (stream->kernel_only()) {
    reject(listener, request, parsed.nonce, wire::RejectReason::kConnection);
    return;
  }
  core::Result<Answered> answered = answer(listener, request, parsed.nonce, /*socket_accepted=*/true);
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
core::Result<Answered> Engine::answer(Listener& listener, const rdma::CmEvent& request, uint64_t nonce,
                                      bool socket_accepted) {
  using R = core::Result<Answered>;
  Answered answered;
  answered.channel = new_channel();
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
  retry_adoptions();
  close_lingering(0);
  claim_unused();
  for (auto& [key, listener] : listeners_) {
    Expired expired = listener->matcher.expire(static_cast<uint64_t>(now));
    for (uint64_t handle : expired.rejected_handles) {
      auto it = listener->requests.find(handle);
      if (it == listener->requests.end()) continue;
      reject(*listener, it->second.event, it->second.request.nonce, wire::RejectReason::kConnection);
      listener->requests.erase(it);
    }
    redirect_claimed(*listener);
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
          stream->upgrade().phase() == UpgradePhase::kConnecting && !stream->awaiting_first_write()) {
        if (stream->connector().check_deadline() != rdma::CmOutcome::kPending) finish_connect(stream);
      }
      check_first_write(tracked_[i], now);
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
  for (auto& [key, listener] : listeners_)
    if (!listener->requests.empty() && listener->board && listener->board->shared())
      soonest = std::min<int64_t>(soonest, now + kBoardPollMs);
  if (!adoptions_.empty()) soonest = std::min<int64_t>(soonest, now + kAdoptPollMs);
  for (const Unclaimed& entry : unclaimed_) soonest = std::min(soonest, entry.since_ms + kClaimWindowMs);
  for (const Tracked& tracked : tracked_) {
    if (tracked.deadline_ms != 0) soonest = std::min(soonest, tracked.deadline_ms);
    std::unique_lock<std::mutex> stream_held = tracked.stream->lock();
    if (switch_in_progress(tracked.stream)) soonest = std::min<int64_t>(soonest, now + kSwitchPollMs);
    if (tracked.stream->holds_data_locked()) soonest = std::min<int64_t>(soonest, now + kHeldDataPollMs);
    if (tracked.stream->awaiting_first_write()) soonest = std::min<int64_t>(soonest, now + kFirstWritePollMs);
    if (tracked.stream->connector().outcome() == rdma::CmOutcome::kPending &&
        tracked.stream->upgrade().phase() == UpgradePhase::kConnecting && !tracked.stream->awaiting_first_write())
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
  for (auto it = unclaimed_.begin(); it != unclaimed_.end(); ++it) {
    if (it->stream != stream) continue;
    unclaimed_.erase(it);
    stream->release();
    break;
  }
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
  if (g_engine != nullptr) g_engine->close_fds_in_child();
  new (&g_engine_lock) std::mutex();
  g_engine = nullptr;
  g_engine_failed = false;
}

__attribute__((constructor)) void install_engine_fork_handler() {
  pthread_atfork(nullptr, nullptr, forget_engine_in_child);
}

}  // namespace

UpgradeEngine* running_upgrade_engine() {
  std::lock_guard<std::mutex> held(g_engine_lock);
  return g_engine;
}

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
