#include "test_support.hpp"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace vsock::test {

double now_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

int Deadline::remaining_ms(int cap) const {
  double left = (end_ - now_seconds()) * 1000.0;
  if (left <= 0) return 0;
  return left > cap ? cap : static_cast<int>(left);
}

double spin_budget_seconds() {
  static const double budget = [] {
    const char* text = getenv("VSOCK_TEST_SPIN_US");
    long us = text && *text ? atol(text) : 50;
    return (us < 0 || us > 10000000 ? 50 : us) * 1e-6;
  }();
  return budget;
}

namespace {

// Waits for `events` on fd until the deadline; false on timeout or error.
bool wait_fd(int fd, short events, const Deadline& deadline) {
  for (int attempt = 0; attempt < 100000; ++attempt) {
    int ms = deadline.remaining_ms(1000);
    if (ms == 0) return false;
    pollfd pfd{fd, events, 0};
    int n = poll(&pfd, 1, ms);
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
  return false;
}

}  // namespace

bool send_all(int fd, const void* data, size_t len, int timeout_ms) {
  Deadline deadline(timeout_ms / 1000.0);
  const auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    if (!wait_fd(fd, POLLOUT, deadline)) return false;
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool recv_all(int fd, void* data, size_t len, int timeout_ms) {
  Deadline deadline(timeout_ms / 1000.0);
  auto* p = static_cast<uint8_t*>(data);
  while (len > 0) {
    if (!wait_fd(fd, POLLIN, deadline)) return false;
    ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;  // 0: the peer is gone
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool barrier(int fd, int timeout_ms) {
  char token = 'b';
  return send_all(fd, &token, 1, timeout_ms) && recv_all(fd, &token, 1, timeout_ms) && token == 'b';
}

uint8_t pattern_byte(uint64_t seed, uint64_t position) {
  uint64_t x = (seed * 0x9E3779B97F4A7C15ull) ^ (position * 0xC2B2AE3D27D4EB4Full);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  return static_cast<uint8_t>(x >> 56);
}

void fill_pattern(uint8_t* data, size_t len, uint64_t seed, uint64_t position) {
  for (size_t i = 0; i < len; ++i) data[i] = pattern_byte(seed, position + i);
}

size_t find_mismatch(const uint8_t* data, size_t len, uint64_t seed, uint64_t position) {
  for (size_t i = 0; i < len; ++i)
    if (data[i] != pattern_byte(seed, position + i)) return i;
  return len;
}

core::Result<rdma::Device> open_test_device(const char* program, int* exit_code) {
  const char* name = getenv("VSOCK_DEVICE");
  core::Result<rdma::Device> device = rdma::Device::open(name ? name : "");
  if (!device) {
    const char* require = getenv("VSOCK_REQUIRE_DEVICE");
    const char* in_vm = getenv("RXE_VM");
    bool required = (require && strcmp(require, "1") == 0) || (in_vm && strcmp(in_vm, "1") == 0);
    fprintf(stderr, "%s: %s: cannot open a verbs device (%s)\n", program, required ? "FAILED" : "SKIPPED",
            strerror(device.error()));
    *exit_code = required ? 1 : kExitSkip;
    return device;
  }
  const rdma::Device& d = device.value();
  printf("%s: device %s port %u gid index %d %s mtu %d\n", program, d.name().c_str(), d.port(), d.gid_index(),
         d.is_ethernet() ? "RoCE" : "IB", 128 << d.active_mtu());
  const char* expected_gid = getenv("RXE_VM_GID_INDEX");
  if (expected_gid && *expected_gid && atoi(expected_gid) != d.gid_index()) {
    fprintf(stderr, "%s: FAILED: picked GID index %d, the VM's IPv4 RoCEv2 GID is %s\n", program, d.gid_index(),
            expected_gid);
    *exit_code = 1;
    return core::Result<rdma::Device>::fail(EINVAL);
  }
  *exit_code = 0;
  return device;
}

bool wait_completion(rdma::CompletionQueue& cq, ibv_wc* out, const Deadline& deadline, const char* what) {
  // The library's wait contract: poll for a spin budget, then arm, poll once
  // more and sleep on the completion channel. Two processes spinning on a
  // 2-vCPU emulated guest also compete with rxe's own kernel work (pure
  // polling gave anything from 0.1 to 7 ms per round trip here). Without a
  // channel, yield the CPU instead of sleeping.
  const double spin_until = now_seconds() + spin_budget_seconds();
  bool armed = false;
  for (uint64_t polls = 0;; ++polls) {
    core::Result<int> n = cq.poll(out, 1);
    if (!n) return false;
    if (n.value() == 1) {
      if (out->status == IBV_WC_SUCCESS) return true;
      fprintf(stderr, "completion error waiting for %s: %s (opcode %d, wr_id %llu)\n", what,
              ibv_wc_status_str(out->status), out->opcode, static_cast<unsigned long long>(out->wr_id));
      return false;
    }
    if ((polls & 63) != 0) continue;
    if (deadline.expired()) {
      fprintf(stderr, "timeout waiting for %s\n", what);
      return false;
    }
    if (now_seconds() < spin_until) continue;
    if (!cq.has_channel()) {
      sched_yield();
    } else if (!armed) {
      if (!cq.arm()) return false;
      armed = true;  // poll once more before sleeping: a completion may have beaten the arm
    } else {
      core::Result<int> woke = cq.wait_event(deadline.remaining_ms(100));
      if (!woke && woke.error() != EINTR) return false;
      if (woke && woke.value() > 0) armed = false;  // the event disarmed the CQ
    }
  }
}

namespace {

// Waits up to timeout_s for the child; kills it by PID if it is still there.
int reap_child(pid_t child, int timeout_s) {
  Deadline deadline(timeout_s);
  int status = 0;
  for (int attempt = 0; attempt < timeout_s * 100 + 1; ++attempt) {
    pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (done < 0 && errno != EINTR) return 1;
    if (deadline.expired()) break;
    usleep(10000);
  }
  fprintf(stderr, "child %d did not finish in %d s; killing it\n", static_cast<int>(child), timeout_s);
  kill(child, SIGKILL);
  waitpid(child, &status, 0);  // SIGKILL cannot be ignored: this returns
  return 1;
}

}  // namespace

int run_pair(const std::function<int(int)>& first, const std::function<int(int)>& second, int timeout_s) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    perror("socketpair");
    return 1;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t child = fork();
  if (child < 0) {
    perror("fork");
    return 1;
  }
  if (child == 0) {
    close(fds[0]);
    int rc = second(fds[1]);
    fflush(stdout);
    fflush(stderr);
#if defined(__SANITIZE_ADDRESS__)
    // _exit() skips the leak check that exit() would run: do it here, so
    // the second process of a test is checked for leaks like the first.
    if (rc == 0) __lsan_do_leak_check();
#endif
    _exit(rc);
  }
  close(fds[1]);
  int rc_first = first(fds[0]);
  close(fds[0]);  // a child still waiting on the socketpair sees EOF and gives up
  int rc_second = reap_child(child, timeout_s);
  if (rc_first == 0 && rc_second == 0) return 0;
  if ((rc_first == 0 || rc_first == kExitSkip) && (rc_second == 0 || rc_second == kExitSkip)) return kExitSkip;
  fprintf(stderr, "result: first process %d, second process %d\n", rc_first, rc_second);
  return 1;
}

}  // namespace vsock::test
