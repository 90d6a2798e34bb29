// The library's view of one epoll instance (DESIGN decision 6).
//
// An upgraded socket's readiness is no longer its TCP socket's, so the
// kernel's epoll set cannot report it: the view holds every upgradable TCP
// socket registered in the set (an Entry: events, data, edge and one-shot
// state) and reports upgraded ones itself. It also knows which other epoll
// fds are registered in the set (nested), so that a wait on it can look
// inside them.
//
// From outside — a poll or select set, or another epoll set, that holds
// this epoll fd — the kernel decides whether the epoll fd is readable. So
// a view that is looked at from outside owns an eventfd kept in its
// kernel set: observe_view() makes it readable exactly while the view's
// own epoll_wait would report an upgraded socket, and writes it again on
// new activity so that an edge-triggered outer set sees a new edge.
#pragma once
#include <sys/epoll.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "sock/managed_socket.hpp"
#include "sock/registry.hpp"

namespace vsock::sock {

class SleepSet;
class ManagedSocket;

struct EpollEntry {
  SocketState* state = nullptr;  // identity, with generation: the socket
  uint64_t generation = 0;
  int fd = -1;                   // an fd of the socket, for its calls
  epoll_event event{};           // as the application registered it
  bool in_kernel = true;         // also registered in the kernel's set
  bool disabled = false;         // EPOLLONESHOT fired; MOD re-enables
  uint32_t reported = 0;         // edge-triggered: events reported and still ready
  uint64_t activity = 0;         // edge-triggered: ManagedSocket::activity() then
  // Quiet (wait/epoll_quiet.hpp): looks leave the entry out until one of
  // its wake fds fires in the view's wake set or the sweep comes.
  bool quiet = false;
  bool wake_armed = false;       // `wake` registered one-shot, not fired since
  int wake_count = 0;
  pollfd wake[ManagedSocket::kMaxWakeFds] = {};
  int64_t idle_since_ms = -1;    // when looks began to find nothing (-1: it was ready)
};

struct EpollView {
  explicit EpollView(int fd) : epfd(fd) {}
  ~EpollView();  // closes the eventfd
  EpollView(const EpollView&) = delete;
  EpollView& operator=(const EpollView&) = delete;

