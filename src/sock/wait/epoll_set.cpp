// epoll over upgraded sockets (see wait_engine.hpp and epoll_view.hpp).
// While an upgradable socket is served by the kernel it sits in the
// kernel's set as the application registered it; once it is upgraded (its
// readiness no longer the TCP socket's) it is taken out of the kernel's
// set and reported from the view — level-triggered, edge-triggered (again
// after activity()) and one-shot as the kernel would. Epoll fds nested in
// the set stay in the kernel's set: their eventfds make them readable
// there. Sets that never held either are the kernel's alone.
#include <errno.h>

#include <vector>

#include "core/clock.hpp"
#include "core/config.hpp"
#include "sock/wait/epoll_quiet.hpp"
#include "sock/wait/epoll_view.hpp"
#include "sock/wait/kernel_epoll.hpp"
#include "sock/registry.hpp"
#include "sock/wait/spin_budget.hpp"
#include "sock/wait/thread_scratch.hpp"
#include "sock/socket_route.hpp"
#include "sock/wait/wait_engine.hpp"
#include "sock/wait/wait_sleep.hpp"
#include "sys/real_calls.hpp"
#include "sys/reentry_guard.hpp"

namespace vsock::sock {
namespace {

// wake_events_taken() and this thread's count when a look began.
struct TakenAtLook {
  uint64_t all = 0;
  uint64_t own = 0;
};

// A socket whose readiness the library may serve, now or later: a TCP
// connection that may upgrade, a UDP socket that may receive over UD.
bool upgradable(const SocketRef& ref) {
  if (!ref || ref->kernel_reason.load() != KernelReason::kUndecided) return false;
  if (ref->type == SOCK_DGRAM) return ref->datagram.load(std::memory_order_acquire) != nullptr;
  return ref->type == SOCK_STREAM && ref->role.load() != SocketRole::kListener;
}

// The kernel's answer for an entry the kernel's set no longer holds.
int control_upgraded(EpollView& view, EpollEntry& entry, int op, int fd, epoll_event* event) {
  switch (op) {
    case EPOLL_CTL_ADD:
      errno = EEXIST;
      return -1;
    case EPOLL_CTL_DEL:
      erase_entry(view, fd);
      return 0;
    case EPOLL_CTL_MOD:
      if (event == nullptr) {
        errno = EFAULT;
        return -1;
      }
      // The kernel refuses to modify an exclusive entry, or to make one.
      if ((entry.event.events | event->events) & EPOLLEXCLUSIVE) {
        errno = EINVAL;
        return -1;
      }
      entry.event = *event;
      entry.disabled = false;
      entry.reported = 0;
      wake_entry(view, fd);  // other events: its wake fds may differ
      return 0;
    default:
      errno = EINVAL;
      return -1;
  }
}

// The views of the epoll sets nested in `view` that the library serves,
// and the upgraded sockets of `view` itself (moved out of the kernel's set
// as they upgrade, back in as they fall back) that this look must see:
// the awake ones, after the quiet ones whose wake fds fired (on a look
// that also asks the kernel) or whose sweep came. All of them after a
// socket changed route; the quiet ones, too, after another wait took
// completion events (see wake_events_taken). Returns whether any entry is
// quiet; *taken: the events taken when the look began (end_look's).
bool collect(EpollView& view, Look look, std::vector<DueEntry>* due, std::vector<std::shared_ptr<EpollView>>* inner,
             TakenAtLook* taken) {
  due->clear();
  bool any_quiet;
  {
    std::lock_guard<std::mutex> held(view.mu);
    forget_wake_set_if_forked(view);
    const uint64_t changes = route_changes();
    taken->all = wake_events_taken();
    taken->own = t_wake_events_taken;
    if (taken->all != view.events_taken_seen) wake_all_quiet(view);
    if (look != Look::kSpin) {
      wake_fired(view);
      sweep_quiet(view, core::monotonic_ms());
    }
    if (view.need_scan || changes != view.seen_route_changes) {
      view.need_scan = false;
      view.seen_route_changes = changes;
      scan_entries(view, due);
    } else {
      scan_awake(view, due);
    }
    any_quiet = view.quiet_count > 0;
  }
  *inner = live_nested(view);
  return any_quiet;
}

// The look is over: the events it took itself (its thread's, since
// collect) are no news for the quiet entries; others' are.
void end_look(EpollView& view, const TakenAtLook& taken) {
  std::lock_guard<std::mutex> held(view.mu);
  view.events_taken_seen = taken.all + (t_wake_events_taken - taken.own);
}

// After a look that asked the kernel too and found an entry with nothing
// to report: entries that a spin keeps finding idle (kSpinQuietAfterMs)
// go quiet (epoll_quiet.hpp), as a sleep makes them at once. True if one
// of them must be looked at again before the caller spins on or sleeps
// (QuietOutcome::kLookAgain: it took a completion meanwhile).
bool quiet_idle(EpollView& view, const std::vector<DueEntry>& due, int64_t now_ms) {
  std::lock_guard<std::mutex> held(view.mu);
  bool look_again = false;
  for (const DueEntry& d : due) {
    EpollEntry* found = entry_of(view, d);
    if (found == nullptr || d.socket == nullptr || found->quiet) continue;
    EpollEntry& entry = *found;
    if (entry.idle_since_ms < 0 || now_ms - entry.idle_since_ms < kSpinQuietAfterMs) continue;
    const QuietOutcome outcome = try_quiet(view, d.key, entry, d.socket, nullptr);
    if (outcome == QuietOutcome::kQuiet) continue;
    entry.idle_since_ms = now_ms;  // not fit to be quiet now: ask again later, not on every look
    if (outcome == QuietOutcome::kLookAgain) look_again = true;
  }
  return look_again;
}

// Before a sleep: what each looked-at entry must wake for. Those whose
// socket allows go quiet (their wake fds in the wake set, which the sleep
// watches, with the sweep's slice); the others' fds join the sleep.
void sleep_on_entries(EpollView& view, const std::vector<DueEntry>& due, SleepSet* sleep) {
  std::lock_guard<std::mutex> held(view.mu);
  for (const DueEntry& d : due) {
    EpollEntry* entry = entry_of(view, d);
    if (d.socket == nullptr || entry == nullptr) {
      sleep_on(sleep, d);
      continue;
    }
    if (!entry->quiet) try_quiet(view, d.key, *entry, d.socket, sleep);
  }
  int slice_ms = -1;
  const int wake_fd = quiet_wake_fd(view, core::monotonic_ms(), &slice_ms);
  if (wake_fd >= 0) {
    sleep->add(pollfd{wake_fd, POLLIN, 0});
    sleep->limit_slice(slice_ms);
  }
}

// Nothing of this set's own is ready: its eventfd must not wake its waiters.
void clear_signal(EpollView& view) {
  std::lock_guard<std::mutex> held(view.mu);
  set_signal(view, false, 0, false);
}

// Neither upgraded sockets nor served nested sets: the kernel's wait,
// minus this set's eventfd.
int kernel_wait(EpollView& view, epoll_event* events, int max, const timespec* timeout, int64_t deadline,
                const sigset_t* mask) {
  const timespec* wait_for = timeout;
  timespec left{};
  for (;;) {
    clear_signal(view);
    int n = kernel_epoll_wait(view.epfd, events, max, wait_for, mask);
    if (n <= 0) return n;
    n = drop_marker_events(view, events, n);
    if (n > 0 || wait_expired(deadline)) return n;
    // Only the eventfd (another thread signalled it meanwhile): wait out the rest.
    if (deadline >= 0) {
      int64_t left_ms = deadline - core::monotonic_ms();
      left = timespec{static_cast<time_t>(left_ms / 1000), static_cast<long>(left_ms % 1000) * 1000000};
      wait_for = &left;
    }
  }
}

// The lists of one epoll_wait_all call (ThreadScratch: kept per thread).
struct EpollLists {
  std::vector<DueEntry> due;
  std::vector<std::shared_ptr<EpollView>> inner;
  SleepSet sleep;
  void clear() {
    due.clear();
    inner.clear();
    sleep.clear();
  }
};

}  // namespace

void epoll_created(int epfd) {
  if (epfd >= 0) create_view(epfd);
}

int epoll_control(int epfd, int op, int fd, epoll_event* event) {
  std::shared_ptr<EpollView> view = fd >= 0 ? find_view(epfd) : nullptr;
  if (view) {
    std::lock_guard<std::mutex> held(view->mu);
    auto it = view->entries.find(fd);
    if (it != view->entries.end()) {
      SocketRef ref = lookup_socket(fd);
      if (!names_entry(ref, it->second)) {
        // The number was closed (and perhaps reused): the old registration
        // is no longer this number's.
        int key = fd;
        orphan_entry(*view, &key);
        it = view->entries.end();
      }
    }
    // An upgraded socket is in our view only: answer for the kernel.
    if (it != view->entries.end() && !it->second.in_kernel)
      return control_upgraded(*view, it->second, op, fd, event);
  }
  int rc = sys::real().epoll_ctl(epfd, op, fd, event);
  if (rc != 0) return rc;
  if (op == EPOLL_CTL_DEL) {
    if (view) {
      std::lock_guard<std::mutex> held(view->mu);
      erase_entry(*view, fd);
      view->nested.erase(fd);
    }
    return 0;
  }
  if (op != EPOLL_CTL_ADD && op != EPOLL_CTL_MOD) return 0;
  SocketRef ref = lookup_socket(fd);
  std::shared_ptr<EpollView> inner = ref ? nullptr : find_view(fd);
  if (!upgradable(ref) && !inner) return 0;
  if (!view) {  // an epoll fd from before the library was loaded
    create_view(epfd);
    view = find_view(epfd);
    if (!view) return 0;
  }
  std::lock_guard<std::mutex> held(view->mu);
  mark_in_use(*view);
  if (inner) {
    view->nested[fd] = inner;
    return 0;
  }
  EpollEntry& entry = view->entries[fd];
  entry.state = ref.get();
  entry.generation = ref->generation.load();
  entry.fd = fd;
  entry.event = *event;
  entry.in_kernel = true;
  entry.disabled = false;
  entry.reported = 0;
  entry.idle_since_ms = -1;
  wake_entry(*view, fd);
  return 0;
}

bool epoll_has_view(int epfd) { return view_in_use(epfd) != nullptr; }

void epoll_forget(int fd) { drop_view(fd); }

void epoll_closing(int fd) { orphan_before_close(fd); }

void epoll_forget_range(unsigned int first, unsigned int last) { drop_view_range(first, last); }

int epoll_wait_all(int epfd, epoll_event* events, int max, const timespec* timeout, const sigset_t* mask) {
  std::shared_ptr<EpollView> view = view_in_use(epfd);
  if (!view || max <= 0) return kernel_epoll_wait(epfd, events, max, timeout, mask);
  if (!valid_timeout(timeout)) {
    errno = EINVAL;
    return -1;
  }
  sys::ReentryGuard guard;
  const int64_t deadline = wait_deadline(timeout);
  // The profile's spin (bounded, yields the CPU now and then), then sleeps.
  SpinBudget spin(core::config().settings.spin_us, deadline < 0 ? -1 : deadline * 1000,
                  SpinHistory::of_this_thread());
  bool spinning = true;
  ThreadScratch<EpollLists> scratch;
  std::vector<DueEntry>& due = (*scratch).due;
  std::vector<std::shared_ptr<EpollView>>& inner = (*scratch).inner;
  SleepSet& sleep_set = (*scratch).sleep;
  for (;;) {
    const Look look = !spinning || wait_expired(deadline) ? Look::kFull
                      : spin.checkpoint()                 ? Look::kCheckpoint
                                                          : Look::kSpin;
    TakenAtLook taken;
    const bool any_quiet = collect(*view, look, &due, &inner, &taken);
    if (due.empty() && inner.empty() && !any_quiet) return kernel_wait(*view, events, max, timeout, deadline, mask);
    // The nested sets' eventfds now say whether they are ready.
    for (const std::shared_ptr<EpollView>& p : inner) observe_view(*p, nullptr);
    int n = 0;
    bool idle_seen = false;  // an entry with nothing to report
    const int64_t look_ms = look == Look::kSpin ? -1 : core::monotonic_ms();
    // Each call starts one entry further on, so that with a small `max` a
    // socket that stays ready does not hide the others (the kernel's ready
    // list rotates likewise).
    const size_t first = due.empty() ? 0 : view->rotation.fetch_add(1, std::memory_order_relaxed) % due.size();
    std::unique_lock<std::mutex> view_held(view->mu, std::defer_lock);
    if (!due.empty()) view_held.lock();  // once for the look, not per entry
    for (size_t i = 0; i < due.size() && n < max; ++i) {
      const DueEntry& d = due[(first + i) % due.size()];
      EpollEntry* found = entry_of(*view, d);
      if (found == nullptr || found->disabled) continue;
      EpollEntry& entry = *found;
      uint32_t ready = 0;
      uint32_t report = entry_report(entry, d.socket, d.fd, &ready, look);
      if (entry.event.events & EPOLLET) entry.reported = ready;
      if (report == 0) {
        idle_seen = true;
        if (entry.idle_since_ms < 0) entry.idle_since_ms = look_ms;  // (stays -1 on a spin look)
        continue;
      }
      entry.idle_since_ms = -1;
      events[n].events = report;
      events[n].data = entry.event.data;
      ++n;
      if (entry.event.events & EPOLLONESHOT) entry.disabled = true;
    }
    if (view_held.owns_lock()) view_held.unlock();
    // The kernel's own fds: on the first look, then every few (a system
    // call each time), always on the last look (full) and once the spin
    // ends (the sleep).
    if (n < max && look != Look::kSpin) {
      int kernel = sys::real().epoll_wait(epfd, events + n, max - n, 0);
      if (kernel > 0) n += drop_marker_events(*view, events + n, kernel);
    }
    end_look(*view, taken);
    const bool look_again = idle_seen && look != Look::kSpin && quiet_idle(*view, due, look_ms);
    if (n > 0) return n;
    if (wait_expired(deadline)) {
      if (look == Look::kFull) return 0;
      spinning = false;  // one full look before giving up
      continue;
    }
    // Neither a sleep nor the spin's next step first: what quiet_idle()
    // saw come may be all the news there will be (no event follows it).
    if (look_again) continue;
    if (spinning && (spinning = spin.next())) continue;

    // Sleep on the kernel's set (its own fds, the nested sets, this set's
    // eventfd: cleared, nothing here is ready) and what may wake ours.
    clear_signal(*view);
    sleep_set.clear();
    sleep_set.add(pollfd{epfd, POLLIN, 0});
    for (const std::shared_ptr<EpollView>& p : inner) observe_view(*p, &sleep_set);
    sleep_on_entries(*view, due, &sleep_set);
    int rc = sleep_set.sleep(deadline, mask);
    if (rc < 0 && errno == EINTR) return -1;
  }
}

}  // namespace vsock::sock
