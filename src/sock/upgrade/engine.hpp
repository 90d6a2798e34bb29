// The side band's engine, inside (sock/upgrade/upgrade_engine.hpp says what it
// does for the rest of the library): its bookkeeping types and the Engine
// class. Its member functions live in one file per job:
//   engine.cpp            the thread and its timers, closing, the process's engine
//   engine_client.cpp     a connecting socket's request, redirects, "after data"
//   engine_listeners.cpp  listeners and the sockets accept() returns from them
//   engine_requests.cpp   requests that arrive, their answers, early upgrades
//   engine_claims.cpp     shared listeners: claims, the rendezvous listener, adoption
//   engine_datagrams.cpp  UDP: its resolutions and listeners (DatagramResolution)
//   engine_parking.cpp    parked channels: closed connections' queue pairs for the next one
#pragma once
#include "sock/upgrade/upgrade_engine.hpp"

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
#include "sock/stream/held_data_watch.hpp"
#include "sock/offload_policy.hpp"
#include "sock/upgrade/peer_failure_cache.hpp"
#include "sock/stream/stream_config.hpp"
#include "sock/upgrade/tcp_lookup.hpp"
#include "sock/upgrade/listener_boards.hpp"
#include "sock/upgrade/parked_channels.hpp"
#include "sock/upgrade/process_liveness.hpp"
#include "sock/upgrade/upgrade_matcher.hpp"
#include "sock/wire/reject_message.hpp"
#include "sock/wire/upgrade_accept.hpp"
#include "sock/wire/upgrade_request.hpp"
#include "sys/real_calls.hpp"
#include "sys/reentry_guard.hpp"
namespace vsock::sock::side_band {


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
// How often a kept listener (Listener::kept) asks whether its port is
// still listened on (a sock_diag dump of the listening sockets).
constexpr int64_t kKeptLookMs = 1000;
// A redirected request is redirected once: a second redirect is refused.
constexpr int kMaxRedirects = 1;
// How long a process that inherited a listener waits for the owner it
// replaces (a daemon()'s parent on its way out) to release the port.
constexpr int64_t kAdoptMs = 5000;
constexpr int kAdoptPollMs = 10;
// How long the listener's own process leaves a socket it accepted to be
// claimed by first use (here or in a process it forks) before it claims
// it itself: kClaimWindowMs once it has accepted another connection since,
// else kClaimAloneMs or half of upgrade_timeout_ms (the client's wait),
// whichever is less (Engine::claim_at_ms).
constexpr int64_t kClaimWindowMs = 50;
constexpr int64_t kClaimAloneMs = 250;
// How often it looks at connections that hold back small writes (Nagle,
// autocork) the application has not flushed: the kernel sends what Nagle
// held when the ACK comes; this is the bound on the extra delay here.
constexpr int kHeldDataPollMs = 2;
// How often it looks at connections whose receive ring may still grow
// (docs/protocol.md §3.1): a peer's writes that fill the ring while the
// application reads nothing (it waits for the writer to exit, as a
// kernel socket's buffers allow) get a larger ring without its call.
// Every kRingGrowPollMs per kRingGrowPollPer connections tracked: each
// look takes every socket's lock and polls its CQ, so with 10,000 idle
// connections it comes every 2 s, not 20 times a second.
constexpr int kRingGrowPollMs = 50;
constexpr size_t kRingGrowPollPer = 256;
// How often a client asked for its first bytes (Reject kAfterData) looks
// whether the application wrote them.
constexpr int kFirstWritePollMs = 2;
// How long an Attach whose connection accept() has not returned waits for
// it (a server's accept loop is that far behind) before it is answered as
// an early upgrade or refused; a client waits kAttachWaitMs (or
// upgrade_timeout_ms, if longer) for the answer.
constexpr int64_t kAttachHoldMs = 50;
constexpr int64_t kAttachWaitMs = 250;

uint64_t random_nonce();
// An accepted socket's two ends, as the kernel names them.
struct SocketNames {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof local, peer_len = sizeof peer;
  const sockaddr* local_addr() const { return reinterpret_cast<const sockaddr*>(&local); }
  const sockaddr* peer_addr() const { return reinterpret_cast<const sockaddr*>(&peer); }
};

// getsockname() and getpeername() of `fd`; false if either fails.
bool read_names(int fd, SocketNames* names);


// TCP_DEFER_ACCEPT on a listener: accept() returns a connection only once
// its first data came (Apache's default on Linux).
bool defers_accept(int listen_fd);
// A stream the engine holds a reference to.
struct Tracked {
  StreamSocket* stream;
  int64_t deadline_ms;  // the upgrade must have settled by then (0: none)
  int redirects;        // client: how often the request was redirected
  // client: the server asked for our first bytes (Reject kAfterData); the
  // request goes again once they are written, until then at most (0: not
  // asked).
  int64_t first_write_deadline_ms = 0;
  // client: an Attach on a parked channel waits for its answer until then
  // (0: not attaching); then the rdma_cm request goes instead.
  int64_t attach_deadline_ms = 0;
};

struct Closing {
  StreamSocket* stream;
  int64_t deadline_ms;
  // The drain is done and the channel may be parked once the peer's CLOSED
  // comes, until then (0: the drain is not done).
  int64_t park_until_ms = 0;
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
  // accept() returned its socket, which waits for its first use (the
  // claim) to bind it: closing the listener no longer ends it.
  bool accepted = false;
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
  // The TCP listener's address, once asked (tcp_listener_for): another fd
  // it moves to (listener_moved) listens on the same.
  wire::FamilyEndpoint bound{};
  bool bound_known = false;
  bool rendezvous = false;
  rdma::CmListener cm;
  std::shared_ptr<RendezvousBoard> board;  // TCP listeners: may be null
  UpgradeMatcher matcher{kMatcherCapacity, 0};
  std::map<uint64_t, HeldRequest> requests;  // waiting requests by handle (their cm id)
  std::map<int, StreamSocket*> sockets;         // accepted sockets waiting for their request (retained)
  std::vector<std::unique_ptr<EarlyUpgrade>> early;  // oldest first
  // Requests answered from the backlog with a reject because no channel
  // could be made (memory budget, locked memory): their sockets, once
  // accepted, stay on TCP for that reason (oldest first, bounded).
  std::vector<std::pair<wire::UpgradeRequest, int64_t>> no_resources;
  // Attaches on parked channels (protocol.md §1.2) whose connection
  // accept() has not returned yet, by matcher handle: answered when it
  // does, kAttachHoldMs at most (engine_parking.cpp).
  struct HeldAttach {
    std::unique_ptr<ParkedChannel> parked;
    wire::UpgradeRequest request;
    int64_t since_ms = 0;
  };
  std::map<uint64_t, HeldAttach> attaches;
  // The TCP listener was closed: the rdma_cm side stays until the sockets
  // it accepted have had their requests (a server that closes its listener
  // right after accept()), settle_ms() at most (0: open).
  int64_t closed_ms = 0;
  // Closed in this process, the owner of a shared board, while a listening
  // socket of its address and port lives on (a forked copy, a joined
  // SO_REUSEPORT listener): the rdma_cm side stays until none does
  // (looked at every kKeptLookMs), or a listen() here takes it back.
  bool kept = false;
  int64_t kept_look_ms = 0;
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
        answering_peers_(kPeerCacheCapacity, uint64_t{settings_.peer_fail_cache_s} * 1000),
        // Keys name listeners across processes: a child's listen key is not
        // its parent's (the child inherits the parent's keys in its sockets).
        next_key_((uint64_t{static_cast<uint32_t>(::getpid())} << 32) | 1),
        parked_(settings_.park_max, settings_.park_per_peer),
        datagrams_(channel_, static_cast<int>(settings_.upgrade_timeout_ms)) {}

