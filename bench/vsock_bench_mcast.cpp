#include "vsock_bench_mcast.hpp"

#include "round_trips.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kReplyTimeoutMs = 1000;
constexpr int kMaxReceivers = 16;

std::atomic<bool> g_stop{false};

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "vsock_bench: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

using bench::now_seconds;

in_addr parse_ipv4(const std::string& text, const char* what) {
  in_addr a{};
  if (inet_pton(AF_INET, text.c_str(), &a) != 1) {
    std::fprintf(stderr, "vsock_bench: bad %s %s\n", what, text.c_str());
    std::exit(2);
  }
  return a;
}

// A free UDP port (bound and released at once: the receivers then share it).
int free_port() {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) fail("socket");
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) fail("bind");
  socklen_t len = sizeof sa;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) fail("getsockname");
  close(fd);
  return ntohs(sa.sin_port);
}

// One receiver: joined, it writes a byte to `ready`, then echoes until stopped.
void serve_group(const McastArgs& args, int port, int ready) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) fail("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in me{};
  me.sin_family = AF_INET;
  me.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof me) != 0) fail("bind (port taken?)");
  ip_mreq join{};
  join.imr_multiaddr = parse_ipv4(args.group, "group");
  join.imr_interface = parse_ipv4(args.interface_addr, "address");
  if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &join, sizeof join) != 0) fail("IP_ADD_MEMBERSHIP");
  char byte = 1;
  if (write(ready, &byte, 1) != 1) fail("write ready");
  close(ready);
  static char buffer[65536];
  pollfd pfd{fd, POLLIN, 0};
  while (!g_stop.load()) {
    if (poll(&pfd, 1, 200) <= 0) continue;
    sockaddr_in peer{};
    socklen_t peer_len = sizeof peer;
    ssize_t n = recvfrom(fd, buffer, sizeof buffer, 0, reinterpret_cast<sockaddr*>(&peer), &peer_len);
    if (n >= 0) sendto(fd, buffer, static_cast<size_t>(n), 0, reinterpret_cast<sockaddr*>(&peer), peer_len);
  }
  close(fd);
}

}  // namespace

int run_mcast_echo(const McastArgs& args) {
  if (args.receivers < 1 || args.receivers > kMaxReceivers) {
    std::fprintf(stderr, "vsock_bench: --receivers must be 1..%d\n", kMaxReceivers);
    return 2;
  }
  struct sigaction sa{};
  sa.sa_handler = [](int) { g_stop.store(true); };
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  const int port = args.port != 0 ? args.port : free_port();
  int ready[2];
  if (pipe(ready) != 0) fail("pipe");
  // Every receiver is a child; this process only reports and stops them.
  pid_t receivers[kMaxReceivers] = {};
  for (int i = 0; i < args.receivers; ++i) {
    receivers[i] = fork();
    if (receivers[i] < 0) fail("fork");
    if (receivers[i] == 0) {
      close(ready[0]);
      serve_group(args, port, ready[1]);
      std::exit(0);  // not _exit: a preloaded library's exit handlers run (VSOCK_STATS)
    }
  }
  close(ready[1]);
  int joined = 0;
  char byte;
  while (joined < args.receivers) {  // each writes once; EOF when all are gone
    ssize_t n = read(ready[0], &byte, 1);
    if (n == 1) ++joined;
    else if (n == 0 || errno != EINTR || g_stop.load()) break;
  }
  close(ready[0]);
  if (joined == args.receivers) {
    std::printf("READY %d\n", port);
    std::fflush(stdout);
    while (!g_stop.load()) pause();
  } else {
    std::fprintf(stderr, "vsock_bench: only %d of %d receivers joined\n", joined, args.receivers);
  }
  for (int i = 0; i < args.receivers; ++i) kill(receivers[i], SIGTERM);
  for (int i = 0; i < args.receivers; ++i) waitpid(receivers[i], nullptr, 0);
  return joined == args.receivers ? 0 : 1;
}

bool run_mcast_latency(const McastArgs& args, std::vector<double>* samples, long* lost) {
  if (args.size < sizeof(uint64_t) || args.size > 65507) {
    std::fprintf(stderr, "vsock_bench: mcast-lat needs --size 8..65507\n");
    return false;
  }
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) fail("socket");
  in_addr interface = parse_ipv4(args.interface_addr, "address");
  if (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &interface, sizeof interface) != 0) fail("IP_MULTICAST_IF");
  sockaddr_in group{};
  group.sin_family = AF_INET;
  group.sin_port = htons(static_cast<uint16_t>(args.port));
  group.sin_addr = parse_ipv4(args.group, "group");
  std::vector<char> out(args.size), in(args.size);
  pollfd pfd{fd, POLLIN, 0};
  // Sends `seq` and waits for every receiver's answer to it; false when
  // one is missing after kReplyTimeoutMs.
  auto round_trip = [&](uint64_t seq) {
    std::memcpy(out.data(), &seq, sizeof seq);
    if (sendto(fd, out.data(), out.size(), 0, reinterpret_cast<sockaddr*>(&group), sizeof group) !=
        static_cast<ssize_t>(out.size()))
      fail("sendto group");
    int answers = 0;
    const double give_up = now_seconds() + kReplyTimeoutMs / 1000.0;
    while (answers < args.receivers) {
      int left_ms = static_cast<int>((give_up - now_seconds()) * 1000);
      if (left_ms <= 0) return false;
      int ready = poll(&pfd, 1, left_ms);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) return false;
      ssize_t n = recv(fd, in.data(), in.size(), 0);
      if (n < 0) fail("recv");
      uint64_t got;
      std::memcpy(&got, in.data(), sizeof got);
      if (static_cast<size_t>(n) == args.size && got == seq) ++answers;  // late answers to earlier ones skipped
    }
    return true;
  };
  // One datagram, then 200 ms: the first send joins the group for sending
  // and the receivers learn the way back (their first answers may go
  // through the kernel meanwhile), so the measured ones take the path they
  // measure.
  round_trip(~uint64_t{0} - 1);
  usleep(200000);
  if (!bench::measure_round_trips(args.warmup, args.iters, args.seconds, round_trip, samples, lost)) {
    std::fprintf(stderr, "vsock_bench: more than 100 datagrams not answered by all %d receivers\n", args.receivers);
    return false;
  }
  close(fd);
  return true;
}
