// vsock_fork_cost: what a fork() costs a process that holds many open TCP
// connections (issue 13 item 4), and how many connections a process can hold
// and what runs out first (issue 13 item 5), run the same way with and
// without libvsock preloaded (bench/fork_cost.sh, bench/connection_limits.sh,
// tests/upgrade/run_memory_budget.sh).
//
//   vsock_fork_cost server [--addr A] [--port P] [--cpu N]
//       One thread, epoll, echoes whatever each connection sends, holds as
//       many connections as its fd limit allows; prints "READY <port>",
//       serves until SIGTERM/SIGINT.
//   vsock_fork_cost client --port P [--addr A] [--conns N] [--forks R] [--cpu N] [--seconds S]
//                          [--open-seconds S] [--min-avail-mib M] [--peer-pid PID]
//       Opens N connections one after the other, each: connect, one 64 B
//       request, its echo (so that under libvsock it is upgraded); keeps
//       them all open; reads VmRSS / VmPin / VmLck from /proc/self/status
//       and counts its mappings (/proc/self/maps);
//       then R times the bare fork system call (SYS_clone, past glibc and
//       any preloaded fork(): the kernel's share), then R times fork(): the
//       child _exit(0)s at once, the parent notes when the call returned
//       and when waitpid() reaped the child.
//       Then one more request/echo on every connection (do they still
//       work?). Prints one line "result key=value ...": fork_us / reap_us
//       are from just before fork() to its return / to waitpid()'s; first,
//       p50 and max over the R forks. --forks 0: no fork at all.
//       The limits (issue 13 item 5): the opening stops at the first of N
//       connections, --open-seconds (default half of --seconds), 20 failed
//       opens in a row, or the guest's MemAvailable below --min-avail-mib
//       (before the OOM killer picks the client or the server); "stop="
//       says which. Also printed: the first failed open (index, errno), the
//       client's fds, its VmRSS before the first connection, and the
//       VmRSS / fds of --peer-pid (the server) while all are open. Under
//       libvsock (vsock_stats_snapshot found with dlsym) the client looks at
//       its counters after each connection: first_fallback_at is how many
//       connections it had opened before the first whose opening moved a
//       fallback_* counter, first_fallback names the counters that moved.
//
// Bounded: connect and every read/write have 5 s timeouts, the opening
// phase stops at --open-seconds, the check after the forks at 3/4 of
// --seconds, and alarm(--seconds) ends the client.
#include <dirent.h>
#include <dlfcn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "epoll_echo.hpp"
#include "vsock/vsock.h"

