// UpgradeMatcher: the listener's side of docs/protocol.md §1 — pairs each
// rdma_cm connect request (an UpgradeRequest naming a TCP connection) with
// the kernel socket accept() returns for that connection. Either may come
// first: the client sends its request once its connect() returns, which can
// be before or after the server's application calls accept(). Whichever
// arrives first waits here, bounded in number and in time.
//
// Rules:
//   - match by the 4-tuple, with wire::upgrade_request_matches (canonical
//     forms: IPv4-mapped addresses match plain IPv4);
//   - a table holds at most `capacity` requests and `capacity` sockets; a
//     new one when full evicts the oldest (a request: reject it; a socket:
//     it stays on TCP);
//   - a second request for a 4-tuple that already has one waiting is
//     rejected (the newer: the first may already be half-way through);
//   - a request or socket older than `timeout_ms` expires (a request:
//     reject; a socket: it stays on TCP — its client runs no libvsock, or
//     gave up).
// Time is passed in, never read here. Not thread-safe: the listener's
// owner serialises calls. No I/O: the caller accepts and rejects.
#pragma once
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/result.hpp"
#include "sock/wire/upgrade_request.hpp"

namespace vsock::sock {

enum class RequestVerdict : uint8_t {
  kMatched,    // a waiting socket is this request's: accept it (fd)
  kPending,    // waits for its socket
  kDuplicate,  // another request for this 4-tuple waits: reject this one
};

struct RequestResult {
  RequestVerdict verdict = RequestVerdict::kPending;
  int fd = -1;  // kMatched: the socket to upgrade
  // The table was full: the oldest waiting request was dropped and must
  // be rejected.
  bool evicted = false;
  uint64_t evicted_handle = 0;
};

struct SocketResult {
  bool matched = false;  // a waiting request is this socket's: accept it
  uint64_t handle = 0;
  wire::UpgradeRequest request;
  // The table was full: the oldest waiting socket was dropped; it stays
  // on TCP.
  bool evicted = false;
  int evicted_fd = -1;
};

// What expire() dropped.
struct Expired {
  std::vector<uint64_t> rejected_handles;  // reject these requests
  std::vector<int> tcp_fds;                // these sockets stay on TCP
};

class UpgradeMatcher {
 public:
  // capacity 0 is taken as 1: a matcher that can hold nothing could only
  // match a request and its socket arriving at once, which they never do.
  UpgradeMatcher(size_t capacity, uint64_t timeout_ms);

  // A connect request arrived with the caller's handle for it (its cm id).
  RequestResult add_request(const wire::UpgradeRequest& request, uint64_t handle, uint64_t now_ms);

  // accept() returned `fd`, whose getsockname() is `local` and
  // getpeername() is `peer`. A socket already waiting under the same fd
  // number (closed without remove_socket) is replaced. EINVAL for a
  // sockaddr that cannot be read, or longer than sockaddr_storage.
  core::Result<SocketResult> add_socket(int fd, const sockaddr* local, socklen_t local_len, const sockaddr* peer,
                                        socklen_t peer_len, uint64_t now_ms);

  // Drops what waited for longer than the timeout.
  Expired expire(uint64_t now_ms);

  // The socket was closed, or its request's cm id went away: forget it.
  bool remove_socket(int fd);
  bool remove_request(uint64_t handle);

  size_t waiting_requests() const { return requests_.size(); }
  size_t waiting_sockets() const { return sockets_.size(); }
  size_t capacity() const { return capacity_; }
  uint64_t timeout_ms() const { return timeout_ms_; }

 private:
  struct WaitingRequest {
    wire::UpgradeRequest request;
    uint64_t handle;
    uint64_t since_ms;
  };
  struct WaitingSocket {
    int fd;
    sockaddr_storage local;
    sockaddr_storage peer;
    socklen_t local_len;
    socklen_t peer_len;
    uint64_t since_ms;
  };

  bool matches(const WaitingRequest& request, const WaitingSocket& socket) const;
  bool expired(uint64_t since_ms, uint64_t now_ms) const;

  size_t capacity_;
  uint64_t timeout_ms_;
  // Oldest first. Linear scans: a listener has few connections half-way
  // between accept() and the upgrade at any moment.
  std::vector<WaitingRequest> requests_;
  std::vector<WaitingSocket> sockets_;
};

// True if two requests name the same TCP connection (canonical forms).
bool same_connection(const wire::UpgradeRequest& a, const wire::UpgradeRequest& b);

}  // namespace vsock::sock
