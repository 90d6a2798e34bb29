#include "sock/stats_publisher.hpp"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/config.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "core/stats_segment.hpp"
#include "sock/registry.hpp"
#include "sock/socket_report.hpp"
#include "sys/reentry_guard.hpp"
#include "vsock/vsock.h"

namespace vsock::sock {
namespace {

constexpr int kCounters = static_cast<int>(core::Stat::kCount);
#define VSOCK_PUBLISHER_STR2(x) #x
#define VSOCK_PUBLISHER_STR(x) VSOCK_PUBLISHER_STR2(x)
constexpr const char* kLibraryVersion = VSOCK_PUBLISHER_STR(VSOCK_VERSION_MAJOR) "." VSOCK_PUBLISHER_STR(
    VSOCK_VERSION_MINOR) "." VSOCK_PUBLISHER_STR(VSOCK_VERSION_PATCH);

// 0: not started in this process; 1: started (or not wanted).
std::atomic<int> g_started{0};
// In a fork child: when the fork happened (CLOCK_MONOTONIC ms), else 0.
std::atomic<int64_t> g_forked_at_ms{0};

// The segment: made by the thread, unlinked at exit, forgotten in a fork
// child. g_segment_lock guards these fields only; publishing does not take
// it (it takes socket locks, which fork() holds while it waits for this
// lock in its prepare handler).
std::mutex g_segment_lock;
void* g_base = nullptr;
size_t g_size = 0;
long g_owner_pid = 0;  // the process that made g_path
bool g_exiting = false;  // stats_publisher_remove() ran: make nothing new
char g_path[512] = "";

long current_pid() { return ::syscall(SYS_getpid); }

int64_t monotonic_ms() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1000 + now.tv_nsec / 1'000'000;
}

int64_t unix_ns() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

// Field 22 of /proc/self/stat: the start time in clock ticks since boot
// (vsock-stat compares it to tell a reused pid from ours).
uint64_t start_ticks() {
  char text[1024];
  int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  const char* p = std::strrchr(text, ')');  // the name may hold spaces and parentheses
  if (p == nullptr) return 0;
  // After ") " come fields 3, 4, ...: skip to field 22.
  for (int field = 2; field < 22 && p != nullptr; ++field) p = std::strchr(p + 1, ' ');
  return p != nullptr ? std::strtoull(p + 1, nullptr, 10) : 0;
}

// An owner-only directory of ours: made if missing, else checked (not a
// symbolic link, ours, no access for others), so that nobody else can
// plant or read a segment in it.
bool usable_directory(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return false;
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid() ||
      (st.st_mode & 0077) != 0)
    return false;
  return ::access(dir.c_str(), W_OK | X_OK) == 0;
}

// Makes and maps the segment under a temporary name, fills its fixed part,
// then renames it into place: a reader never sees a half-made header.
bool create_segment() {
  const long pid = current_pid();
  std::string dir;
  for (const std::string& candidate : core::segment_directories(std::getenv("XDG_RUNTIME_DIR"), ::getuid()))
    if (usable_directory(candidate)) {
      dir = candidate;
      break;
    }
  if (dir.empty()) {
    VSOCK_LOG(kInfo, "no stats segment for vsock-stat: no private directory (XDG_RUNTIME_DIR or /dev/shm)");
    return false;
  }
  const std::string path = dir + "/" + core::segment_file_name(pid);
  const std::string temporary = dir + "/." + core::segment_file_name(pid) + ".new";
  const size_t size = core::segment_size(kCounters);
  ::unlink(temporary.c_str());
  int fd = ::open(temporary.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    VSOCK_LOG(kInfo, "no stats segment for vsock-stat: %s: %s", temporary.c_str(), std::strerror(errno));
    return false;
  }
  void* base = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(size)) == 0)
    base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int error = errno;
  ::close(fd);  // the mapping stays; no fd of ours is left for the application to see
  if (base == MAP_FAILED) {
    ::unlink(temporary.c_str());
    VSOCK_LOG(kInfo, "no stats segment for vsock-stat: %s: %s", temporary.c_str(), std::strerror(error));
    return false;
  }
  const char* names[kCounters];
  for (int i = 0; i < kCounters; ++i) names[i] = core::stat_name(static_cast<core::Stat>(i));
  core::segment_init(base, size, kCounters, names, pid, ::getuid(), start_ticks(), program_invocation_short_name,
                     core::profile_name(core::config().settings.profile), kLibraryVersion);
  std::lock_guard<std::mutex> held(g_segment_lock);
  if (g_exiting || ::rename(temporary.c_str(), path.c_str()) != 0) {
    ::unlink(temporary.c_str());
    ::munmap(base, size);
    VSOCK_LOG(kInfo, "no stats segment for vsock-stat: %s: %s", path.c_str(), std::strerror(errno));
    return false;
  }
  g_base = base;
  g_size = size;
  g_owner_pid = pid;
  std::snprintf(g_path, sizeof g_path, "%s", path.c_str());
  VSOCK_LOG(kDebug, "stats segment %s", g_path);
  return true;
}

// The registry's walk takes a plain function: rows are collected here,
// one per socket. Only a socket open on several fds (dup) can come twice:
// those alone are remembered and looked up.
struct Collection {
  std::vector<core::SocketRecord> rows;
  std::vector<std::pair<const SocketState*, uint64_t>> shared_seen;
  uint32_t sockets_seen = 0;
};
thread_local Collection* t_collection = nullptr;

