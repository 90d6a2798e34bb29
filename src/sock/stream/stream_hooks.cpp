#include "sock/stream/stream_hooks.hpp"

#include "sock/offload_policy.hpp"
#include "sock/offload_rules.hpp"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <dirent.h>
#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/clock.hpp"
#include "core/config.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "sock/dgram/datagram_hooks.hpp"
#include "sock/dgram/datagram_socket.hpp"
#include "sock/offload_rules.hpp"
#include "sock/stream/fork_children.hpp"
#include "sock/stream/stream_handoff.hpp"
#include "sock/upgrade/failed_paths.hpp"
#include "sock/upgrade/listener_boards.hpp"
#include "sock/upgrade/shared_peer_failures.hpp"
#include "sock/upgrade/upgrade_engine.hpp"
#include "sock/wire/endpoint.hpp"
#include "sys/real_calls.hpp"
#include "sys/reentry_guard.hpp"

namespace vsock::sock {
namespace {

// How long exit waits, for all its connections together, until their data
// and FIN are delivered, or they resumed on TCP and the kernel holds what
// they resend (a queue pair's retries run out in about half a second on a
// quiet host; under emulation a starved guest takes longer).
constexpr int kExitDrainMs = 5000;

// Whether the settings and rules let this socket use RDMA at all.
bool offload_allowed(SocketState* state, core::Role role, const sockaddr* addr) {
  if (state->type != SOCK_STREAM || state->kernel_reason.load() != KernelReason::kUndecided) return false;
  if (!rules_offload(core::Proto::kTcp, addr, role)) {
    state->kernel_reason.store(KernelReason::kRule);
    core::stat_add(core::Stat::kernel_by_rule);
    return false;
  }
  return true;
}

// Installs `stream` in the state (which then owns the creation reference).
bool attach(SocketState* state, StreamSocket* stream) {
  StreamSocket* expected = nullptr;
  if (state->stream.compare_exchange_strong(expected, stream, std::memory_order_acq_rel)) return true;
  stream->release();  // another thread attached one first (two connects at once)
  return false;
}

// Options the library applies itself on the ring, read once from the
// kernel socket (accept() copies them from the listener) unless the library
// saw them stay at the kernel's defaults, which the stream starts with.
void copy_kernel_options(int fd, const SocketState* state, StreamSocket* stream) {
  const uint8_t mode = state->known_mode.load();
  if (!(mode & kModeRcvLowatOne)) {
    int low_water = 1;
    socklen_t len = sizeof low_water;
    if (sys::real().getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &low_water, &len) == 0)
      stream->set_receive_low_water(low_water);
  }
  int no_delay = (mode & kModeNoDelay) ? 1 : 0;
  socklen_t len = sizeof no_delay;
  if ((mode & kModeNoDelayKnown) || sys::real().getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &no_delay, &len) == 0)
    stream->set_no_delay(no_delay != 0);
}

// Another live process — or another listening socket of this one — listens
// on this port already (SO_REUSEPORT) and owns its rdma_cm listener, which
// takes every request of the port: the connections this listener accepts
// are claimed on that board by the process that serves them, as after a
// fork (docs/protocol.md §1.1).
bool join_listener_board(int fd, SocketState* state, std::shared_ptr<RendezvousBoard> board) {
  uint64_t expected = 0;
  if (!state->listen_key.compare_exchange_strong(expected, kJoinedBoardKey)) return false;
  board->mark_shared();
  VSOCK_LOG(kDebug, "listener fd %d joins the rendezvous board of process %u (a port shared with SO_REUSEPORT)", fd,
            board->owner());
  remember_listener_board(state, std::move(board), fd);
  return true;
}

}  // namespace

