// vsock_process_cost: what a process pays for the library when it does
// little or nothing with the network (issue 10 item 5), run the same way
// with and without libvsock preloaded (bench/process_cost.sh).
//
//   vsock_process_cost server [--addr A]
//       Listens on A (default 127.0.0.1), port chosen by the kernel; prints
//       "READY <port>"; serves one connection at a time: echoes what it
//       reads until the peer closes. Ends at SIGTERM/SIGINT or after 1 h.
//   vsock_process_cost socket
//       One TCP and one UDP socket made and closed, nothing else (a program
//       that probes for IPv4, or makes a socket it never uses).
//   vsock_process_cost connect --port P [--addr A] [--conns N]
//       N times (default 1): socket, connect, 1 byte out, its echo back,
//       close. Prints "result first_us=... rest_p50_us=... conns=N": the
//       first connection's time from socket() to close() and the median of
//       the others' (against a peer without libvsock the others are the
//       ones that find it in the failure cache).
//   vsock_process_cost fork --port P [--addr A] [--pass]
//       One connection (1 byte out and back: under libvsock, both ends
//       preloaded, it is upgraded), then fork(): the child, with --pass,
//       sends the connection to the parent over a unix socket
//       (SCM_RIGHTS), and exit(0)s; the parent takes it back, waits for the
//       child and sends one more byte over the connection it received (or
//       its own). Prints "child <pid>" and "result child_us=...": fork() to
//       waitpid().
//
// Bounded: connect, read and write have 5 s timeouts; alarm(60) ends a
// client, alarm(3600) the server.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const char* g_addr = "127.0.0.1";
int g_port = 0;
int g_conns = 1;
bool g_pass = false;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "vsock_process_cost: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

long long now_us() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

void set_timeouts(int fd) {
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

sockaddr_in address(int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, g_addr, &sa.sin_addr) != 1) {
    std::fprintf(stderr, "vsock_process_cost: bad address %s\n", g_addr);
    std::exit(2);
  }
  return sa;
}

void echo_one(int fd) {
  char byte = 'x';
  if (write(fd, &byte, 1) != 1) die("write");
  if (read(fd, &byte, 1) != 1) die("read");
}

int open_connection() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die("socket");
  set_timeouts(fd);
  sockaddr_in sa = address(g_port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) die("connect");
  echo_one(fd);
  return fd;
}

int run_server() {
  alarm(3600);
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) die("socket");
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa = address(0);
  if (bind(listener, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) die("bind");
  if (listen(listener, 64) != 0) die("listen");
  socklen_t len = sizeof sa;
  getsockname(listener, reinterpret_cast<sockaddr*>(&sa), &len);
  std::printf("READY %d\n", ntohs(sa.sin_port));
  std::fflush(stdout);
  for (;;) {
    int fd = accept(listener, nullptr, nullptr);
    if (fd < 0) {
      if (errno == EINTR) continue;
      die("accept");
    }
    set_timeouts(fd);
    char buffer[256];
    for (;;) {
      ssize_t n = read(fd, buffer, sizeof buffer);
      if (n <= 0) break;
      if (write(fd, buffer, static_cast<size_t>(n)) != n) break;
    }
    close(fd);
  }
}

int run_socket() {
  int tcp = socket(AF_INET, SOCK_STREAM, 0);
  int udp = socket(AF_INET, SOCK_DGRAM, 0);
  if (tcp < 0 || udp < 0) die("socket");
  close(tcp);
  close(udp);
  std::printf("result sockets=2\n");
  return 0;
}

int run_connect() {
  std::vector<long long> times;
  for (int i = 0; i < g_conns; i++) {
    long long start = now_us();
    close(open_connection());
    times.push_back(now_us() - start);
  }
  long long first = times.front();
  std::vector<long long> rest(times.begin() + 1, times.end());
  std::sort(rest.begin(), rest.end());
  std::printf("result first_us=%lld rest_p50_us=%lld conns=%d\n", first, rest.empty() ? 0 : rest[rest.size() / 2],
              g_conns);
  return 0;
}

void send_fd(int over, int fd) {
  char byte = 'f';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), &fd, sizeof fd);
  if (sendmsg(over, &msg, 0) != 1) die("sendmsg");
}

int receive_fd(int over) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  if (recvmsg(over, &msg, 0) != 1) die("recvmsg");
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  if (cmsg == nullptr || cmsg->cmsg_type != SCM_RIGHTS) {
    std::fprintf(stderr, "vsock_process_cost: no fd received\n");
    std::exit(1);
  }
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(cmsg), sizeof fd);
  return fd;
}

int run_fork() {
  int fd = open_connection();
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) die("socketpair");
  std::fflush(stdout);
  long long start = now_us();
  pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    close(pair[0]);
    if (g_pass) send_fd(pair[1], fd);
    std::exit(0);
  }
  close(pair[1]);
  int used = fd;
  if (g_pass) used = receive_fd(pair[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  long long child_us = now_us() - start;
  echo_one(used);
  if (used != fd) close(used);
  close(fd);
  close(pair[0]);
  std::printf("child %d\nresult child_us=%lld status=%d\n", static_cast<int>(pid), child_us, status);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: vsock_process_cost server|socket|connect|fork [--addr A] [--port P] [--conns N] [--pass]\n");
    return 2;
  }
  std::string mode = argv[1];
  for (int i = 2; i < argc; i++) {
    std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "vsock_process_cost: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--addr") g_addr = value();
    else if (arg == "--port") g_port = std::atoi(value());
    else if (arg == "--conns") g_conns = std::max(1, std::atoi(value()));
    else if (arg == "--pass") g_pass = true;
    else {
      std::fprintf(stderr, "vsock_process_cost: unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  if (mode == "server") return run_server();
  alarm(60);
  if (mode == "socket") return run_socket();
  if (mode == "connect") return run_connect();
  if (mode == "fork") return run_fork();
  std::fprintf(stderr, "vsock_process_cost: unknown mode %s\n", mode.c_str());
  return 2;
}