void collect(int fd, const SocketRef& ref) {
  Collection& c = *t_collection;
  if (ref->fds.load(std::memory_order_acquire) > 1) {
    const std::pair<const SocketState*, uint64_t> key{ref.get(), ref->generation.load(std::memory_order_acquire)};
    for (const auto& known : c.shared_seen)
      if (known == key) return;
    c.shared_seen.push_back(key);
  }
  ++c.sockets_seen;
  if (c.rows.size() >= core::kSocketRows) return;
  core::SocketRecord row;
  if (report_socket(fd, ref, &row)) c.rows.push_back(row);
  else VSOCK_LOG(kDebug, "stats: fd %d changed while it was read: no row", fd);
}

void publish(void* base, uint64_t count) {
  uint64_t counters[kCounters];
  for (int i = 0; i < kCounters; ++i) counters[i] = core::stat_get(static_cast<core::Stat>(i));
  Collection collection;
  t_collection = &collection;
  for_each_socket(collect);
  t_collection = nullptr;
  core::Published info{};
  info.publish_count = count;
  info.published_unix_ns = unix_ns();
  info.sockets_seen = collection.sockets_seen;
  core::segment_publish(base, info, counters, collection.rows.data(), static_cast<uint32_t>(collection.rows.size()));
  VSOCK_LOG(kDebug, "stats: publication %llu: %u sockets, %zu rows", static_cast<unsigned long long>(count),
            collection.sockets_seen, collection.rows.size());
}

void run_publisher() {
  sys::ReentryGuard guard;  // our own open/read/close go straight to the kernel
  // A process that lives less than this leaves no file behind, even when it
  // ends by _exit() (fork children of servers often do): only exit()
  // removes the segment, and each one is ~106 KiB of tmpfs.
  timespec delay{core::kCreateDelayMs / 1000, (core::kCreateDelayMs % 1000) * 1'000'000L};
  while (nanosleep(&delay, &delay) != 0 && errno == EINTR) {
  }
  if (!create_segment()) return;
  void* base = g_base;  // only a fork child changes g_base, and this thread is not in it
  uint64_t count = 1;
  publish(base, count);
  uint32_t seen = 0;
  timespec last{};
  clock_gettime(CLOCK_MONOTONIC, &last);
  for (;;) {
    if (!core::segment_wait_request(base, &seen, -1)) continue;
    // Rate limit: a reader asking in a loop costs the process at most one
    // publication per kMinPublishGapMs (the socket locks it takes are the
    // application's).
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t elapsed_ms = (now.tv_sec - last.tv_sec) * 1000 + (now.tv_nsec - last.tv_nsec) / 1'000'000;
    if (elapsed_ms < core::kMinPublishGapMs) {
      timespec pause{0, (core::kMinPublishGapMs - elapsed_ms) * 1'000'000L};
      nanosleep(&pause, nullptr);
    }
    publish(base, ++count);
    clock_gettime(CLOCK_MONOTONIC, &last);
  }
}

void start_thread() {
  // The thread takes no signal: the application's handlers run on its own
  // threads, as without the library.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  try {
    std::thread(run_publisher).detach();
  } catch (...) {
    VSOCK_LOG(kInfo, "no stats segment for vsock-stat: cannot start its thread");
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

void lock_for_fork() {
  // A fork while another thread runs the configuration's one-time
  // initialisation would leave the child waiting for it forever (its
  // guard is taken); waiting here, before the fork, avoids that.
  core::config();
  g_segment_lock.lock();
}
void unlock_in_parent() { g_segment_lock.unlock(); }
// The child has the parent's mapping (shared: a write would land in the
// parent's segment) and no publisher thread: forget both.
void reset_in_child() {
  if (g_base != nullptr) ::munmap(g_base, g_size);
  g_base = nullptr;
  g_size = 0;
  g_owner_pid = 0;
  g_path[0] = '\0';
  g_started.store(0, std::memory_order_relaxed);
  g_forked_at_ms.store(monotonic_ms(), std::memory_order_relaxed);
  g_segment_lock.unlock();
}
__attribute__((constructor)) void install_fork_handlers() {
  pthread_atfork(lock_for_fork, unlock_in_parent, reset_in_child);
}
// Also here, not only in the library's destructor: a program linked with
// the library (the unit tests) removes its segment at exit too.
__attribute__((destructor)) void remove_at_exit() { stats_publisher_remove(); }

}  // namespace

void stats_publisher_start() {
  if (g_started.load(std::memory_order_relaxed) != 0) return;
  // A fork child starts its thread only at a socket made a while after
  // the fork: one that execs or ends soon starts none.
  const int64_t forked_at = g_forked_at_ms.load(std::memory_order_relaxed);
  if (forked_at != 0 && monotonic_ms() - forked_at < core::kCreateDelayMs) return;
  if (g_started.exchange(1, std::memory_order_acq_rel) != 0) return;
  if (!core::config().settings.stats_shm) return;
  start_thread();
}

void stats_publisher_remove() {
  std::lock_guard<std::mutex> held(g_segment_lock);
  g_exiting = true;
  if (g_path[0] != '\0' && g_owner_pid == current_pid()) ::unlink(g_path);
  g_path[0] = '\0';
}

}  // namespace vsock::sock