void on_connected(int fd, SocketState* state, const sockaddr* peer, socklen_t peer_len, bool blocking_done) {
  if (peer == nullptr || (peer->sa_family != AF_INET && peer->sa_family != AF_INET6)) return;
  if (!offload_allowed(state, core::Role::kClient, peer)) return;
  sys::ReentryGuard guard;
  // A peer another process of this user found plain lately: TCP at once,
  // before this process opens its device for it.
  if (peer_plain_on_this_host(peer, peer_len)) {
    core::stat_add(core::Stat::fallback_cached_peer);
    state->kernel_reason.store(KernelReason::kCachedPeer);
    return;
  }
  UpgradeEngine* engine = upgrade_engine();
  if (engine == nullptr) return;
  // A peer that failed to upgrade lately, or whose RDMA path failed under
  // a live connection (docs/protocol.md §5.1): TCP until the memory ends.
  if (engine->peer_failed_recently(peer, peer_len) || path_failed_recently(peer, peer_len)) {
    core::stat_add(core::Stat::fallback_cached_peer);
    state->kernel_reason.store(KernelReason::kCachedPeer);
    return;
  }
  auto* stream = new (std::nothrow) StreamSocket(UpgradeRole::kClient, new_nonce());
  if (stream == nullptr || !attach(state, stream)) return;
  // A socket may be in an epoll set before it connects (a non-blocking
  // connect's usual shape): its entry there moves to the view, which a
  // full scan does. An accepted socket is in none yet: no scan for it.
  note_route_changed();
  stream->assume_known_mode(state->known_mode);
  copy_kernel_options(fd, state, stream);
  if (!engine->start_connect(fd, stream, peer, peer_len)) return;
  // Wait a little longer than the connector's own bound, which ends it.
  const int bound = static_cast<int>(core::config().settings.upgrade_timeout_ms) + 100;
  if (blocking_done)
    stream->wait_settled(bound);
  else
    stream->hold_writes_until_settled(bound);
}