namespace {

constexpr size_t kMessage = 64;

struct Options {
  std::string mode, addr = "127.0.0.1";
  int port = 0, conns = 1000, forks = 20, cpu = -1, peer_pid = 0;
  double seconds = 600, open_seconds = 0;  // 0: half of seconds
  long min_avail_mib = 0;                   // 0: no memory check
};

constexpr const char* kProgram = "vsock_fork_cost";

[[noreturn]] void die(const char* what) { bench::die(kProgram, what); }
using bench::now_us;
using bench::percentile;

int open_connection(const Options& o) { return bench::open_echo_connection(bench::ipv4_address(kProgram, o.addr, o.port)); }
bool echo_once(int fd) { return bench::echo_once(fd, kMessage); }

// "Key:  1234 kB" of /proc/PID/status or /proc/meminfo -> 1234; -1 if absent.
long proc_kb(const std::string& file, const char* key) {
  std::ifstream in(file);
  std::string line;
  const size_t len = std::strlen(key);
  while (std::getline(in, line))
    if (line.compare(0, len, key) == 0 && line.size() > len && line[len] == ':') return std::atol(line.c_str() + len + 1);
  return -1;
}

// "VmRSS:  1234 kB" of /proc/self/status -> 1234; -1 if absent.
long status_kb(const char* key) { return proc_kb("/proc/self/status", key); }

// Lines of /proc/self/maps: the mappings fork() duplicates one by one.
long mapping_count() {
  std::ifstream in("/proc/self/maps");
  std::string line;
  long n = 0;
  while (std::getline(in, line)) ++n;
  return n;
}

// Entries of /proc/PID/fd ("self" for this process); -1 if unreadable.
long fd_count(const std::string& pid) {
  DIR* dir = opendir(("/proc/" + pid + "/fd").c_str());
  if (dir == nullptr) return -1;
  long n = 0;
  while (const dirent* e = readdir(dir))
    if (e->d_name[0] != '.') ++n;
  closedir(dir);
  return n;
}

// The library's counters, when it is preloaded (nullptr otherwise).
using SnapshotFn = size_t (*)(vsock_stats*, size_t);

struct FallbackCounter {
  const char* name;
  uint64_t vsock_stats::*field;
};
constexpr FallbackCounter kFallbacks[] = {
    {"fallback_declined", &vsock_stats::fallback_declined},
    {"fallback_cached_peer", &vsock_stats::fallback_cached_peer},
    {"fallback_rejected", &vsock_stats::fallback_rejected},
    {"fallback_no_listener", &vsock_stats::fallback_no_listener},
    {"fallback_unreachable", &vsock_stats::fallback_unreachable},
    {"fallback_timeout", &vsock_stats::fallback_timeout},
    {"fallback_local_error", &vsock_stats::fallback_local_error},
    {"fallback_peer_closed", &vsock_stats::fallback_peer_closed},
    {"fallback_transport_error", &vsock_stats::fallback_transport_error},
    {"fallback_refused", &vsock_stats::fallback_refused},
    {"fallback_no_request", &vsock_stats::fallback_no_request},
    {"fallback_no_resources", &vsock_stats::fallback_no_resources},
};

// The fallback_* counters that differ between two snapshots, "a+b"; "" if none.
std::string moved_fallbacks(const vsock_stats& before, const vsock_stats& after) {
  std::string out;
  for (const FallbackCounter& c : kFallbacks)
    if (after.*c.field != before.*c.field) out += (out.empty() ? "" : "+") + std::string(c.name);
  return out;
}

// forks times: fork() (raw: the bare system call, past glibc and any
// preloaded fork(): what the kernel alone costs), the child _exit(0)s at
// once; *fork_us gets the time to fork's return, *reap_us to waitpid()'s.
void time_forks(int forks, bool raw, std::vector<double>* fork_us, std::vector<double>* reap_us) {
  for (int r = 0; r < forks; ++r) {
    const double t0 = now_us();
    pid_t pid = raw ? static_cast<pid_t>(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0)) : fork();
    if (pid == 0) _exit(0);
    const double t1 = now_us();
    if (pid < 0) die("fork");
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    fork_us->push_back(t1 - t0);
    reap_us->push_back(now_us() - t0);
  }
}