  const int epfd;
  std::mutex mu;
  // Upgradable TCP sockets by registered fd number. A number closed while
  // a dup keeps the socket open moves to a negative key: the kernel's
  // registration outlives the number, unreachable by EPOLL_CTL_*.
  std::map<int, EpollEntry> entries;
  // Entries erased so far: a pointer into `entries` taken at a count
  // still holds (insertions move no node of a std::map).
  uint64_t erasures = 0;
  int next_orphan_key = -1;
  std::map<int, std::weak_ptr<EpollView>> nested;  // epoll fds in the set
  // Once anything was registered here the library waits on this set.
  std::atomic<bool> in_use{false};
  std::atomic<size_t> rotation{0};  // where the next epoll_wait starts reporting
  // The keys every look goes through (a ready list of sorts): entries of
  // served sockets that are neither quiet nor disabled, and orphans. The
  // others are the kernel's or wait for their wake set; a full scan
  // (scan_entries) rebuilds the set when sockets change route.
  std::set<int> awake;
  std::vector<int> scan_keys;  // the keys a scan goes through (its memory kept from scan to scan)
  bool need_scan = true;
  uint64_t seen_route_changes = 0;  // route_changes() at the last full scan
  // The wake set of the quiet entries (an epoll fd of the library's own,
  // -1 until needed) and when they are next all looked at.
  int wake_epfd = -1;
  uint64_t wake_forks = 0;  // fork_generation() when it was made
  size_t quiet_count = 0;
  uint64_t events_taken_seen = 0;  // wake_events_taken() after the last look, less others' takes
  int64_t next_sweep_ms = 0;  // 0: no sweep planned
  int sweep_cursor = 0;       // the key the next sweep batch starts at
  // The eventfd in the kernel set (-1 until the view is first observed
  // from outside); its epoll data is `marker`, which waits filter out.
  int signal_fd = -1;
  bool signalled = false;
  uint64_t signal_activity = 0;  // the activity last signalled
  uint64_t marker = 0;
};

// The view of an epoll fd (null: not an epoll fd the library knows).
std::shared_ptr<EpollView> find_view(int epfd);
// A new epoll fd: its (empty) view.
void create_view(int epfd);
// The fd was closed: drop its view if it was an epoll fd.
void drop_view(int fd);
void drop_view_range(unsigned int first, unsigned int last);
// The view if waits on this epoll fd must go through the library.
std::shared_ptr<EpollView> view_in_use(int epfd);
// Something was registered in the view: waits on it go through the library.
void mark_in_use(EpollView& view);
// The views of the epoll sets nested in `view` that are in use (and still
// the ones their fds name; the others are forgotten). Takes view.mu.
std::vector<std::shared_ptr<EpollView>> live_nested(EpollView& view);

short poll_bits(uint32_t epoll_events);
uint32_t epoll_bits(short poll_events);

// What the entry would report now, as epoll_wait would, without changing
// what it has reported (an edge-triggered entry's new activity does reset
// it, as epoll_wait's next look would); *ready: all the events that are
// ready. Under the view's lock; `socket` is the entry's upgraded socket
// (null: the kernel's readiness of `fd`), looked at as `look` says.
uint32_t entry_report(EpollEntry& entry, ManagedSocket* socket, int fd, uint32_t* ready, Look look);
// The same for an entry whose upgraded socket is ready for `revents` (poll
// bits) with `activity` (its activity(), read only for an edge-triggered
// entry), changing nothing: entry_report's rule, for a look that must not
// take the socket's completions (the quiet entries' check after arming).
uint32_t report_of(const EpollEntry& entry, short revents, uint64_t activity);
// What of `revents` (poll bits) the entry can report: the events it asked
// for, and EPOLLERR and EPOLLHUP always.
uint32_t ready_bits(const EpollEntry& entry, short revents);

// An entry due for a look (key: in view.entries): an upgraded socket, or
// an orphan the kernel's set no longer holds (stream null if the kernel
// serves the socket: its readiness is the fd's).
struct DueEntry {
  int key;
  int fd;
  SocketRef ref;  // keeps the socket alive while it is used
  ManagedSocket* socket;
  short events;   // poll() bits of the registered events
  EpollEntry* entry;   // view.entries[key] while view.erasures is still
  uint64_t erasures;   // this
};

// Under the view's lock: the due entry's EpollEntry, or null if it left
// the view since the look collected it (without a search while nothing
// was erased).
EpollEntry* entry_of(EpollView& view, const DueEntry& due);

// Adds to `sleep` what may change the entry's readiness.
void sleep_on(SleepSet* sleep, const DueEntry& due);

// Under the view's lock: the entries whose socket is upgraded and that are
// not disabled nor quiet (with `include_quiet`, quiet ones too), appended
// to *due; view.awake becomes their keys. On the way: drops the entries
// whose socket is gone, keeps (under a negative key) those whose number
// was closed while a dup lives on, moves sockets that upgraded out of the
// kernel's set and those that fell back into it.
void scan_entries(EpollView& view, std::vector<DueEntry>* due, bool include_quiet = false);
// The same for the keys in view.awake only (what changes the others is
// what puts them back there, or makes a full scan due).
void scan_awake(EpollView& view, std::vector<DueEntry>* due);

// Whether `ref` (a lookup of the entry's fd) is still the entry's socket:
// the number may have been closed and given to another since.
inline bool names_entry(const SocketRef& ref, const EpollEntry& entry) {
  return ref && ref.get() == entry.state && ref->generation.load() == entry.generation;
}

// Under the view's lock: the entry leaves the view (and its quiet count).
void erase_entry(EpollView& view, int key);
// Under the view's lock: the entry is looked at by the next looks (no
// longer quiet): its registration changed, or something may have.
void wake_entry(EpollView& view, int key);

// `fd` is about to be closed while another fd keeps its socket open: its
// registrations leave the kernel's sets (the number still names them) and
// live on as orphans, as the kernel's registrations outlive the number.
void orphan_before_close(int fd);

// The socket behind `fd` is no longer the entry's: true (and *key updated)
// if the entry lives on under a negative key, false if it was dropped.
// `closing`: an fd being closed, not to be taken as the socket's.
bool orphan_entry(EpollView& view, int* key, int closing = -1);

// A look from outside (a poll/select set or an outer epoll set holds this
// epoll fd): progresses the view's upgraded sockets and those of the epoll
// sets nested in it, sets its eventfd to what its epoll_wait would report
// now, and, if `sleep` is given, adds to it what may change that. Returns
// whether the view's library part is ready.
bool observe_view(EpollView& view, SleepSet* sleep);

// Brings the view's eventfd in line (created if `create`): readable while
// `ready`; written again when `activity` changed. Under the view's lock.
void set_signal(EpollView& view, bool ready, uint64_t activity, bool create);

// Drops the eventfd's own events from what the kernel returned; returns
// the count left. Takes the view's lock.
int drop_marker_events(EpollView& view, epoll_event* events, int count);

}  // namespace vsock::sock