uint16_t bound_port(int fd) {
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  if (sys::real().getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return 0;
  core::Result<wire::FamilyEndpoint> named = wire::endpoint_from_sockaddr(reinterpret_cast<sockaddr*>(&local), len);
  return named ? named.value().endpoint.port : 0;
}

bool on_listening(int fd, SocketState* state) {
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  sys::ReentryGuard guard;
  if (state->type != SOCK_STREAM) return false;
  if (sys::real().getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return false;
  if (!offload_allowed(state, core::Role::kServer, reinterpret_cast<sockaddr*>(&local))) return false;
  if (state->listen_key.load() != 0) return false;  // listen() again: already listening
  UpgradeEngine* engine = upgrade_engine();
  if (engine == nullptr) return false;
  // Where the processes that will share this listener meet (a board per
  // listen(), named where it can be; none if no mapping can be made: then
  // only this process upgrades its connections).
  // A second listener of this process on the port (SO_REUSEPORT: nginx's
  // `reuseport` opens one per worker in its master, then forks) joins the
  // first one's board: rdma_cm has one listener per port.
  if (std::shared_ptr<RendezvousBoard> own = live_listener_board(reinterpret_cast<sockaddr*>(&local), len))
    return join_listener_board(fd, state, std::move(own));
  // This process closed its listeners of the port while others (forked,
  // joined) listen on it: the rdma_cm side it kept is this one's again.
  std::shared_ptr<RendezvousBoard> kept;
  if (uint64_t key = engine->take_kept_listener(fd, reinterpret_cast<sockaddr*>(&local), len, &kept)) {
    uint64_t expected = 0;
    if (!state->listen_key.compare_exchange_strong(expected, key)) {
      engine->stop_listening(key, nullptr);
      return false;
    }
    VSOCK_LOG(kDebug, "listener fd %d takes back the rdma_cm side this process kept for its port", fd);
    remember_listener_board(state, std::move(kept), fd);
    return true;
  }
  bool joined = false;
  std::shared_ptr<RendezvousBoard> board =
      RendezvousBoard::create_named(reinterpret_cast<sockaddr*>(&local), len, &joined);
  if (joined) return join_listener_board(fd, state, std::move(board));
  if (!board) board = RendezvousBoard::create();
  uint64_t key = engine->listen(fd, board);
  uint64_t expected = 0;
  if (key != 0 && !state->listen_key.compare_exchange_strong(expected, key)) {
    engine->stop_listening(key);
    return false;
  }
  if (key != 0 && board) remember_listener_board(state, std::move(board), fd);
  if (key == 0 && board) board->unlink_name();  // nobody takes requests on it
  return key != 0;
}

void on_listen_failed(SocketState* state) {
  uint64_t key = state->listen_key.exchange(0);
  if (key == 0) return;
  sys::ReentryGuard guard;
  ReleasedBoard released = release_listener_board(state, key);
  UpgradeEngine* engine = running_upgrade_engine();
  if (released.still_used) {
    if (key != kJoinedBoardKey && engine != nullptr) engine->listener_moved(key, released.heir_fd);
    return;
  }
  if (key == kJoinedBoardKey) return;
  if (engine != nullptr) engine->stop_listening(key);
}

void on_accepted(int fd, SocketState* listener, SocketState* accepted) {
  uint64_t key = listener->listen_key.load();
  if (key == 0 || accepted->kernel_reason.load() != KernelReason::kUndecided) return;
  sys::ReentryGuard guard;
  UpgradeEngine* engine = upgrade_engine();
  if (engine == nullptr) return;
  auto* stream = new (std::nothrow) StreamSocket(UpgradeRole::kServer, 0);
  if (stream == nullptr || !attach(accepted, stream)) return;
  stream->assume_known_mode(accepted->known_mode);
  copy_kernel_options(fd, accepted, stream);
  // Another process may serve this connection (after a fork, now or
  // later): the first that uses it claims it (DESIGN decision 2, revised),
  // and only then does the client switch (its Bound goes out).
  std::shared_ptr<RendezvousBoard> board = listener_board(listener);
  if (board) {
    // A listener that is still this process's alone (no fork since it
    // listened, nobody joined its port): the socket is claimed here, now,
    // so that the Bound leaves with accept() and a client that writes
    // right after connect() finds it (protocol.md §1.1). Should this
    // process fork before it uses the socket (a fork per connection, its
    // first), the child's first use hands the connection back to TCP.
    const bool alone = !board->shared();
    stream->await_claim(std::move(board));
    const bool claim_now = alone && stream->take_claim();
    engine->on_accepted_unclaimed(fd, stream, claim_now);
    if (claim_now) engine->claim(fd, stream);
    return;
  }
  engine->on_accepted(key, fd, stream);
}

namespace {

// Both spellings: glibc may pass the 64-bit time_t one (SO_*TIMEO_NEW).
bool is_timeout_option(int level, int name) {
  if (level != SOL_SOCKET) return false;
  if (name == SO_RCVTIMEO || name == SO_SNDTIMEO) return true;
#ifdef SO_RCVTIMEO_NEW
  if (name == SO_RCVTIMEO_NEW || name == SO_SNDTIMEO_NEW) return true;
#endif
#ifdef SO_RCVTIMEO_OLD
  if (name == SO_RCVTIMEO_OLD || name == SO_SNDTIMEO_OLD) return true;
#endif
  return false;
}

// The known_mode bit a setsockopt of this option makes stale, 0 for an
// option the stream does not follow.
uint8_t known_mode_bit_of(int level, int name) {
  if (is_timeout_option(level, name)) return kModeTimeoutsZero;
  if (level == SOL_SOCKET && name == SO_LINGER) return kModeLingerOff;
  if (level == SOL_SOCKET && name == SO_RCVLOWAT) return kModeRcvLowatOne;
  if (level == IPPROTO_TCP && name == TCP_NODELAY) return kModeNoDelayKnown | kModeNoDelay;
  return 0;
}

}  // namespace

bool is_stream_option(int level, int name) { return known_mode_bit_of(level, name) != 0; }

void on_file_flags_set(SocketState* state) {
  // The bit first, the epochs after (BlockingMode::assume).
  state->known_mode.fetch_and(static_cast<uint8_t>(~kModeFlagsKnown));
  if (StreamSocket* stream = state->stream.load(std::memory_order_acquire)) stream->file_flags_changed();
  if (dgram::DatagramSocket* datagram = state->datagram.load(std::memory_order_acquire))
    datagram->file_flags_changed();
}

bool is_unsupported_option(int level, int name) {
  if (level == SOL_SOCKET)
    return name == SO_ATTACH_FILTER || name == SO_ATTACH_BPF || name == SO_ATTACH_REUSEPORT_CBPF ||
           name == SO_ATTACH_REUSEPORT_EBPF || name == SO_OOBINLINE || name == SO_ZEROCOPY;
  if (level == IPPROTO_TCP)
    return name == TCP_FASTOPEN || name == TCP_FASTOPEN_CONNECT || name == TCP_REPAIR || name == TCP_ULP ||
           name == TCP_MD5SIG;
  return false;
}

void on_unsupported_option(SocketState* state, int level, int name) {
  if (!is_unsupported_option(level, name)) return;
  KernelReason expected = KernelReason::kUndecided;
  if (state->kernel_reason.compare_exchange_strong(expected, KernelReason::kOption))
    core::stat_add(core::Stat::kernel_by_rule);
  // A connection already upgrading goes back to TCP if nothing is in a ring yet.
  if (StreamSocket* stream = state->stream.load(std::memory_order_acquire))
    stream->fall_back_now(FallbackReason::kDeclined, "socket option the RDMA path cannot honour");
}

void on_option_set(SocketState* state, int level, int name, const void* value, socklen_t len) {
  // The option's int (SO_RCVLOWAT, TCP_NODELAY), read once.
  const bool has_number = value != nullptr && len >= static_cast<socklen_t>(sizeof(int));
  int number = 0;
  if (has_number) std::memcpy(&number, value, sizeof number);
  state->known_mode.fetch_and(static_cast<uint8_t>(~known_mode_bit_of(level, name)));
  // TCP_NODELAY's value is the one the kernel just took: known again (a
  // socket connected later need not ask, copy_kernel_options).
  if (level == IPPROTO_TCP && name == TCP_NODELAY && has_number)
    state->known_mode.fetch_or(static_cast<uint8_t>(kModeNoDelayKnown | (number != 0 ? kModeNoDelay : 0)));
  dgram::DatagramSocket* datagram = state->datagram.load(std::memory_order_acquire);
  if (datagram != nullptr && is_timeout_option(level, name)) datagram->timeouts_changed();
  StreamSocket* stream = state->stream.load(std::memory_order_acquire);
  if (stream == nullptr) return;
  if (is_timeout_option(level, name)) {
    stream->timeouts_changed();
    return;
  }
  if (!has_number) return;
  if (level == SOL_SOCKET && name == SO_RCVLOWAT) stream->set_receive_low_water(number);
  if (level == IPPROTO_TCP && name == TCP_NODELAY) {
    sys::ReentryGuard guard;  // turning Nagle off posts held data (libibverbs)
    stream->set_no_delay(number != 0);
  }
}

void adopt_inherited_listeners() {
  std::vector<std::shared_ptr<RendezvousBoard>> boards = all_listener_boards();
  if (boards.empty()) return;
  sys::ReentryGuard guard;
  if (UpgradeEngine* engine = upgrade_engine()) engine->adopt_listeners(boards);
}

namespace {

// One fd of a fresh image: a connected TCP socket accepted from a listener
// whose named board a live process of ours owns is taken in, awaiting its
// claim (`first` maps a socket's inode to the fd that took it in, so that
// stdin and stdout share one state, as dup() would).
void adopt_if_inherited_connection(int fd, std::vector<std::pair<uint64_t, int>>* first) {
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return;
  for (const auto& [inode, taken] : *first) {
    if (inode == static_cast<uint64_t>(st.st_ino)) {
      share_fd(taken, fd);
      return;
    }
  }
  int domain = 0, type = 0, protocol = 0, listening = 0;
  socklen_t len = sizeof(int);
  auto option = [&](int name, int* value) {
    len = sizeof(int);
    return sys::real().getsockopt(fd, SOL_SOCKET, name, value, &len) == 0;
  };
  if (!option(SO_DOMAIN, &domain) || !option(SO_TYPE, &type) || !option(SO_PROTOCOL, &protocol) ||
      !option(SO_ACCEPTCONN, &listening))
    return;
  if ((domain != AF_INET && domain != AF_INET6) || type != SOCK_STREAM || listening != 0) return;
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof local, peer_len = sizeof peer;
  if (sys::real().getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      sys::real().getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)
    return;  // not connected
  std::shared_ptr<RendezvousBoard> board =
      RendezvousBoard::open_named(reinterpret_cast<sockaddr*>(&local), local_len);
  if (!board || !board->shared()) return;  // not accepted from a listener of ours that others serve
  SocketRef ref = register_socket(fd, domain, type, protocol, SocketRole::kAccepted);
  if (!ref) return;
  first->emplace_back(static_cast<uint64_t>(st.st_ino), fd);
  choose_initial_path(ref.get());
  if (!offload_allowed(ref.get(), core::Role::kServer, reinterpret_cast<sockaddr*>(&local))) return;
  auto* stream = new (std::nothrow) StreamSocket(UpgradeRole::kServer, 0);
  if (stream == nullptr || !attach(ref.get(), stream)) return;
  copy_kernel_options(fd, ref.get(), stream);
  VSOCK_LOG(kDebug, "fd %d: a connection inherited across exec from a listener of process %u: claimed at its first use",
            fd, board->owner());
  stream->await_claim(std::move(board));
}

}  // namespace

void adopt_inherited_connections() {
  sys::ReentryGuard guard;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return;
  const int own = ::dirfd(dir);
  std::vector<int> fds;
  while (dirent* entry = ::readdir(dir)) {
    if (fds.size() >= 1024) break;  // bounded: inherited connections come first
    char* end = nullptr;
    long fd = std::strtol(entry->d_name, &end, 10);
    if (end != entry->d_name && *end == '\0' && fd >= 0 && fd != own && fd <= INT_MAX) fds.push_back(static_cast<int>(fd));
  }
  ::closedir(dir);
  std::vector<std::pair<uint64_t, int>> first;
  for (int fd : fds) adopt_if_inherited_connection(fd, &first);
}

void finish_streams_at_exit() {
  sys::ReentryGuard guard;
  // One deadline for them all (for_each_socket takes a plain function).
  static int64_t deadline_ms;
  deadline_ms = core::monotonic_ms() + kExitDrainMs;
  for_each_socket([](int, const SocketRef& ref) {
    StreamSocket* stream = managed_stream(ref);
    if (stream == nullptr || stream->parked()) return;  // a parked one is its owner's
    // A fork child that shares it goes on with it: back to TCP, not a FIN.
    if (fork_child_may_hold(stream->kept_since_fork()))
      hand_back_before_close(stream);
    else
      stream->finish_at_exit(deadline_ms);
  });
  // Those the application closed and the engine still drains: the
  // engine's thread ends with the process.
  if (UpgradeEngine* engine = running_upgrade_engine()) engine->finish_closing_at_exit(deadline_ms);
}

void before_close(int fd, const SocketRef& ref, bool last_fd) {
  StreamSocket* stream = managed_stream(ref);
  if (stream == nullptr) return;
  // SO_LINGER {1, 0}: the kernel resets the connection; the ring's side
  // must too (on the last close, as the kernel's). Asked only when the
  // library did not see it stay off since the socket was made.
  if (!(ref->known_mode.load() & kModeLingerOff)) {
    linger option{};
    socklen_t len = sizeof option;
    if (sys::real().getsockopt(fd, SOL_SOCKET, SO_LINGER, &option, &len) == 0 && option.l_onoff &&
        option.l_linger == 0)
      stream->set_abort_on_close();
  }
  // The side band may hold a reference now (serving the child's request):
  // then the release after the kernel's close would come too late for it.
  if (last_fd && fork_child_may_hold(stream->kept_since_fork())) {
    sys::ReentryGuard guard;
    hand_back_before_close(stream, fd);
  }
}

void before_close_range(unsigned int first, unsigned int last) {
  std::vector<std::pair<int, SocketRef>> closing = sockets_in_range(first, last);
  std::unordered_map<const SocketState*, uint32_t> fds_in_range;
  for (const auto& [fd, ref] : closing) ++fds_in_range[ref.get()];
  for (const auto& [fd, ref] : closing) {
    auto counted = fds_in_range.find(ref.get());
    if (counted == fds_in_range.end()) continue;  // done through a lower fd of the same socket
    before_close(fd, ref, counted->second >= ref->fds.load(std::memory_order_acquire));
    fds_in_range.erase(counted);
  }
}

void before_dup_over(int oldfd, int newfd) {
  SocketRef ref = lookup_socket(newfd);
  if (!ref || lookup_socket(oldfd).get() == ref.get()) return;  // another fd of the same socket: nothing closes
  before_close(newfd, ref, ref->fds.load(std::memory_order_acquire) == 1);
}

void on_socket_released(SocketState* state) {
  dgram::on_datagram_released(state);
  StreamSocket* stream = state->stream.exchange(nullptr, std::memory_order_acq_rel);
  uint64_t key = state->listen_key.exchange(0);
  if (stream == nullptr && key == 0) return;
  sys::ReentryGuard guard;
  // Without an engine in this process nothing of the socket is in one (a
  // fork child closing what it inherited must not open the device for it).
  UpgradeEngine* engine = running_upgrade_engine();
  if (stream != nullptr) {
    // A fork child that shares the connection goes on with it: the close
    // here must not end it over RDMA (the kernel's stays open in the child).
    if (fork_child_may_hold(stream->kept_since_fork())) hand_back_before_close(stream);
    bool drain = stream->on_last_close();
    if (engine != nullptr) engine->on_closed(stream, drain);
    stream->release();
  }
  if (key == 0) return;
  // Another listener of this process on the port goes on with the board
  // (and takes this one's rdma_cm side over): nothing stops.
  ReleasedBoard released = release_listener_board(state, key);
  if (released.still_used) {
    if (key != kJoinedBoardKey && engine != nullptr) engine->listener_moved(key, released.heir_fd);
    return;
  }
  if (engine != nullptr) engine->stop_listening(key, released.board.get());
}

namespace {

// The first use of an accepted socket that awaits its claim, in whichever
// process that is (StreamSocket::await_claim).
void claim_in_this_process(StreamSocket* stream, int fd) {
  UpgradeEngine* engine = upgrade_engine();
  VSOCK_LOG(kDebug, "fd %d: first use here, claiming it (%s)", fd, engine ? "engine" : "no engine");
  if (engine == nullptr) {
    stream->fall_back_now(FallbackReason::kLocalError, "no upgrade engine in the process that serves the socket");
    return;
  }
  engine->claim(fd, stream);
}

__attribute__((constructor)) void install_claim_handler() { StreamSocket::set_claim_handler(claim_in_this_process); }

}  // namespace

}  // namespace vsock::sock
