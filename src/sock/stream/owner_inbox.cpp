#include "sock/stream/owner_inbox.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>

#include "core/clock.hpp"
#include "core/log.hpp"
#include "sys/real_calls.hpp"

namespace vsock::sock {
namespace {

constexpr int kRequestWaitMs = 200;  // a child writes its request right after its connect
constexpr int kRequestsPerLook = 16;

std::mutex g_open_lock;
std::atomic<int> g_inbox{-1};

// "\0libvsock-owner-<pid>": abstract, so nothing is left behind on exit.
socklen_t inbox_address(pid_t pid, sockaddr_un* out) {
  std::memset(out, 0, sizeof *out);
  out->sun_family = AF_UNIX;
  int n = std::snprintf(out->sun_path + 1, sizeof out->sun_path - 1, "libvsock-owner-%d", static_cast<int>(pid));
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + static_cast<size_t>(n));
}

// The child must not answer for its parent: the inbox is the parent's.
void close_inbox_in_child() {
  new (&g_open_lock) std::mutex();
  int fd = g_inbox.exchange(-1);
  if (fd >= 0) sys::real().close(fd);
}

__attribute__((constructor)) void install_inbox_fork_handler() {
  pthread_atfork(nullptr, nullptr, close_inbox_in_child);
}

bool same_user(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  return sys::real().getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == ::geteuid();
}

void serve_one(int fd, OwnerHandler handler) {
  pollfd pfd{fd, POLLIN, 0};
  if (!same_user(fd) || sys::real().poll(&pfd, 1, kRequestWaitMs) != 1) return;
  uint8_t bytes[wire::kOwnerRequestSize + 1];
  ssize_t n = sys::real().recv(fd, bytes, sizeof bytes, MSG_DONTWAIT);
  core::Result<wire::OwnerRequest> request = wire::parse_owner_request(bytes, n > 0 ? static_cast<size_t>(n) : 0);
  if (!request) {
    VSOCK_LOG(kDebug, "owner inbox: a malformed request (%zd bytes) dropped", n);
    return;
  }
  const uint8_t answer = static_cast<uint8_t>(handler(request.value().nonce));
  (void)!sys::real().send(fd, &answer, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace

bool open_owner_inbox() {
  std::lock_guard<std::mutex> held(g_open_lock);
  if (g_inbox.load() >= 0) return true;
  int fd = sys::real().socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un address;
  socklen_t len = inbox_address(::getpid(), &address);
  if (sys::real().bind(fd, reinterpret_cast<sockaddr*>(&address), len) != 0 || sys::real().listen(fd, 64) != 0) {
    VSOCK_LOG(kInfo, "owner inbox: cannot listen (%s): a fork() hands every connection back to TCP",
              std::strerror(errno));
    sys::real().close(fd);
    return false;
  }
  g_inbox.store(fd);
  return true;
}

int owner_inbox_fd() { return g_inbox.load(); }

void serve_owner_inbox(OwnerHandler handler) {
  const int inbox = g_inbox.load();
  if (inbox < 0) return;
  for (int i = 0; i < kRequestsPerLook; ++i) {
    int fd = sys::real().accept4(inbox, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    serve_one(fd, handler);
    sys::real().close(fd);
  }
}

core::Result<wire::OwnerAnswer> ask_owner(pid_t owner, uint64_t nonce, int timeout_ms) {
  using R = core::Result<wire::OwnerAnswer>;
  int fd = sys::real().socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return R::fail(errno);
  sockaddr_un address;
  socklen_t len = inbox_address(owner, &address);
  const int64_t deadline = core::monotonic_ms() + timeout_ms;
  int error = 0;
  // A full backlog says EAGAIN: the owner is busy, try again until the deadline.
  while (sys::real().connect(fd, reinterpret_cast<sockaddr*>(&address), len) != 0) {
    error = errno;
    if (error != EAGAIN || core::monotonic_ms() >= deadline) break;
    sys::real().poll(nullptr, 0, 5);
    error = 0;
  }
  uint8_t answer = 0;
  if (error == 0) {
    uint8_t bytes[wire::kOwnerRequestSize];
    wire::encode(wire::OwnerRequest{nonce}, bytes);
    if (sys::real().send(fd, bytes, sizeof bytes, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof bytes)) error = errno;
  }
  ssize_t n = -1;
  while (error == 0) {
    pollfd pfd{fd, POLLIN, 0};
    const int64_t left = deadline - core::monotonic_ms();
    if (left <= 0) {
      error = ETIMEDOUT;
      break;
    }
    int ready = sys::real().poll(&pfd, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      error = ready == 0 ? ETIMEDOUT : errno;
      break;
    }
    n = sys::real().recv(fd, &answer, 1, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) error = n == 0 ? ECONNRESET : errno;  // the owner closed without answering
    break;
  }
  sys::real().close(fd);
  if (error != 0) return R::fail(error);
  return wire::parse_owner_answer(&answer, static_cast<size_t>(n));
}

}  // namespace vsock::sock
