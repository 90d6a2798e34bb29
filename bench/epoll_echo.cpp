#include "epoll_echo.hpp"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace bench {
namespace {

constexpr int kIoTimeoutS = 5;
constexpr size_t kOpenMessage = 64;

volatile sig_atomic_t g_stop = 0;

}  // namespace

void die(const char* program, const char* what) {
  std::fprintf(stderr, "%s: %s: %s\n", program, what, std::strerror(errno));
  std::exit(1);
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

sockaddr_in ipv4_address(const char* program, const std::string& addr, int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) die(program, "bad IPv4 address");
  return sa;
}

void pin_to_cpu(const char* program, int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) die(program, "sched_setaffinity");
}

void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

int run_epoll_echo_server(const char* program, const std::string& addr, int port, int cpu) {
  pin_to_cpu(program, cpu);
  raise_fd_limit();
  struct sigaction sa{};
  sa.sa_handler = [](int) { g_stop = 1; };
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (listener < 0) die(program, "socket");
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in me = ipv4_address(program, addr, port);
  if (bind(listener, reinterpret_cast<sockaddr*>(&me), sizeof me) != 0) die(program, "bind");
  if (listen(listener, 4096) != 0) die(program, "listen");
  socklen_t len = sizeof me;
  if (getsockname(listener, reinterpret_cast<sockaddr*>(&me), &len) != 0) die(program, "getsockname");
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) die(program, "epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev) != 0) die(program, "epoll_ctl");
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
          std::fprintf(stderr, "%s server: short echo on fd %d\n", program, fd);
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
        close(fd);
      }
    }
  }
  return 0;
}

bool echo_once(int fd, size_t size) {
  char out[4096], in[4096];
  if (size > sizeof out) return false;
  std::memset(out, 'f', size);
  if (write(fd, out, size) != static_cast<ssize_t>(size)) return false;
  size_t have = 0;
  while (have < size) {
    ssize_t n = read(fd, in + have, size - have);
    if (n <= 0 && !(n < 0 && errno == EINTR)) return false;
    if (n > 0) have += static_cast<size_t>(n);
  }
  return std::memcmp(in, out, size) == 0;
}

int open_echo_connection(const sockaddr_in& to) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{kIoTimeoutS, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0 || !echo_once(fd, kOpenMessage)) {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace bench
