#include "sock/wait/epoll_quiet.hpp"

#include <errno.h>
#include <sys/epoll.h>

#include <algorithm>
#include <vector>

#include "core/clock.hpp"
#include "core/config.hpp"
#include "core/stats.hpp"
#include "sock/socket_route.hpp"
#include "sock/upgrade/listener_boards.hpp"
#include "sock/wait/wait_sleep.hpp"
#include "sys/real_calls.hpp"

namespace vsock::sock {
namespace {

// How often each quiet entry is swept (setting epoll_sweep_ms, 0: never):
// what only time brings to an idle stream is its peer probe, due after
// StreamChannel::kProbeIdleMs (1 s) of sleep, so the default is a second.
int64_t sweep_period_ms() { return core::config().settings.epoll_sweep_ms; }
// Quiet entries swept per batch: a set of thousands is swept a batch at a
// time, spread over the period, so that no look pays for many of them
// (each costs a wake_fds(): the idle peer's probe, its completion's wake-up
// and the re-arm after it; with 64 per batch, 1,000 idle connections made
// an epoll server's p99 round trip about 1.5 ms longer than 8 did) ...
constexpr size_t kSweepBatch = 8;
// ... but batches no closer than this: tens of thousands of quiet entries
// are swept in bigger batches rather than waking the waiter every
// millisecond.
constexpr int64_t kMinSweepGapMs = 4;
// Wake-set events taken per system call.
constexpr int kFiredPerCall = 64;

uint64_t key_data(int key) { return static_cast<uint32_t>(key); }
int data_key(uint64_t data) { return static_cast<int>(static_cast<uint32_t>(data)); }

bool has_wake_set(EpollView& view) {
  forget_wake_set_if_forked(view);
  if (view.wake_epfd >= 0) return true;
  view.wake_epfd = sys::real().epoll_create1(EPOLL_CLOEXEC);
  view.wake_forks = fork_generation();
  return view.wake_epfd >= 0;  // out of fds: nothing goes quiet
}

bool same_fds(const EpollEntry& entry, const pollfd* wake, int count) {
  if (entry.wake_count != count) return false;
  for (int i = 0; i < count; ++i) {
    if (entry.wake[i].fd != wake[i].fd || entry.wake[i].events != wake[i].events) return false;
  }
  return true;
}

// Registers the entry's wake fds one-shot in the wake set (again only if
// they changed or one fired since).
bool register_wake_fds(EpollView& view, int key, EpollEntry& entry, const pollfd* wake, int count) {
  if (entry.wake_armed && same_fds(entry, wake, count)) return true;
  entry.wake_armed = false;
  for (int i = 0; i < count; ++i) {
    epoll_event event{};
    event.events = epoll_bits(wake[i].events) | EPOLLONESHOT;
    event.data.u64 = key_data(key);
    // MOD first: a quiet entry's fds are usually registered already. A
    // number closed and reused since is another file: ENOENT, then ADD.
    if (sys::real().epoll_ctl(view.wake_epfd, EPOLL_CTL_MOD, wake[i].fd, &event) == 0) continue;
    if (errno != ENOENT || sys::real().epoll_ctl(view.wake_epfd, EPOLL_CTL_ADD, wake[i].fd, &event) != 0) return false;
  }
  entry.wake_count = count;
  for (int i = 0; i < count; ++i) entry.wake[i] = wake[i];
  entry.wake_armed = true;
  return true;
}

// Whether the entry has something to report that its last look did not
// see, as the socket stands now that wake_fds() armed it: what changed in
// between (the side-band thread took the data into the ring, or found the
// client's token and switched the socket) brings no event of its own.
bool news_since_look(const EpollEntry& entry, ManagedSocket* socket) {
  const short revents = socket->ready_now(entry.fd, poll_bits(entry.event.events));
  const uint64_t activity = (entry.event.events & EPOLLET) ? socket->activity(entry.fd) : entry.activity;
  return report_of(entry, revents, activity) != 0;
}

}  // namespace

void forget_wake_set_if_forked(EpollView& view) {
  if (view.wake_epfd < 0 || view.wake_forks == fork_generation()) return;
  sys::real().close(view.wake_epfd);  // this process's copy; the other keeps its own
  view.wake_epfd = -1;
  for (auto& [key, entry] : view.entries) {
    entry.quiet = false;
    entry.wake_armed = false;
  }
  view.quiet_count = 0;
  view.need_scan = true;
}

QuietOutcome try_quiet(EpollView& view, int key, EpollEntry& entry, ManagedSocket* socket, SleepSet* sleep) {
  // Without a sleeper to feed, a socket that cannot go quiet is left alone
  // (wake_fds() would arm and flush it for nothing); one already quiet
  // (the sweep) could, and is asked below.
  if (sleep == nullptr && !entry.quiet && !socket->wake_fds_tell_all(entry.fd)) return QuietOutcome::kAwake;
  pollfd wake[ManagedSocket::kMaxWakeFds];
  int slice_ms = -1;
  const int count = socket->wake_fds(entry.fd, poll_bits(entry.event.events), wake, &slice_ms);
  // Asked again: wake_fds() may have changed it (a resume found).
  const bool fit = slice_ms != 0 && socket->wake_fds_tell_all(entry.fd);
  const bool look_again = slice_ms == 0 || (fit && news_since_look(entry, socket));
  const bool quiet = fit && !look_again && has_wake_set(view) && register_wake_fds(view, key, entry, wake, count);
  if (!quiet) {
    if (sleep != nullptr) {
      for (int i = 0; i < count; ++i) sleep->add(wake[i]);
      sleep->limit_slice(look_again ? 0 : slice_ms);
    }
    return look_again ? QuietOutcome::kLookAgain : QuietOutcome::kAwake;
  }
  if (!entry.quiet) {
    entry.quiet = true;
    ++view.quiet_count;
  }
  view.awake.erase(key);
  if (view.next_sweep_ms == 0 && sweep_period_ms() > 0) view.next_sweep_ms = core::monotonic_ms() + sweep_period_ms();
  return QuietOutcome::kQuiet;
}

void wake_fired(EpollView& view) {
  if (view.quiet_count == 0 || view.wake_epfd < 0) return;
  epoll_event fired[kFiredPerCall];
  for (;;) {
    int n = sys::real().epoll_wait(view.wake_epfd, fired, kFiredPerCall, 0);
    for (int i = 0; i < n; ++i) {
      const int key = data_key(fired[i].data.u64);
      auto it = view.entries.find(key);
      if (it == view.entries.end()) continue;
      it->second.wake_armed = false;  // one of its fds is disarmed now
      if (it->second.quiet) core::stat_add(core::Stat::epoll_quiet_wakes);
      wake_entry(view, key);
    }
    if (n < kFiredPerCall) return;
  }
}

void wake_all_quiet(EpollView& view) {
  if (view.quiet_count == 0) return;
  for (auto& [key, entry] : view.entries) {
    if (entry.quiet) wake_entry(view, key);
  }
}

void sweep_quiet(EpollView& view, int64_t now_ms) {
  if (view.quiet_count == 0 || view.next_sweep_ms == 0 || now_ms < view.next_sweep_ms) return;
  const int64_t period = sweep_period_ms();
  const int64_t batches = std::clamp<int64_t>(static_cast<int64_t>((view.quiet_count + kSweepBatch - 1) / kSweepBatch),
                                              1, std::max<int64_t>(1, period / kMinSweepGapMs));
  const size_t batch = (view.quiet_count + static_cast<size_t>(batches) - 1) / static_cast<size_t>(batches);
  // The next batch of quiet entries, from where the last one stopped.
  std::vector<int> keys;
  auto it = view.entries.lower_bound(view.sweep_cursor);
  for (size_t seen = 0; seen < view.entries.size() && keys.size() < batch; ++seen, ++it) {
    if (it == view.entries.end()) it = view.entries.begin();
    if (it->second.quiet) keys.push_back(it->first);
  }
  if (it == view.entries.end()) it = view.entries.begin();
  view.sweep_cursor = it == view.entries.end() ? 0 : it->first;
  view.next_sweep_ms = now_ms + period / batches;
  for (int key : keys) {
    auto found = view.entries.find(key);
    if (found == view.entries.end()) continue;
    EpollEntry& entry = found->second;
    SocketRef ref = lookup_socket(entry.fd);
    ManagedSocket* socket = names_entry(ref, entry) ? managed_socket(ref) : nullptr;
    // Gone, fallen back, or no longer fit to be quiet (wake_fds() found a
    // completion waiting, or a resume): the next look takes it, and a scan
    // of the awake keys settles the first two.
    if (socket == nullptr || try_quiet(view, key, entry, socket, nullptr) != QuietOutcome::kQuiet)
      wake_entry(view, key);
  }
}

int quiet_wake_fd(const EpollView& view, int64_t now_ms, int* slice_ms) {
  if (view.quiet_count == 0 || view.wake_epfd < 0) return -1;
  int64_t left = view.next_sweep_ms - now_ms;
  *slice_ms = view.next_sweep_ms == 0 ? -1 : left <= 0 ? 0 : static_cast<int>(left);
  return view.wake_epfd;
}

}  // namespace vsock::sock
