// vsock_idle_epoll: an epoll server's round trip with many idle connections
// beside the active ones (issue 12 item 6: waits that cost O(ready), not
// O(registered)), run the same way with and without libvsock preloaded
// (bench/idle_epoll.sh).
//
//   vsock_idle_epoll server [--addr A] [--port P] [--cpu N]
//       One thread, one epoll set holding every connection, echoes
//       (bench::run_epoll_echo_server); prints "READY <port>", serves until
//       SIGTERM/SIGINT.
//   vsock_idle_epoll client --port P [--addr A] [--idle N] [--active K] [--rounds R] [--warmup W]
//                           [--size B] [--cpu N] [--seconds S] [--hold S] [--check-every M]
//       Opens N idle connections, then K active ones, one after the other,
//       each with one 64 B request and its echo (under libvsock: upgraded,
//       so the server's epoll set holds N + K RDMA connections). --hold:
//       then S seconds with every connection idle (tests/upgrade's
//       quiet-side-band test looks at the library's threads meanwhile). Then W
//       warm-up and R measured round trips of B bytes (blocking write, then
//       read until the echo is whole, checked byte for byte), taking the
//       active connections in turn; the idle ones see nothing. Last, one
//       echo on every M-th idle connection (default 50; 1: every one, as
//       the quiet-entries test does): still there? Prints one line
//       "result idle=N active=K ... p50_us= p99_us= p999_us=".
//
// Bounded: every read/write has a 5 s timeout (SO_RCVTIMEO/SO_SNDTIMEO), the
// opening stops after half of --seconds, the measured phase after --seconds,
// and alarm(2 × --seconds) ends the client.
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "epoll_echo.hpp"

namespace {

constexpr const char* kProgram = "vsock_idle_epoll";

struct Options {
  std::string mode, addr = "127.0.0.1";
  int port = 0, idle = 0, active = 10, cpu = -1;
  long rounds = 5000, warmup = 500;
  size_t size = 64;
  double seconds = 120, hold = 0;
  int check_every = 50;
};

int run_client(const Options& o) {
  bench::pin_to_cpu(kProgram, o.cpu);
  bench::raise_fd_limit();
  alarm(static_cast<unsigned>(2 * o.seconds) + 1);
  const sockaddr_in to = bench::ipv4_address(kProgram, o.addr, o.port);
  const double start = bench::now_us();
  std::vector<int> idle, active;
  int failed_opens = 0;
  for (int i = 0; i < o.idle + o.active && failed_opens < 20; ++i) {
    if (bench::now_us() - start > o.seconds * 0.5e6) break;
    const int fd = bench::open_echo_connection(to);
    if (fd < 0) {
      if (++failed_opens == 1) std::fprintf(stderr, "%s: connection %d: %m\n", kProgram, i);
      continue;
    }
    (static_cast<int>(idle.size()) < o.idle ? idle : active).push_back(fd);
  }
  const double open_s = (bench::now_us() - start) / 1e6;
  if (static_cast<int>(active.size()) < o.active) {
    std::fprintf(stderr, "%s: %zu of %d idle and %zu of %d active connections opened\n", kProgram, idle.size(),
                 o.idle, active.size(), o.active);
    return 1;
  }

  if (o.hold > 0) {
    std::printf("HOLDING %.1f\n", o.hold);
    std::fflush(stdout);
    timespec hold{static_cast<time_t>(o.hold), static_cast<long>((o.hold - static_cast<double>(static_cast<time_t>(o.hold))) * 1e9)};
    while (nanosleep(&hold, &hold) != 0 && errno == EINTR) {
    }
  }

  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(o.rounds));
  long wrong = 0;
  double measure_start = 0;
  for (long r = 0; r < o.warmup + o.rounds; ++r) {
    if (r == o.warmup) measure_start = bench::now_us();
    if (r >= o.warmup && bench::now_us() - measure_start > o.seconds * 1e6) break;
    const int fd = active[static_cast<size_t>(r) % active.size()];
    const double t0 = bench::now_us();
    if (!bench::echo_once(fd, o.size)) {
      if (++wrong > 10) break;
      continue;
    }
    if (r >= o.warmup) samples.push_back(bench::now_us() - t0);
  }

  int idle_checked = 0, idle_alive = 0;
  for (size_t i = 0; i < idle.size(); i += static_cast<size_t>(o.check_every)) {
    ++idle_checked;
    if (bench::echo_once(idle[i], 64)) ++idle_alive;
  }
  double sum = 0;
  for (double s : samples) sum += s;
  std::printf(
      "result idle=%zu active=%zu size=%zu open_s=%.1f failed_opens=%d rounds=%zu wrong=%ld p50_us=%.1f p99_us=%.1f"
      " p999_us=%.1f mean_us=%.1f idle_checked=%d idle_alive=%d\n",
      idle.size(), active.size(), o.size, open_s, failed_opens, samples.size(), wrong,
      bench::percentile(samples, 0.5), bench::percentile(samples, 0.99), bench::percentile(samples, 0.999),
      samples.empty() ? -1 : sum / static_cast<double>(samples.size()), idle_checked, idle_alive);
  std::fflush(stdout);
  for (int fd : idle) close(fd);
  for (int fd : active) close(fd);
  return wrong == 0 && !samples.empty() ? 0 : 1;
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: vsock_idle_epoll server [--addr A] [--port P] [--cpu N]\n"
               "       vsock_idle_epoll client --port P [--addr A] [--idle N] [--active K] [--rounds R] [--warmup W]\n"
               "                               [--size B] [--cpu N] [--seconds S] [--hold S] [--check-every M]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc % 2 != 0) usage();
  Options o;
  o.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const char* value = argv[i + 1];
    if (key == "--addr") o.addr = value;
    else if (key == "--port") o.port = std::atoi(value);
    else if (key == "--idle") o.idle = std::atoi(value);
    else if (key == "--active") o.active = std::atoi(value);
    else if (key == "--rounds") o.rounds = std::atol(value);
    else if (key == "--warmup") o.warmup = std::atol(value);
    else if (key == "--size") o.size = static_cast<size_t>(std::atol(value));
    else if (key == "--cpu") o.cpu = std::atoi(value);
    else if (key == "--seconds") o.seconds = std::atof(value);
    else if (key == "--hold") o.hold = std::atof(value);
    else if (key == "--check-every") o.check_every = std::atoi(value);
    else usage();
  }
  if (o.idle < 0 || o.active < 1 || o.rounds < 1 || o.warmup < 0 || o.size < 1 || o.size > 4096 || o.seconds <= 0 ||
      o.hold < 0 || o.hold > o.seconds || o.check_every < 1)
    usage();
  if (o.mode == "server") return bench::run_epoll_echo_server(kProgram, o.addr, o.port, o.cpu);
  if (o.mode == "client" && o.port > 0) return run_client(o);
  usage();
}