  void run();

  bool start_connect(int fd, StreamSocket* stream, const sockaddr* peer, socklen_t peer_len) override;
  bool peer_failed_recently(const sockaddr* peer, socklen_t peer_len) override;
  uint64_t listen(int fd, std::shared_ptr<RendezvousBoard> board) override;
  void stop_listening(uint64_t key, const RendezvousBoard* board) override;
  void listener_moved(uint64_t key, int fd) override;
  uint64_t take_kept_listener(int fd, const sockaddr* local, socklen_t length,
                              std::shared_ptr<RendezvousBoard>* board) override;
  void close_listener(std::map<uint64_t, std::unique_ptr<Listener>>::iterator it);
  void close_lingering(uint16_t port);
  void adopt_listeners(const std::vector<std::shared_ptr<RendezvousBoard>>& boards) override;
  void on_accepted(uint64_t key, int fd, StreamSocket* stream) override;
  void claim(int fd, StreamSocket* stream) override;
  void on_accepted_unclaimed(int fd, StreamSocket* stream, bool claim_follows) override;
  void on_closed(StreamSocket* stream, bool drain) override;
  void finish_closing_at_exit(int64_t deadline_ms) override;
  void set_datagram_sink(const DatagramPathSink& sink) override;
  bool listen_datagrams(const sockaddr* address, uint32_t qpn, uint64_t cookie) override;
  void stop_listening_datagrams(uint64_t cookie) override;
  bool resolve_datagram_path(const sockaddr* destination, socklen_t length) override;
  // Makes the thread look at its timers and sockets now.
  void wake();
  void wake_side_band() override { wake(); }
  // In a child of fork(): drops the child's copies of the engine's fds. The
  // rdma_cm ids (the listeners among them) live as long as any process
  // holds their channel open; a listener whose owner exited (daemon()'s
  // parent) must go, so that the process that goes on can take it over.
  void close_fds_in_child() {
    sys::real().close(channel_.fd());
    sys::real().close(wake_fd_);
    for (Closing& closing : closing_) closing.stream->close_own_dups_in_child();
    for (ClosedNote& note : closed_inbox_) note.stream->close_own_dups_in_child();
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
  // The accepted socket is this process's to upgrade: bound to its early
  // upgrade, refused for want of resources, or matched (add_accepted).
  void upgrade_here(Listener& listener, int fd, StreamSocket* stream, const SocketNames& names);
  // The early upgrade answered for the connection `names` names, or end().
  std::vector<std::unique_ptr<EarlyUpgrade>>::iterator find_early(Listener& listener, const SocketNames& names);
  void drop_early_in_backlog(Listener& listener);
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
  bool awaits_requests(const Listener& listener) const;
  bool listening_elsewhere(const Listener& listener) const;
  bool still_kept(Listener& listener, int64_t now);
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
  // The request goes again once the application's first bytes are written
  // (check_first_write), settle_ms() at most from now.
  void wait_for_first_write(Tracked& tracked);
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
  // The connecting socket's peer is in `peers` (a live entry) / goes in.
  bool peer_is_in(StreamSocket* stream, PeerFailureCache* peers);
  // What remember_peer_of() also tells this user's other processes
  // (shared_peer_failures.hpp) of the peer.
  enum class SharedNews { kNone, kPlain, kRunsLibvsock };
  // The stream's peer goes in `peers` (one getpeername for both).
  void remember_peer_of(StreamSocket* stream, PeerFailureCache* peers, SharedNews news);
  void on_connection_event(StreamSocket* stream, const rdma::CmEvent& event);
  void check_timers();
  static bool switch_in_progress(StreamSocket* stream);
  int next_timeout_ms();
  void track(StreamSocket* stream, int64_t deadline_ms);
  Tracked* tracked_entry(StreamSocket* stream);
  void untrack(StreamSocket* stream);
  void drop_waiting_socket(StreamSocket* stream);
  // A fresh channel; a shortage of memory first drops parked channels
  // (yield_parked_memory). new_channel() takes the engine's lock only for
  // that; the others are called under it.
  std::unique_ptr<StreamChannel> new_channel();
  // ENOMEM (locked memory, ulimit -l) or ENOBUFS (memory_budget_mib).
  static bool short_of_memory(int error) { return error == ENOMEM || error == ENOBUFS; }
  std::unique_ptr<StreamChannel> new_channel_locked();
  rdma::Status start_channel_locked(StreamChannel& channel, const rdma::RingDescriptor& peer_ring);

  // Parked channels (engine_parking.cpp, docs/protocol.md §1.2).
  // Drops the oldest parked channel, whose memory a new connection needs;
  // false if none is parked. Under the engine's lock.
  bool yield_parked_memory();
  // Client: the connection goes on a ready parked channel to `peer`, with
  // an Attach, if there is one. Under the engine's lock.
  bool attach_parked(int fd, StreamSocket* stream, const sockaddr* local, socklen_t local_len, const sockaddr* peer,
                     socklen_t peer_len);
  // Client: the Attach's answer, or its end (time, a refusal, a lost
  // channel). Under both locks.
  void check_attach(Tracked& tracked, int64_t now);
  // The Attach did not make it: the channel goes back (refused: it is
  // fine) or away, and the rdma_cm request goes. Under both locks.
  void attach_failed(Tracked& tracked, bool keep_channel, const char* why);
  // A closed connection whose drain is done: parks its channel if it is
  // reusable. False while it waits for the peer's CLOSED. Under the engine's lock.
  bool park_closed(Closing& closing, int64_t now);
  // Takes what arrived on parked channels (Park, Attach), drops the broken
  // and the expired. Under the engine's lock.
  void serve_parked(int64_t now);
  // Server: an Attach on parked channel `index`.
  void on_attach(size_t index, const wire::UpgradeRequest& request);
  // Server: an Attach that cannot be served here goes back as a Reject
  // (the client asks with rdma_cm instead); the channel stays parked.
  void refuse_attach(ParkedChannel& parked, uint64_t nonce);
  // Server: answers an Attach with Attached on its channel, which becomes
  // `stream`'s (accept() returned it; "Bound follows"), or an early
  // upgrade's (null: its connection waits in the backlog).
  void answer_attach(Listener& listener, std::unique_ptr<ParkedChannel> parked, const wire::UpgradeRequest& request,
                     StreamSocket* stream);
  // Server: accept() returned the socket a held Attach waits for. True if
  // `handle` was one (the socket is answered).
  bool take_held_attach(Listener& listener, uint64_t handle, int fd, StreamSocket* stream);
  // Server: held Attaches past kAttachHoldMs: early upgrades if their
  // connection still waits in the backlog, else refused (parked again).
  void expire_held_attaches(Listener& listener, int64_t now);
  // The TCP listener (not a rendezvous one) of the request's server end.
  Listener* tcp_listener_for(const wire::UpgradeRequest& request);
  // The completion fds the thread sleeps on besides rdma_cm's: parked
  // channels', and those of connecting clients whose Attach or switch is
  // under way (watched_channel; each armed). False if a completion came in
  // the meantime (do not sleep).
  bool add_channel_fds(std::vector<pollfd>* fds);
  // After some of them woke the thread: reads the events of those (the
  // fds poll found readable; the others have none to read).
  void drain_channel_events(const std::vector<pollfd>& woken);
  StreamChannel* watched_channel(const Tracked& tracked);

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
  // Servers whose library accepted an upgrade of ours lately: a timeout to
  // one of them is that connection's (many handshakes at once on a slow
  // path), not a sign that the peer has no libvsock, so it does not go
  // into cache_ (which would keep every later connection on TCP).
  PeerFailureCache answering_peers_;
  uint64_t next_key_;
  std::map<uint64_t, std::unique_ptr<Listener>> listeners_;
  uint64_t rendezvous_key_ = 0;  // listeners_ key of the rendezvous listener (0: none yet)
  struct Adoption {
    std::shared_ptr<RendezvousBoard> board;
    int64_t until_ms;
  };
  std::vector<Adoption> adoptions_;
  // Sockets this process accepted from a listener it owns, not used yet
  // (on_accepted_unclaimed). Each holds a reference.
  struct Unclaimed {
    StreamSocket* stream;
    int fd;
    int64_t since_ms;
    uint64_t forks;    // fork_generation() at accept
    uint64_t accepts;  // accepts_ at accept
  };
  std::vector<Unclaimed> unclaimed_;
  // Accepts in this process (on_accepted_unclaimed): a socket is claimed
  // without a use sooner once the process accepted another since
  // (claim_at_ms).
  uint64_t accepts_ = 0;
  // When the process claims the unused socket itself (claim_unused).
  int64_t claim_at_ms(const Unclaimed& entry) const;
  // Drops the socket's entry, if it has one: used or closed.
  void forget_unclaimed(StreamSocket* stream);
  bool take_claim_unforked(const Unclaimed& entry);
  void claim_locked(int fd, StreamSocket* stream);
  void claim_unused();
  std::vector<Tracked> tracked_;
  // Ring growth looks (kRingGrowPollMs): when the last one was.
  int64_t ring_grow_look_ms_ = 0;
  int64_t ring_grow_interval_ms() const;
  std::vector<Closing> closing_;
  // Sockets the application closed (on_closed) that the thread has not
  // taken into closing_ yet. on_closed takes only closed_mu_: mu_ is held
  // through the thread's rounds, and a close() that waited for one cost
  // the application about a millisecond under emulation. Each note holds
  // a reference to its socket.
  struct ClosedNote {
    StreamSocket* stream;
    bool drain;
    int64_t closed_ms;
  };
  std::mutex closed_mu_;
  std::vector<ClosedNote> closed_inbox_;
  // Under mu_, first thing whenever the thread takes it: what on_closed
  // noted, done as it was closed (drained in closing_, or untracked).
  void take_closed();
  ParkedChannels parked_;
  uint64_t attach_handles_ = 0;  // matcher handles of Attaches (a bit apart from cm ids)
  DatagramResolution datagrams_;
};

}  // namespace vsock::sock::side_band
