#include "sock/wait/epoll_view.hpp"

#include <poll.h>
#include <sys/eventfd.h>

#include <vector>

#include "sock/socket_route.hpp"
#include "sock/wait/wait_sleep.hpp"
#include "sys/real_calls.hpp"

namespace vsock::sock {
namespace {

// The kernel refuses epoll sets nested deeper than this; a look from
// outside never goes further either.
constexpr int kMaxNesting = 5;

std::mutex g_views_mu;
std::map<int, std::shared_ptr<EpollView>> g_views;
// Whether any view ever came into use: until then poll and select skip
// the per-fd lookup (and its lock) for every fd that is not a socket.
std::atomic<bool> g_any_in_use{false};

bool observe_at(EpollView& view, SleepSet* sleep, int depth) {
  // The nested sets first: their eventfds make them readable in this
  // set's kernel part.
  if (depth < kMaxNesting) {
    for (const std::shared_ptr<EpollView>& inner : live_nested(view)) observe_at(*inner, sleep, depth + 1);
  }
  std::vector<DueEntry> due;
  bool ready = false;
  {
    std::lock_guard<std::mutex> held(view.mu);
    scan_entries(view, &due, true);  // quiet ones too: a look from outside is rare and full
    uint64_t activity = 0;
    for (const DueEntry& d : due) {
      uint32_t now_ready = 0;
      EpollEntry* found = entry_of(view, d);
      if (found == nullptr) continue;
      EpollEntry& entry = *found;
      if (entry_report(entry, d.socket, d.fd, &now_ready, Look::kFull) != 0) ready = true;
      // This look may have taken the completion event that was to wake a
      // quiet entry in the view's own wait (and left its queue unarmed).
      if (entry.quiet) wake_entry(view, d.key);
      if (d.socket != nullptr) activity += d.socket->activity(d.fd);
    }
    set_signal(view, ready, activity, true);
  }
  // Ready: the eventfd already wakes the sleeper.
  if (sleep != nullptr && !ready) {
    for (const DueEntry& d : due) sleep_on(sleep, d);
  }
  return ready;
}

}  // namespace

EpollView::~EpollView() {
  if (signal_fd >= 0) sys::real().close(signal_fd);
  if (wake_epfd >= 0) sys::real().close(wake_epfd);
}

std::shared_ptr<EpollView> find_view(int epfd) {
  std::lock_guard<std::mutex> held(g_views_mu);
  if (g_views.empty()) return nullptr;
  auto it = g_views.find(epfd);
  return it == g_views.end() ? nullptr : it->second;
}

void create_view(int epfd) {
  auto view = std::make_shared<EpollView>(epfd);
  std::lock_guard<std::mutex> held(g_views_mu);
  g_views[epfd] = std::move(view);
}

void drop_view(int fd) {
  std::shared_ptr<EpollView> gone;  // destroyed (its eventfd closed) outside the lock
  std::lock_guard<std::mutex> held(g_views_mu);
  auto it = g_views.find(fd);
  if (it == g_views.end()) return;
  gone = std::move(it->second);
  g_views.erase(it);
}

void drop_view_range(unsigned int first, unsigned int last) {
  std::vector<std::shared_ptr<EpollView>> gone;
  std::lock_guard<std::mutex> held(g_views_mu);
  for (auto it = g_views.lower_bound(static_cast<int>(first > INT32_MAX ? INT32_MAX : first));
       it != g_views.end() && static_cast<unsigned int>(it->first) <= last;) {
    gone.push_back(std::move(it->second));
    it = g_views.erase(it);
  }
}

std::vector<std::shared_ptr<EpollView>> live_nested(EpollView& view) {
  std::vector<std::shared_ptr<EpollView>> inner;
  std::lock_guard<std::mutex> held(view.mu);
  for (auto it = view.nested.begin(); it != view.nested.end();) {
    std::shared_ptr<EpollView> p = it->second.lock();
    if (!p || find_view(it->first) != p) {  // closed (the kernel dropped it too)
      it = view.nested.erase(it);
      continue;
    }
    if (p->in_use.load(std::memory_order_acquire)) inner.push_back(std::move(p));
    ++it;
  }
  return inner;
}

void mark_in_use(EpollView& view) {
  view.in_use.store(true, std::memory_order_release);
  g_any_in_use.store(true, std::memory_order_release);
}

std::shared_ptr<EpollView> view_in_use(int epfd) {
  if (!g_any_in_use.load(std::memory_order_acquire)) return nullptr;
  std::shared_ptr<EpollView> view = find_view(epfd);
  return view && view->in_use.load(std::memory_order_acquire) ? view : nullptr;
}

short poll_bits(uint32_t epoll_events) {
  short bits = 0;
  if (epoll_events & EPOLLIN) bits |= POLLIN;
  if (epoll_events & EPOLLOUT) bits |= POLLOUT;
  if (epoll_events & EPOLLRDHUP) bits |= POLLRDHUP;
  if (epoll_events & EPOLLPRI) bits |= POLLPRI;
  return bits;
}

uint32_t epoll_bits(short poll_events) {
  uint32_t bits = 0;
  if (poll_events & POLLIN) bits |= EPOLLIN;
  if (poll_events & POLLOUT) bits |= EPOLLOUT;
  if (poll_events & POLLRDHUP) bits |= EPOLLRDHUP;
  if (poll_events & POLLPRI) bits |= EPOLLPRI;
  if (poll_events & POLLERR) bits |= EPOLLERR;
  if (poll_events & POLLHUP) bits |= EPOLLHUP;
  return bits;
}

uint32_t entry_report(EpollEntry& entry, ManagedSocket* socket, int fd, uint32_t* ready_out, Look look) {
  uint32_t wanted = entry.event.events;
  pollfd kernel{fd, poll_bits(wanted), 0};
  const timespec now{0, 0};
  short revents = socket != nullptr                                   ? socket->poll_events(fd, kernel.events, look)
                  : sys::real().ppoll(&kernel, 1, &now, nullptr) > 0 ? kernel.revents
                                                                      : 0;
  uint32_t ready = ready_bits(entry, revents);
  *ready_out = ready;
  if (!(wanted & EPOLLET)) return ready;
  if (socket == nullptr) {  // no activity count: an edge is an event newly ready
    entry.reported &= ready;
    return ready & ~entry.reported;
  }
  uint64_t activity = socket->activity(fd);
  const uint32_t report = report_of(entry, revents, activity);
  if (activity != entry.activity) entry.reported = 0;
  entry.activity = activity;
  return report;
}

uint32_t ready_bits(const EpollEntry& entry, short revents) {
  return epoll_bits(revents) & (entry.event.events | EPOLLERR | EPOLLHUP);
}

uint32_t report_of(const EpollEntry& entry, short revents, uint64_t activity) {
  const uint32_t ready = ready_bits(entry, revents);
  if (!(entry.event.events & EPOLLET)) return ready;
  // Activity since the last look is a new edge: everything ready is news.
  return activity != entry.activity ? ready : ready & ~entry.reported;
}

namespace {

// A socket upgraded or fell back since the last look: moves it out of or
// into the kernel's set (an orphan cannot be named there any more).
void sync_kernel_membership(EpollView& view, int key, EpollEntry& entry, bool managed) {
  if (key < 0) return;
  if (managed && entry.in_kernel) {
    sys::real().epoll_ctl(view.epfd, EPOLL_CTL_DEL, key, nullptr);
    entry.in_kernel = false;
  } else if (!managed && !entry.in_kernel) {
    epoll_event event = entry.event;
    if (entry.disabled) event.events = 0;
    sys::real().epoll_ctl(view.epfd, EPOLL_CTL_ADD, key, &event);
    entry.in_kernel = true;
  }
}

}  // namespace

void orphan_before_close(int fd) {
  SocketRef ref = lookup_socket(fd);
  if (!ref || ref->fds.load() < 2) return;  // the last fd: the kernel drops it too
  std::vector<std::shared_ptr<EpollView>> views;
  {
    std::lock_guard<std::mutex> held(g_views_mu);
    for (const auto& [epfd, view] : g_views) views.push_back(view);
  }
  for (const std::shared_ptr<EpollView>& view : views) {
    std::lock_guard<std::mutex> held(view->mu);
    auto it = view->entries.find(fd);
    if (it == view->entries.end() || it->second.state != ref.get()) continue;
    if (it->second.in_kernel) {
      sys::real().epoll_ctl(view->epfd, EPOLL_CTL_DEL, fd, nullptr);
      it->second.in_kernel = false;
    }
    int key = fd;
    orphan_entry(*view, &key, fd);
  }
}

void erase_entry(EpollView& view, int key) {
  auto it = view.entries.find(key);
  if (it == view.entries.end()) return;
  if (it->second.quiet) --view.quiet_count;
  view.entries.erase(it);
  ++view.erasures;
  view.awake.erase(key);
}

EpollEntry* entry_of(EpollView& view, const DueEntry& due) {
  if (due.erasures == view.erasures) return due.entry;
  auto it = view.entries.find(due.key);
  return it == view.entries.end() ? nullptr : &it->second;
}

void wake_entry(EpollView& view, int key) {
  auto it = view.entries.find(key);
  if (it == view.entries.end()) return;
  if (it->second.quiet) {
    it->second.quiet = false;
    --view.quiet_count;
  }
  view.awake.insert(key);
}

bool orphan_entry(EpollView& view, int* key, int closing) {
  auto it = view.entries.find(*key);
  if (it == view.entries.end()) return false;
  EpollEntry entry = it->second;
  erase_entry(view, *key);
  // Still in the kernel's set: the kernel reports it (its TCP readiness).
  if (entry.in_kernel) return false;
  entry.fd = find_fd_of(entry.state, entry.generation, closing);
  if (entry.fd < 0) return false;  // the last copy is closed
  *key = view.next_orphan_key--;
  entry.quiet = false;
  entry.wake_armed = false;
  view.entries[*key] = entry;
  view.awake.insert(*key);
  return true;
}

namespace {

// One entry of a scan: brought up to date (see scan_entries) and, if a
// look must see it, appended to *due. Keeps view.awake in step (`awake`:
// the key is in it already).
void scan_entry(EpollView& view, int key, std::vector<DueEntry>* due, bool include_quiet, bool awake) {
  auto it = view.entries.find(key);
  if (it == view.entries.end()) {
    view.awake.erase(key);
    return;
  }
  SocketRef ref = lookup_socket(it->second.fd);
  if (!names_entry(ref, it->second)) {
    int moved = key;
    orphan_entry(view, &moved);  // erases `key`; a new one is awake
    return;
  }
  EpollEntry& entry = it->second;
  ManagedSocket* socket = managed_socket(ref);
  sync_kernel_membership(view, key, entry, socket != nullptr);
  const bool looked_at = (socket != nullptr || key < 0) && !entry.disabled;
  if (!looked_at || entry.quiet) {
    view.awake.erase(key);
    if (!looked_at && entry.quiet) {  // the kernel's again, or disabled
      entry.quiet = false;
      --view.quiet_count;
    }
    if (!looked_at || !include_quiet) return;
  } else if (!awake) {
    view.awake.insert(key);
  }
  due->push_back(DueEntry{key, entry.fd, std::move(ref), socket, poll_bits(entry.event.events), &entry, view.erasures});
}

}  // namespace

// The scans go through a copy of the keys: scan_entry erases and adds some.
void scan_entries(EpollView& view, std::vector<DueEntry>* due, bool include_quiet) {
  std::vector<int>& keys = view.scan_keys;
  keys.clear();
  for (const auto& [key, entry] : view.entries) keys.push_back(key);
  view.awake.clear();
  for (int key : keys) scan_entry(view, key, due, include_quiet, false);
}

void scan_awake(EpollView& view, std::vector<DueEntry>* due) {
  std::vector<int>& keys = view.scan_keys;
  keys.assign(view.awake.begin(), view.awake.end());
  // Each key is still awake when its turn comes: a scan_entry erases
  // only its own key from the set.
  for (int key : keys) scan_entry(view, key, due, false, true);
}

void sleep_on(SleepSet* sleep, const DueEntry& due) {
  if (due.socket != nullptr) sleep->add_socket(due.socket, due.fd, due.events);
  else sleep->add(pollfd{due.fd, due.events, 0});
}

bool observe_view(EpollView& view, SleepSet* sleep) { return observe_at(view, sleep, 0); }

void set_signal(EpollView& view, bool ready, uint64_t activity, bool create) {
  if (view.signal_fd < 0) {
    if (!ready || !create) return;
    int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0) return;  // out of fds: the outer wait still sleeps in slices
    // Unique per view: no application stores this in its epoll data.
    uint64_t marker = 0x76736f636b657066ull ^ reinterpret_cast<uintptr_t>(&view);
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = marker;
    if (sys::real().epoll_ctl(view.epfd, EPOLL_CTL_ADD, fd, &event) != 0) {
      sys::real().close(fd);
      return;
    }
    view.signal_fd = fd;
    view.marker = marker;
    view.signalled = false;
  }
  if (ready && (!view.signalled || activity != view.signal_activity)) {
    // Another write while readable still wakes the set's waiters: a new
    // edge for an edge-triggered outer set.
    uint64_t one = 1;
    sys::real().write(view.signal_fd, &one, sizeof one);
    view.signalled = true;
    view.signal_activity = activity;
  } else if (!ready && view.signalled) {
    uint64_t count;
    sys::real().read(view.signal_fd, &count, sizeof count);
    view.signalled = false;
  }
}

int drop_marker_events(EpollView& view, epoll_event* events, int count) {
  if (count <= 0) return count;
  std::lock_guard<std::mutex> held(view.mu);
  if (view.signal_fd < 0) return count;
  int kept = 0;
  for (int i = 0; i < count; ++i) {
    if (events[i].data.u64 != view.marker) events[kept++] = events[i];
  }
  return kept;
}

}  // namespace vsock::sock
