// epoll over upgraded sockets (see wait_engine.hpp). Each epoll fd that
// holds an upgradable TCP socket gets a view here: the socket's events,
// data and flags. While the socket is served by the kernel it also sits in
// the kernel's set; once it is upgraded (its readiness no longer the TCP
// socket's) it is taken out of the kernel's set and reported from here —
// level-triggered, edge-triggered (again after activity()) and one-shot as
// the kernel would. Sets without such sockets are the kernel's alone.
#include <errno.h>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/clock.hpp"
#include "core/config.hpp"
#include "sock/registry.hpp"
#include "sock/stream_hooks.hpp"
#include "sock/wait_engine.hpp"
#include "sock/wait_sleep.hpp"
#include "sys/real_calls.hpp"
#include "sys/reentry_guard.hpp"

namespace vsock::sock {
namespace {

struct Entry {
  SocketState* state = nullptr;  // identity: the fd still refers to it
  epoll_event event{};           // as the application registered it
  bool in_kernel = true;         // also registered in the kernel's set
  bool disabled = false;         // EPOLLONESHOT fired; MOD re-enables
  uint32_t reported = 0;         // edge-triggered: events reported and still ready
  uint64_t activity = 0;         // edge-triggered: StreamSocket::activity() then
};

struct EpollView {
  std::mutex mu;
  std::map<int, Entry> entries;
};

std::mutex g_views_mu;
std::map<int, std::shared_ptr<EpollView>> g_views;

std::shared_ptr<EpollView> find_view(int epfd, bool create) {
  std::lock_guard<std::mutex> held(g_views_mu);
  auto it = g_views.find(epfd);
  if (it != g_views.end()) return it->second;
  if (!create) return nullptr;
  auto view = std::make_shared<EpollView>();
  g_views[epfd] = view;
  return view;
}

bool upgradable(const SocketRef& ref) {
  return ref && ref->type == SOCK_STREAM && ref->kernel_reason.load() == KernelReason::kUndecided &&
         ref->role.load() != SocketRole::kListener;
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

// A socket upgraded or fell back since the last look: move it out of or
// into the kernel's set. Under the view's lock.
void sync_kernel_membership(int epfd, int fd, Entry& entry, bool managed) {
  if (managed && entry.in_kernel) {
    sys::real().epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nullptr);
    entry.in_kernel = false;
  } else if (!managed && !entry.in_kernel) {
    epoll_event event = entry.event;
    if (entry.disabled) event.events = 0;
    sys::real().epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event);
    entry.in_kernel = true;
  }
}

struct Due {
  int fd;
  SocketRef ref;
  StreamSocket* stream;
};

}  // namespace

int epoll_control(int epfd, int op, int fd, epoll_event* event) {
  std::shared_ptr<EpollView> view = find_view(epfd, false);
  if (view) {
    std::lock_guard<std::mutex> held(view->mu);
    auto it = view->entries.find(fd);
    if (it != view->entries.end() && lookup_socket(fd).get() != it->second.state) {
      view->entries.erase(it);  // the fd was closed and reused
      it = view->entries.end();
    }
    // An upgraded socket is in our view only: answer for the kernel.
    if (it != view->entries.end() && !it->second.in_kernel) {
      switch (op) {
        case EPOLL_CTL_ADD:
          errno = EEXIST;
          return -1;
        case EPOLL_CTL_DEL:
          view->entries.erase(it);
          return 0;
        case EPOLL_CTL_MOD:
          if (event == nullptr) {
            errno = EFAULT;
            return -1;
          }
          it->second.event = *event;
          it->second.disabled = false;
          it->second.reported = 0;
          return 0;
        default:
          errno = EINVAL;
          return -1;
      }
    }
  }
  int rc = sys::real().epoll_ctl(epfd, op, fd, event);
  if (rc != 0) return rc;
  SocketRef ref = lookup_socket(fd);
  if (op == EPOLL_CTL_DEL) {
    if (view) {
      std::lock_guard<std::mutex> held(view->mu);
      view->entries.erase(fd);
    }
    return 0;
  }
  if (!upgradable(ref)) return 0;
  if (!view) view = find_view(epfd, true);
  std::lock_guard<std::mutex> held(view->mu);
  Entry& entry = view->entries[fd];
  entry.state = ref.get();
  entry.event = *event;
  entry.in_kernel = true;
  entry.disabled = false;
  entry.reported = 0;
  return 0;
}

