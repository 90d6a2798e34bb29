// rdma_stream_kill: the peer process is killed (SIGKILL) mid-connection;
// the survivor must see an error (or end of stream) within a bounded time,
// never hang. Nothing tells the survivor: the dead peer's queue pair is
// destroyed by the kernel and simply stops acknowledging, so the survivor
// learns it only from its own requests failing (transport retries
// exhausted). Three situations:
//
//   streaming     both sides are streaming at full speed when the peer dies
//   idle_reader   the survivor has read everything and waits for more, with
//                 nothing of its own in flight: only wait_until()'s
//                 liveness probe can find out
//   full_writer   the survivor filled the peer's ring and waits for credit
//                 (all its writes long acknowledged): the probe again
//
// Prints the time from kill() to the survivor's error for each; fails if
// any exceeds kDetectLimitS.
//
// Usage: rdma_stream_kill
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "sock/stream/stream_wait.hpp"
#include "stream_support.hpp"

namespace vsock::test {
namespace {

constexpr const char* kProgram = "rdma_stream_kill";
constexpr int kSyncTimeoutMs = 20000;
constexpr double kDetectLimitS = 30.0;
constexpr double kChildLifetimeS = 60.0;  // a child nobody kills still ends
constexpr size_t kChunk = 64 << 10;

sock::StreamConfig kill_config() {
  sock::StreamConfig config;
  config.ring_size = 256 << 10;
  config.sq_depth = 64;
  config.rq_depth = 64;
  return config;
}

// The victim's side of "streaming": write and read as fast as it can.
int child_stream(sock::StreamChannel& ch, int fd) {
  std::vector<uint8_t> out(kChunk), in(kChunk);
  fill_stream(out.data(), out.size(), 1, 0);
  if (!send_all(fd, "s", 1, kSyncTimeoutMs)) return 1;
  Deadline deadline(kChildLifetimeS);
  while (!deadline.expired()) {
    bool moved = false;
    if (ch.write(out.data(), out.size())) moved = true;
    if (core::Result<size_t> n = ch.read(in.data(), in.size()); n && n.value() > 0) moved = true;
    if (ch.error() != 0) return 1;
    auto ready = [](const sock::StreamChannel& c) { return c.readable() || c.writable(); };
    if (!moved) sock::wait_until(ch, ready, 100, spin_us());
  }
  return 0;
}

// The victim's side of "idle_reader": write a little, then just live.
int child_write_then_idle(sock::StreamChannel& ch, int fd) {
  std::vector<uint8_t> out(100 << 10);
  fill_stream(out.data(), out.size(), 2, 0);
  Deadline deadline(kChildLifetimeS);
  if (!write_all(ch, out.data(), out.size(), deadline)) return 1;
  if (!send_all(fd, "s", 1, kSyncTimeoutMs)) return 1;
  while (!deadline.expired()) sock::wait_until(ch, sock::is_readable, 100, 0);  // keeps polling, reads nothing
  return 0;
}

// The victim's side of "full_writer": never read.
int child_never_read(sock::StreamChannel& ch, int fd) {
  if (!send_all(fd, "s", 1, kSyncTimeoutMs)) return 1;
  Deadline deadline(kChildLifetimeS);
  auto never = [](const sock::StreamChannel&) { return false; };
  while (!deadline.expired()) sock::wait_until(ch, never, 100, 0);
  return 0;
}

// Survivor halves: each returns once the channel has failed (or EOF), or
// the limit passed; *killed_at is set when the child is killed.
using KillFn = void (*)(pid_t child, double* killed_at);

void kill_now(pid_t child, double* killed_at) {
  *killed_at = now_seconds();
  kill(child, SIGKILL);
}

int survive_streaming(sock::StreamChannel& ch, pid_t child, double* killed_at) {
  std::vector<uint8_t> out(kChunk), in(kChunk);
  fill_stream(out.data(), out.size(), 3, 0);
  uint64_t received = 0;
  Deadline deadline(kDetectLimitS + 30);
  while (!deadline.expired()) {
    bool moved = false;
    core::Result<size_t> w = ch.write(out.data(), out.size());
    if (w) moved = true;
    core::Result<size_t> r = ch.read(in.data(), in.size());
    if (r && r.value() == 0) return 0;  // end of stream also counts
    if (r) {
      received += r.value();
      moved = true;
    }
    if (ch.error() != 0) return 0;
    if (*killed_at == 0 && received >= (2 << 20)) kill_now(child, killed_at);  // mid-stream, both directions busy
    auto ready = [](const sock::StreamChannel& c) { return c.readable() || c.writable(); };
    if (!moved) sock::wait_until(ch, ready, deadline.remaining_ms(1000), spin_us());
  }
  return 1;
}

int survive_idle_reader(sock::StreamChannel& ch, pid_t child, double* killed_at) {
  std::vector<uint8_t> in(100 << 10);
  Deadline deadline(kDetectLimitS + 30);
  if (!read_exact(ch, in.data(), in.size(), deadline)) return 1;
  if (check_stream(in.data(), in.size(), 2, 0) != in.size()) return 1;
  kill_now(child, killed_at);
  while (!deadline.expired() && ch.error() == 0) {
    sock::wait_until(ch, sock::is_readable, deadline.remaining_ms(1000), spin_us());
    uint8_t byte;
    core::Result<size_t> r = ch.read(&byte, 1);
    if (r && r.value() == 0) return 0;
    if (r) return 1;  // no data was ever coming
  }
  return ch.error() != 0 ? 0 : 1;
}

int survive_full_writer(sock::StreamChannel& ch, pid_t child, double* killed_at) {
  std::vector<uint8_t> out(kChunk);
  fill_stream(out.data(), out.size(), 4, 0);
  Deadline deadline(kDetectLimitS + 30);
  uint64_t written = 0;
  for (int i = 0; i < 1000; ++i) {
    core::Result<size_t> w = ch.write(out.data(), out.size());
    if (!w) break;
    written += w.value();
  }
  if (written != ch.peer_ring_capacity()) return 1;
  // Let every write be acknowledged, so nothing of ours is in flight.
  usleep(300000);
  ch.progress();
  kill_now(child, killed_at);
  while (!deadline.expired() && ch.error() == 0)
    sock::wait_until(ch, sock::is_writable, deadline.remaining_ms(1000), spin_us());
  core::Result<size_t> w = ch.write(out.data(), out.size());
  return !w && w.error() == ECONNRESET ? 0 : 1;
}

struct Scenario {
  const char* name;
  int (*child)(sock::StreamChannel&, int);
  int (*survivor)(sock::StreamChannel&, pid_t, double*);
};

int run_scenario(const rdma::Device& device, const Scenario& s, double* detect_s) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return 1;
  fflush(stdout);
  fflush(stderr);
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    close(fds[0]);
    int rc = 1;
    {
      // A verbs context does not survive fork(): the child opens its own.
      int exit_code = 0;
      core::Result<rdma::Device> own = open_test_device(kProgram, &exit_code);
      if (!own) _exit(exit_code);
      auto made = connect_stream(fds[1], own.value(), kill_config(), kProgram);
      if (made) rc = s.child(made.value(), fds[1]);
    }
    _exit(rc);
  }
  close(fds[1]);
  int rc = 1;
  double killed_at = 0, noticed_at = 0;
  {
    auto made = connect_stream(fds[0], device, kill_config(), kProgram);
    char ready = 0;
    if (made && recv_all(fds[0], &ready, 1, kSyncTimeoutMs)) {
      sock::StreamChannel& ch = made.value();
      rc = s.survivor(ch, child, &killed_at);
      noticed_at = now_seconds();
      if (rc == 0 && killed_at != 0) {
        *detect_s = noticed_at - killed_at;
        printf("%s: %-12s peer killed; survivor saw %s after %.3f s (%s)\n", kProgram, s.name,
               ch.error() != 0 ? strerror(ch.error()) : "end of stream", *detect_s,
               ch.error() != 0 ? ch.failure() : "FIN");
        print_counters(kProgram, s.name, ch);
        if (*detect_s > kDetectLimitS) {
          fprintf(stderr, "%s: %s: detection took longer than %.0f s\n", kProgram, s.name, kDetectLimitS);
          rc = 1;
        }
      } else {
        fprintf(stderr, "%s: %s: survivor failed (error %d: %s; killed %s, %.1f s ago)\n", kProgram, s.name,
                ch.error(), ch.failure(), killed_at != 0 ? "yes" : "no", killed_at != 0 ? noticed_at - killed_at : 0.0);
        print_counters(kProgram, s.name, ch);
        fprintf(stderr, "%s: SQ outstanding %u (signalled %u), peer in flight %llu, readable %zu\n", kProgram,
                ch.send_queue().outstanding(), ch.send_queue().signaled_outstanding(),
                (unsigned long long)ch.peer_in_flight(), ch.readable_bytes());
        rc = 1;
      }
    }
  }
  close(fds[0]);
  if (killed_at == 0) kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);  // killed: returns at once
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
    fprintf(stderr, "%s: %s: the child was not killed as planned (status %d)\n", kProgram, s.name, status);
    rc = 1;
  }
  return rc;
}

}  // namespace
}  // namespace vsock::test

int main() {
  using namespace vsock::test;
  setvbuf(stdout, nullptr, _IOLBF, 0);
  int exit_code = 0;
  vsock::core::Result<vsock::rdma::Device> device = open_test_device(kProgram, &exit_code);
  if (!device) return exit_code;
  const Scenario scenarios[] = {{"streaming", child_stream, survive_streaming},
                                {"idle_reader", child_write_then_idle, survive_idle_reader},
                                {"full_writer", child_never_read, survive_full_writer}};
  for (const Scenario& s : scenarios) {
    double detect = 0;
    if (run_scenario(device.value(), s, &detect) != 0) return 1;
  }
  printf("%s: OK (liveness probe after %d ms idle; transport retries 6 x 268 ms ACK timeout)\n", kProgram,
         vsock::sock::StreamChannel::kProbeIdleMs);
  return 0;
}
