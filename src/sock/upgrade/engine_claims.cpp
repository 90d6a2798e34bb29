// The side band, shared listeners: the rendezvous listener, claims by the
// process that uses a socket first, and adopting a listener whose owner left.
#include "sock/upgrade/engine.hpp"

namespace vsock::sock::side_band {

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
  forget_unclaimed(stream);  // used: no longer the engine's to claim
  claim_locked(fd, stream);
}

// Under the engine's lock. The fd table holds a reference of its own.
void Engine::forget_unclaimed(StreamSocket* stream) {
  for (auto it = unclaimed_.begin(); it != unclaimed_.end(); ++it) {
    if (it->stream != stream) continue;
    unclaimed_.erase(it);
    stream->release();
    return;
  }
}

void Engine::on_accepted_unclaimed(int fd, StreamSocket* stream, bool claim_follows) {
  std::lock_guard<std::mutex> held(mu_);
  ++accepts_;
  Listener* listener = listener_of(stream->rendezvous().get());
  if (listener == nullptr) return;  // another process's listener
  // Answered from the backlog: bound at the claim (upgrade_here), if the
  // claim is this process's.
  SocketNames names;
  if (!listener->early.empty() && read_names(fd, &names)) {
    auto early = find_early(*listener, names);
    if (early != listener->early.end()) (*early)->accepted = true;
  }
  stream->retain();
  unclaimed_.push_back(Unclaimed{stream, fd, core::monotonic_ms(), fork_generation(), accepts_});
  // The thread keeps this socket's claim time, and those accepted before
  // may be due now (a wake-up of that thread per accept, unless the claim
  // comes at once: then there is no claim time to keep).
  if (!claim_follows) wake();
}

// When the listener's process claims an unused socket itself: 50 ms after
// its accept if the process accepted another connection since, else after
// kClaimAloneMs or half of upgrade_timeout_ms, whichever is less. A process
// that forks a child per connection accepts the next one only after its
// fork, which hands the socket to the child; under load that fork came
// after the 50 ms window (CI saw it), and a claim before it leaves the
// connection to a process that only closes it. A process that accepts and
// then waits for something else (a child's exit, a backend) before it uses
// the socket is served alone: its client waits upgrade_timeout_ms for the
// upgrade, so the claim comes before half of that. Under the engine's lock.
int64_t Engine::claim_at_ms(const Unclaimed& entry) const {
  if (entry.accepts != accepts_) return entry.since_ms + kClaimWindowMs;
  const int64_t half_wait = int64_t{settings_.upgrade_timeout_ms} / 2;
  return entry.since_ms + std::max(kClaimWindowMs, std::min(kClaimAloneMs, half_wait));
}

// Under the engine's lock.
void Engine::claim_unused() {
  const int64_t now = core::monotonic_ms();
  for (size_t i = 0; i < unclaimed_.size();) {
    Unclaimed entry = unclaimed_[i];
    const bool forked = entry.forks != fork_generation();  // maybe the other process's now
    if (!entry.stream->awaiting_claim() && !entry.stream->kernel_only() && !forked) {
      // Used here: its claim() is on its way (waiting for our lock) and
      // drops the entry. Until then the entry keeps a listener closed
      // meanwhile lingering (awaits_requests), which the claim needs.
      ++i;
      continue;
    }
    const bool settled = entry.stream->kernel_only() || forked;
    if (!settled && now < claim_at_ms(entry)) {
      ++i;
      continue;
    }
    unclaimed_.erase(unclaimed_.begin() + static_cast<long>(i));
    if (!settled && take_claim_unforked(entry)) claim_locked(entry.fd, entry.stream);
    entry.stream->release();
  }
}

// Under the engine's lock. The socket's lock orders the claim against a
// fork's hand-over, which holds every socket's lock from just after the
// fork counted (note_fork_starting) until the child exists: either no
// fork began and the claim is ours (a fork now puts the socket up for
// claim again: StreamSocket::revert_begin), or one did and the socket may
// be the child's to claim.
bool Engine::take_claim_unforked(const Unclaimed& entry) {
  StreamLock stream_held = entry.stream->lock();
  return entry.forks == fork_generation() && entry.stream->take_claim();
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
    upgrade_here(*owner, fd, stream, names);
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

}  // namespace vsock::sock::side_band