bool epoll_has_view(int epfd) {
  std::lock_guard<std::mutex> held(g_views_mu);
  return !g_views.empty() && g_views.count(epfd) != 0;
}

void epoll_forget(int fd) {
  std::lock_guard<std::mutex> held(g_views_mu);
  if (!g_views.empty()) g_views.erase(fd);
}

int epoll_wait_all(int epfd, epoll_event* events, int max, const timespec* timeout, const sigset_t* mask) {
  std::shared_ptr<EpollView> view = find_view(epfd, false);
  if (!view || max <= 0) return sys::real().epoll_pwait2(epfd, events, max, timeout, mask);
  sys::ReentryGuard guard;
  const int64_t deadline = wait_deadline(timeout);
  const int64_t spin_until = core::monotonic_us() + core::config().settings.spin_us;
  std::vector<Due> due;
  SleepSet sleep_set;
  for (;;) {
    // Which registered sockets are upgraded now.
    due.clear();
    {
      std::lock_guard<std::mutex> held(view->mu);
      for (auto it = view->entries.begin(); it != view->entries.end();) {
        SocketRef ref = lookup_socket(it->first);
        if (ref.get() != it->second.state) {  // closed: the kernel forgot it too
          it = view->entries.erase(it);
          continue;
        }
        StreamSocket* stream = managed_stream(ref);
        sync_kernel_membership(epfd, it->first, it->second, stream != nullptr);
        if (stream != nullptr && !it->second.disabled) due.push_back(Due{it->first, std::move(ref), stream});
        ++it;
      }
    }
    if (due.empty()) {
      // Nothing upgraded (any more): the kernel's wait.
      return sys::real().epoll_pwait2(epfd, events, max, timeout, mask);
    }
    int n = 0;
    for (const Due& d : due) {
      if (n == max) break;
      std::lock_guard<std::mutex> held(view->mu);
      auto it = view->entries.find(d.fd);
      if (it == view->entries.end() || it->second.disabled) continue;
      Entry& entry = it->second;
      uint32_t wanted = entry.event.events;
      uint32_t ready = epoll_bits(d.stream->poll_events(d.fd, poll_bits(wanted))) &
                       (wanted | EPOLLERR | EPOLLHUP);
      uint32_t report = ready;
      if (wanted & EPOLLET) {
        uint64_t activity = d.stream->activity();
        if (activity != entry.activity) entry.reported = 0;
        entry.activity = activity;
        report = ready & ~entry.reported;
        entry.reported = ready;
      }
      if (report == 0) continue;
      events[n].events = report;
      events[n].data = entry.event.data;
      ++n;
      if (wanted & EPOLLONESHOT) entry.disabled = true;
    }
    if (n < max) {
      int kernel = sys::real().epoll_wait(epfd, events + n, max - n, 0);
      if (kernel > 0) n += kernel;
    }
    if (n > 0 || wait_expired(deadline)) return n;
    if (core::monotonic_us() < spin_until) continue;

    sleep_set.clear();
    sleep_set.add(pollfd{epfd, POLLIN, 0});
    for (const Due& d : due) sleep_set.add_stream(d.stream, d.fd, POLLIN | POLLOUT);
    int rc = sleep_set.sleep(deadline, mask);
    if (rc < 0 && errno == EINTR) return -1;
  }
}

}  // namespace vsock::sock
