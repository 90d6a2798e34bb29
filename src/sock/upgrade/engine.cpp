// The side band's engine: its thread (rdma_cm events, timers), the sockets
// it tracks and drains at close, and the one engine of the process.
#include "sock/upgrade/engine.hpp"

#include "sock/stream/owner_inbox.hpp"
#include "sock/stream/stream_handoff.hpp"

namespace vsock::sock::side_band {

uint64_t random_nonce() {
  uint64_t nonce = 0;
  while (::getrandom(&nonce, sizeof nonce, 0) != static_cast<ssize_t>(sizeof nonce) || nonce == 0) {
  }
  return nonce;
}

// Parked channels are a cache: when the memory budget or the locked-memory
// limit refuses a new connection's channel, the oldest parked ones give
// theirs back, one at a time, before the connection is left on TCP.
std::unique_ptr<StreamChannel> Engine::new_channel() {
  core::Result<StreamChannel> made = StreamChannel::create(device_, StreamConfig::from_settings(settings_));
  if (made) return std::make_unique<StreamChannel>(std::move(made.value()));
  if (!short_of_memory(made.error())) return nullptr;
  std::lock_guard<std::mutex> held(mu_);  // for the parked channels
  return new_channel_locked();
}

std::unique_ptr<StreamChannel> Engine::new_channel_locked() {
  for (;;) {
    core::Result<StreamChannel> made = StreamChannel::create(device_, StreamConfig::from_settings(settings_));
    if (made) return std::make_unique<StreamChannel>(std::move(made.value()));
    if (!short_of_memory(made.error()) || !yield_parked_memory()) return nullptr;
  }
}

rdma::Status Engine::start_channel_locked(StreamChannel& channel, const rdma::RingDescriptor& peer_ring) {
  rdma::Status started = channel.start(peer_ring);
  while (!started && short_of_memory(started.error()) && yield_parked_memory()) started = channel.start(peer_ring);
  return started;
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

// --------------------------------------------------------- the thread --

void Engine::dispatch(const rdma::CmEvent& event) {
  if (datagrams_.dispatch(event)) return;
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
  for (size_t i = 0; i < parked_.size(); ++i) {
    if (!parked_.at(i).connection.owns(event)) continue;
    parked_.at(i).connection.on_event(event);  // an end: serve_parked() drops it
    return;
  }
  for (const Tracked& tracked : tracked_) {
    StreamSocket* stream = tracked.stream;
    StreamLock stream_held = stream->lock();
    if (stream->connector().owns(event)) {
      on_connector_event(stream, event);
      return;
    }
    if (stream->connection().owns(event)) {
      // A parked channel's end while its Attach waits: check_attach() asks
      // with rdma_cm instead.
      if (tracked.attach_deadline_ms != 0)
        stream->connection().on_event(event);
      else
        on_connection_event(stream, event);
      return;
    }
  }
  VSOCK_LOG(kDebug, "rdma_cm event %s for no one", rdma::cm_event_name(event.type));
}

int64_t Engine::ring_grow_interval_ms() const {
  return kRingGrowPollMs * static_cast<int64_t>(1 + tracked_.size() / kRingGrowPollPer);
}

void Engine::check_timers() {
  const int64_t now = core::monotonic_ms();
  const bool ring_grow_look = now - ring_grow_look_ms_ >= ring_grow_interval_ms();
  if (ring_grow_look) ring_grow_look_ms_ = now;
  retry_adoptions();
  serve_parked(now);
  datagrams_.check_deadlines();
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
    expire_held_attaches(*listener, now);
    for (int fd : expired.tcp_fds) {
      auto it = listener->sockets.find(fd);
      if (it == listener->sockets.end()) continue;
      it->second->fall_back_now(FallbackReason::kNoRequest, "no upgrade request came");
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
      StreamLock stream_held = stream->lock();
      if (tracked_[i].attach_deadline_ms != 0) check_attach(tracked_[i], now);
      if (tracked_[i].attach_deadline_ms == 0 && stream->connector().outcome() == rdma::CmOutcome::kPending &&
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
      // The peer's writes may fill a small ring while the application
      // reads nothing: the ring grows without it (kRingGrowPollMs).
      if (ring_grow_look && stream->ring_may_grow_locked()) stream->progress_locked();
      UpgradePhase phase = stream->upgrade().phase();
      // Settled: the deadline is no longer anyone's. Left standing, a past
      // deadline made every later poll timeout 0, and the thread ran its
      // rounds back to back for as long as the connection lived.
      if (phase == UpgradePhase::kSwitched || phase == UpgradePhase::kFailed) tracked_[i].deadline_ms = 0;
      if (tracked_[i].deadline_ms != 0 && now >= tracked_[i].deadline_ms && !stream->kernel_only()) {
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
    // Drained (close_finished), then parked if its channel may carry the
    // next connection (park_closed: at most kParkWaitMs more).
    bool done = now >= closing_[i].deadline_ms;
    if (!done && (closing_[i].park_until_ms != 0 || stream->close_finished())) done = park_closed(closing_[i], now);
    if (done) {
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
  for (auto& [key, listener] : listeners_) {
    if (!listener->requests.empty() && listener->board && listener->board->shared())
      soonest = std::min<int64_t>(soonest, now + kBoardPollMs);
    for (const auto& [handle, held] : listener->attaches)
      soonest = std::min<int64_t>(soonest, held.since_ms + kAttachHoldMs);
  }
  if (!adoptions_.empty()) soonest = std::min<int64_t>(soonest, now + kAdoptPollMs);
  if (int resolving = datagrams_.next_timeout_ms(); resolving >= 0)
    soonest = std::min<int64_t>(soonest, now + resolving);
  // (The next accept wakes the thread: it may bring an entry's claim closer.)
  for (const Unclaimed& entry : unclaimed_)
    if (entry.stream->awaiting_claim()) soonest = std::min(soonest, claim_at_ms(entry));  // (else its claim is on its way)
  if (int64_t parked = parked_.next_expiry_ms(now); parked >= 0) soonest = std::min(soonest, now + parked);
  for (const Tracked& tracked : tracked_) {
    if (tracked.deadline_ms != 0) soonest = std::min(soonest, tracked.deadline_ms);
    if (tracked.attach_deadline_ms != 0) soonest = std::min(soonest, tracked.attach_deadline_ms);
    StreamLock stream_held = tracked.stream->lock();
    if (switch_in_progress(tracked.stream)) soonest = std::min<int64_t>(soonest, now + kSwitchPollMs);
    if (tracked.stream->holds_data_locked()) soonest = std::min<int64_t>(soonest, now + kHeldDataPollMs);
    if (tracked.stream->ring_may_grow_locked())
      soonest = std::min<int64_t>(soonest, ring_grow_look_ms_ + ring_grow_interval_ms());
    if (tracked.stream->awaiting_first_write()) soonest = std::min<int64_t>(soonest, now + kFirstWritePollMs);
    if (tracked.attach_deadline_ms == 0 && tracked.stream->connector().outcome() == rdma::CmOutcome::kPending &&
        tracked.stream->upgrade().phase() == UpgradePhase::kConnecting && !tracked.stream->awaiting_first_write())
      soonest = std::min<int64_t>(soonest, now + tracked.stream->connector().remaining_ms());
  }
  return static_cast<int>(std::max<int64_t>(0, soonest - now));
}

void Engine::run() {
  sys::ReentryGuard guard;  // everything this thread calls goes straight to libc
  // Background work: woken (a close to drain, a wake-up of the
  // application's), it waits for the application's thread to block or for
  // its time slice to end, instead of preempting it on the CPU it may
  // share (it inherits the application's affinity). Its share of the CPU
  // is the same. Measured: a short connection's close() 0.9 -> 0.3 ms
  // (docs/performance.md, "Connection set-up").
  sched_param no_priority{};
  pthread_setschedparam(pthread_self(), SCHED_BATCH, &no_priority);
  std::vector<pollfd> fds;
  for (;;) {
    // The owner inbox (-1 until a fork kept connections on RDMA; poll
    // skips it then): fork children ask for their connections there.
    fds.assign({{channel_.fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}, {owner_inbox_fd(), POLLIN, 0}});
    int timeout;
    {
      std::lock_guard<std::mutex> held(mu_);
      take_closed();
      timeout = next_timeout_ms();
      if (!add_channel_fds(&fds)) timeout = 0;
    }
    sys::real().poll(fds.data(), static_cast<nfds_t>(fds.size()), timeout);
    bool channel_woke = false;
    for (size_t i = 3; i < fds.size(); ++i) channel_woke = channel_woke || (fds[i].revents & POLLIN) != 0;
    const bool cm_event = (fds[0].revents & POLLIN) != 0;
    if (fds[1].revents & POLLIN) {
      uint64_t value;
      (void)!sys::real().read(wake_fd_, &value, sizeof value);
    }
    // Without the engine's lock: a handoff takes socket locks and waits
    // (bounded) for the peer's device.
    if (fds[2].revents & POLLIN) serve_owner_inbox(hand_back_for_child);
    std::lock_guard<std::mutex> held(mu_);
    take_closed();
    // Only when poll saw one: every look at an empty rdma_cm channel is a
    // failed system call (the set-up of a connection makes several loops).
    for (int i = 0; cm_event && i < 64; ++i) {
      core::Result<rdma::CmEvent> event = channel_.next_event(0);
      if (!event) break;
      dispatch(event.value());
    }
    if (channel_woke) drain_channel_events(fds);
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
  stream->retain();  // the note's
  {
    std::lock_guard<std::mutex> held(closed_mu_);
    closed_inbox_.push_back(ClosedNote{stream, drain, core::monotonic_ms()});
  }
  // A close to finish needs the thread now; untracking one can wait for
  // its next round (as before the inbox, no wake-up for it).
  if (drain) wake();
}

void Engine::take_closed() {
  std::vector<ClosedNote> notes;
  {
    std::lock_guard<std::mutex> held(closed_mu_);
    if (closed_inbox_.empty()) return;
    notes.swap(closed_inbox_);
  }
  for (const ClosedNote& note : notes) {
    drop_waiting_socket(note.stream);
    forget_unclaimed(note.stream);
    if (!note.drain) {
      untrack(note.stream);
      note.stream->release();
      continue;
    }
    // The note's reference is the closing list's now.
    closing_.push_back(Closing{note.stream, note.closed_ms + kCloseDrainMs});
  }
}

void Engine::finish_closing_at_exit(int64_t deadline_ms) {
  std::vector<StreamSocket*> streams;
  {
    std::lock_guard<std::mutex> held(mu_);
    take_closed();
    for (Closing& closing : closing_) {
      closing.stream->retain();
      streams.push_back(closing.stream);
    }
  }
  // The engine's thread goes on with them too: both take the socket's lock.
  for (StreamSocket* stream : streams) {
    stream->finish_closed_at_exit(deadline_ms);
    stream->release();
  }
}

}  // namespace vsock::sock::side_band

namespace vsock::sock {
namespace {

using side_band::Engine;

Engine* g_engine = nullptr;
std::mutex g_engine_lock;
bool g_engine_failed = false;

// A child of fork() has none of the parent's threads: it starts its own
// engine when it needs one. The parent's objects are left alone (their
// rdma_cm and verbs handles are the parent's).
void forget_engine_in_child() {
  set_held_data_waker(nullptr, nullptr);
  if (g_engine != nullptr) g_engine->close_fds_in_child();
  core::stat_set(core::Stat::parked_now, 0);  // the parent's parked channels are not the child's
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

uint64_t new_nonce() { return side_band::random_nonce(); }

}  // namespace vsock::sock
