// vsock_fork_cost: what a fork() costs a process that holds many open TCP
// connections (issue 13 item 4), run the same way with and without libvsock
// preloaded (bench/fork_cost.sh).
//
//   vsock_fork_cost server [--addr A] [--port P] [--cpu N]
//       One thread, epoll, echoes whatever each connection sends, holds as
//       many connections as its fd limit allows; prints "READY <port>",
//       serves until SIGTERM/SIGINT.
//   vsock_fork_cost client --port P [--addr A] [--conns N] [--forks R] [--cpu N] [--seconds S]
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
//       p50 and max over the R forks.
//
// Bounded: connect and every read/write have 5 s timeouts, the opening
// phase stops at half of --seconds, the check after the forks at 3/4 of it,
// and alarm(--seconds) ends the client.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

constexpr size_t kMessage = 64;
constexpr int kIoTimeoutS = 5;

struct Options {
  std::string mode, addr = "127.0.0.1";
  int port = 0, conns = 1000, forks = 20, cpu = -1;
  double seconds = 600;
};

volatile sig_atomic_t g_stop = 0;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "vsock_fork_cost: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

sockaddr_in make_address(const Options& o) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(o.port));
  if (inet_pton(AF_INET, o.addr.c_str(), &sa.sin_addr) != 1) die("bad IPv4 address");
  return sa;
}

void pin_to_cpu(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) die("sched_setaffinity");
}

void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

// ---- server ----

int run_server(const Options& o) {
  pin_to_cpu(o.cpu);
  raise_fd_limit();
  struct sigaction sa{};
  sa.sa_handler = [](int) { g_stop = 1; };
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (listener < 0) die("socket");
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in me = make_address(o);
  if (bind(listener, reinterpret_cast<sockaddr*>(&me), sizeof me) != 0) die("bind");
  if (listen(listener, 4096) != 0) die("listen");
  socklen_t len = sizeof me;
  if (getsockname(listener, reinterpret_cast<sockaddr*>(&me), &len) != 0) die("getsockname");
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) die("epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev) != 0) die("epoll_ctl");
  std::printf("READY %d\n", ntohs(me.sin_port));
  std::fflush(stdout);

  char buf[4096];
  epoll_event events[64];
  while (!g_stop) {
    int n = epoll_wait(ep, events, 64, 200);
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == listener) {
        for (int k = 0; k < 64; ++k) {  // bounded: the rest at the next wake-up
          int c = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK);
          if (c < 0) break;
          setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          epoll_event cev{};
          cev.events = EPOLLIN;
          cev.data.fd = c;
          if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev) != 0) close(c);
        }
        continue;
      }
      ssize_t got = read(fd, buf, sizeof buf);
      if (got > 0) {
        // Small messages: the socket buffer takes them; a short write drops the rest (the client then times out).
        if (write(fd, buf, static_cast<size_t>(got)) != got)
          std::fprintf(stderr, "vsock_fork_cost server: short echo on fd %d\n", fd);
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
        close(fd);
      }
    }
  }
  return 0;
}

// ---- client ----

// One 64 B request and its echo; false on error or timeout.
bool echo_once(int fd) {
  char out[kMessage], in[kMessage];
  std::memset(out, 'f', sizeof out);
  if (write(fd, out, sizeof out) != static_cast<ssize_t>(sizeof out)) return false;
  size_t have = 0;
  while (have < sizeof in) {
    ssize_t n = read(fd, in + have, sizeof in - have);
    if (n <= 0 && !(n < 0 && errno == EINTR)) return false;
    if (n > 0) have += static_cast<size_t>(n);
  }
  return std::memcmp(in, out, sizeof in) == 0;
}

int open_connection(const Options& o) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{kIoTimeoutS, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in sa = make_address(o);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || !echo_once(fd)) {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

// "VmRSS:  1234 kB" -> 1234; -1 if absent.
long status_kb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t len = std::strlen(key);
  while (std::getline(in, line))
    if (line.compare(0, len, key) == 0 && line.size() > len && line[len] == ':') return std::atol(line.c_str() + len + 1);
  return -1;
}

// Lines of /proc/self/maps: the mappings fork() duplicates one by one.
long mapping_count() {
  std::ifstream in("/proc/self/maps");
  std::string line;
  long n = 0;
  while (std::getline(in, line)) ++n;
  return n;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
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
  pin_to_cpu(o.cpu);
  raise_fd_limit();
  alarm(static_cast<unsigned>(o.seconds) + 1);
  const double start = now_us();
  std::vector<int> fds;
  int failed = 0;
  for (int i = 0; i < o.conns && now_us() - start < o.seconds * 0.5e6; ++i) {
    int fd = open_connection(o);
    if (fd >= 0) fds.push_back(fd);
    else if (++failed == 1) std::fprintf(stderr, "vsock_fork_cost: connection %d failed: %s\n", i, std::strerror(errno));
  }
  const double open_s = (now_us() - start) / 1e6;
  const long rss = status_kb("VmRSS"), pinned = status_kb("VmPin"), lck = status_kb("VmLck");
  const long maps = mapping_count();

  std::vector<double> raw_us, raw_reap_us, fork_us, reap_us;
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
               "       vsock_fork_cost client --port P [--addr A] [--conns N] [--forks R] [--cpu N] [--seconds S]\n");
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
    else usage();
  }
  if (argc % 2 != 0 || o.conns < 1 || o.forks < 1 || o.seconds <= 0) usage();
  if (o.mode == "server") return run_server(o);
  if (o.mode == "client" && o.port > 0) return run_client(o);
  usage();
}