int run_client(const Options& o) {
  bench::pin_to_cpu(kProgram, o.cpu);
  bench::raise_fd_limit();
  alarm(static_cast<unsigned>(o.seconds) + 1);
  const double open_bound_us = (o.open_seconds > 0 ? o.open_seconds : o.seconds * 0.5) * 1e6;
  auto snapshot = reinterpret_cast<SnapshotFn>(dlsym(RTLD_DEFAULT, "vsock_stats_snapshot"));
  vsock_stats last{}, now{};
  if (snapshot != nullptr) snapshot(&last, sizeof last);
  const long rss_base = status_kb("VmRSS");
  const double start = now_us();
  std::vector<int> fds;
  int failed = 0, failed_in_row = 0, first_error_at = -1, first_error = 0;
  long first_fallback_at = -1, avail_min_mib = -1;
  std::string first_fallback = "-", stop = "count";
  for (int i = 0; i < o.conns; ++i) {
    if (now_us() - start >= open_bound_us) {
      stop = "time";
      break;
    }
    if (o.min_avail_mib > 0 && i % 8 == 0) {  // /proc/meminfo is not free in the emulated guest
      const long avail = proc_kb("/proc/meminfo", "MemAvailable") / 1024;
      if (avail_min_mib < 0 || avail < avail_min_mib) avail_min_mib = avail;
      if (avail >= 0 && avail < o.min_avail_mib) {
        stop = "memory";
        break;
      }
    }
    int fd = open_connection(o);
    if (fd >= 0) {
      fds.push_back(fd);
      failed_in_row = 0;
    } else {
      if (++failed == 1) {
        first_error_at = i;
        first_error = errno;
        std::fprintf(stderr, "vsock_fork_cost: connection %d failed: %s\n", i, std::strerror(errno));
      }
      if (++failed_in_row == 20) {
        stop = "errors";
        break;
      }
    }
    if (snapshot != nullptr && first_fallback_at < 0) {
      snapshot(&now, sizeof now);
      const std::string moved = moved_fallbacks(last, now);
      if (!moved.empty()) {
        first_fallback_at = static_cast<long>(fds.size()) - (fd >= 0 ? 1 : 0);
        first_fallback = moved;
      }
      last = now;
    }
  }
  const double open_s = (now_us() - start) / 1e6;
  const long rss = status_kb("VmRSS"), pinned = status_kb("VmPin"), lck = status_kb("VmLck");
  const long maps = mapping_count(), my_fds = fd_count("self");
  const std::string peer = std::to_string(o.peer_pid);
  const long peer_rss = o.peer_pid > 0 ? proc_kb("/proc/" + peer + "/status", "VmRSS") : -1;
  const long peer_fds = o.peer_pid > 0 ? fd_count(peer) : -1;
  std::printf("limits opened=%zu open_s=%.2f stop=%s first_fallback_at=%ld first_fallback=%s first_error_at=%d"
              " first_error=%s rss_base_kb=%ld fds=%ld peer_rss_kb=%ld peer_fds=%ld mem_avail_min_mib=%ld\n",
              fds.size(), open_s, stop.c_str(), first_fallback_at, first_fallback.c_str(), first_error_at,
              first_error != 0 ? strerrorname_np(first_error) : "-", rss_base, my_fds, peer_rss, peer_fds,
              avail_min_mib);
  std::fflush(stdout);

  std::vector<double> raw_us, raw_reap_us, fork_us, reap_us;  // --forks 0: none
  time_forks(o.forks, true, &raw_us, &raw_reap_us);
  time_forks(o.forks, false, &fork_us, &reap_us);

  int alive = 0, checked = 0;
  for (int fd : fds) {
    if (now_us() - start > o.seconds * 0.75e6) break;
    ++checked;
    if (echo_once(fd)) ++alive;
  }
  std::printf(
      "result conns=%d opened=%zu open_failed=%d open_s=%.2f rss_kb=%ld pinned_kb=%ld lck_kb=%ld maps=%ld forks=%zu"
      " fork_first_us=%.0f fork_p50_us=%.0f fork_max_us=%.0f reap_first_us=%.0f reap_p50_us=%.0f reap_max_us=%.0f"
      " raw_fork_p50_us=%.0f raw_fork_max_us=%.0f raw_reap_p50_us=%.0f rss_after_kb=%ld maps_after=%ld"
      " checked_after=%d echo_after=%d\n",
      o.conns, fds.size(), failed, open_s, rss, pinned, lck, maps, fork_us.size(), fork_us.empty() ? -1 : fork_us[0],
      percentile(fork_us, 0.5), percentile(fork_us, 1.0), reap_us.empty() ? -1 : reap_us[0], percentile(reap_us, 0.5),
      percentile(reap_us, 1.0), percentile(raw_us, 0.5), percentile(raw_us, 1.0), percentile(raw_reap_us, 0.5),
      status_kb("VmRSS"), mapping_count(), checked, alive);
  std::fflush(stdout);
  for (int fd : fds) close(fd);
  return fds.empty() ? 1 : 0;
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: vsock_fork_cost server [--addr A] [--port P] [--cpu N]\n"
               "       vsock_fork_cost client --port P [--addr A] [--conns N] [--forks R] [--cpu N] [--seconds S]\n"
               "                              [--open-seconds S] [--min-avail-mib M] [--peer-pid PID]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) usage();
  Options o;
  o.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string key = argv[i], value = argv[i + 1];
    if (key == "--addr") o.addr = value;
    else if (key == "--port") o.port = std::atoi(value.c_str());
    else if (key == "--conns") o.conns = std::atoi(value.c_str());
    else if (key == "--forks") o.forks = std::atoi(value.c_str());
    else if (key == "--cpu") o.cpu = std::atoi(value.c_str());
    else if (key == "--seconds") o.seconds = std::atof(value.c_str());
    else if (key == "--open-seconds") o.open_seconds = std::atof(value.c_str());
    else if (key == "--min-avail-mib") o.min_avail_mib = std::atol(value.c_str());
    else if (key == "--peer-pid") o.peer_pid = std::atoi(value.c_str());
    else usage();
  }
  if (argc % 2 != 0 || o.conns < 1 || o.forks < 0 || o.seconds <= 0) usage();
  if (o.mode == "server") return bench::run_epoll_echo_server(kProgram, o.addr, o.port, o.cpu);
  if (o.mode == "client" && o.port > 0) return run_client(o);
  usage();
}
