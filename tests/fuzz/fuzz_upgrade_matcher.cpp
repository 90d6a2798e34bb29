// libFuzzer target: UpgradeMatcher (src/sock/upgrade/upgrade_matcher.cpp), which
// holds the connect requests peers send until their sockets are accepted.
//
// Input: records; the first byte picks an operation:
//   0: a request — the next 56 bytes go through parse_upgrade_request as
//      private data would (refused ones never reach the matcher);
//   1: an accepted socket — 38 bytes: family bit, local and peer address
//      bytes and ports, read as sockaddrs;
//   2: time passes and expire() runs; 3/4: remove a socket / a request.
// Invariants (trap): the tables never exceed the capacity; every request
// handle and every socket ends exactly once (matched, rejected as a
// duplicate, evicted, expired, removed) or is still waiting; a match pairs
// a request with a socket upgrade_request_matches accepts.
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>

#include "fuzz_check.hpp"
#include "sock/upgrade/upgrade_matcher.hpp"
#include "sock/wire/upgrade_request.hpp"

namespace {

struct Socket {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = 0, peer_len = 0;
};

Socket make_socket(const uint8_t* in) {
  Socket s;
  const bool six = in[0] & 1;
  for (int side = 0; side < 2; ++side) {
    const uint8_t* at = in + 1 + side * 18;
    sockaddr_storage& out = side == 0 ? s.local : s.peer;
    socklen_t& len = side == 0 ? s.local_len : s.peer_len;
    if (six) {
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      std::memcpy(&a.sin6_port, at, 2);
      std::memcpy(&a.sin6_addr, at + 2, 16);
      std::memcpy(&out, &a, sizeof a);
      len = sizeof a;
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      std::memcpy(&a.sin_port, at, 2);
      std::memcpy(&a.sin_addr, at + 2, 4);
      std::memcpy(&out, &a, sizeof a);
      len = sizeof a;
    }
  }
  return s;
}

const sockaddr* sa(const sockaddr_storage& s) { return reinterpret_cast<const sockaddr*>(&s); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t capacity = 1 + data[0] % 8;
  const uint64_t timeout = 1 + data[1] % 64;
  vsock::sock::UpgradeMatcher matcher(capacity, timeout);
  std::map<uint64_t, vsock::sock::wire::UpgradeRequest> requests;  // every handle given
  std::map<int, Socket> sockets;                                    // every fd given
  std::set<uint64_t> ended_requests;
  std::set<int> ended_sockets;
  uint64_t now = 0, next_handle = 1;
  int next_fd = 3;
  auto end_request = [&](uint64_t h) { FUZZ_CHECK(requests.count(h) && ended_requests.insert(h).second); };
  auto end_socket = [&](int fd) { FUZZ_CHECK(sockets.count(fd) && ended_sockets.insert(fd).second); };
  auto check_match = [&](uint64_t h, int fd) {
    const Socket& s = sockets[fd];
    FUZZ_CHECK(vsock::sock::wire::upgrade_request_matches(requests[h], sa(s.local), s.local_len, sa(s.peer),
                                                          s.peer_len));
  };

  size_t at = 2;
  while (at < size) {
    const uint8_t op = data[at++] % 5;
    if (op == 0) {
      if (at + vsock::sock::wire::kUpgradeRequestSize > size) break;
      vsock::core::Result<vsock::sock::wire::UpgradeRequest> parsed =
          vsock::sock::wire::parse_upgrade_request(data + at, vsock::sock::wire::kUpgradeRequestSize);
      at += vsock::sock::wire::kUpgradeRequestSize;
      if (!parsed) continue;
      const uint64_t h = next_handle++;
      requests[h] = parsed.value();
      vsock::sock::RequestResult r = matcher.add_request(parsed.value(), h, now);
      if (r.evicted) end_request(r.evicted_handle);
      if (r.verdict == vsock::sock::RequestVerdict::kMatched) {
        check_match(h, r.fd);
        end_request(h);
        end_socket(r.fd);
      } else if (r.verdict == vsock::sock::RequestVerdict::kDuplicate) {
        end_request(h);
      }
    } else if (op == 1) {
      if (at + 37 > size) break;
      const Socket s = make_socket(data + at);
      at += 37;
      const int fd = next_fd++;
      sockets[fd] = s;
      vsock::core::Result<vsock::sock::SocketResult> r =
          matcher.add_socket(fd, sa(s.local), s.local_len, sa(s.peer), s.peer_len, now);
      FUZZ_CHECK(r.has_value());  // well-formed sockaddrs always read
      if (r.value().evicted) end_socket(r.value().evicted_fd);
      if (r.value().matched) {
        check_match(r.value().handle, fd);
        end_request(r.value().handle);
        end_socket(fd);
      }
    } else if (op == 2) {
      if (at >= size) break;
      now += data[at++];
      vsock::sock::Expired e = matcher.expire(now);
      for (uint64_t h : e.rejected_handles) end_request(h);
      for (int fd : e.tcp_fds) end_socket(fd);
    } else if (op == 3) {
      if (at >= size || sockets.empty()) break;
      const int fd = 3 + data[at++] % static_cast<int>(sockets.size());
      if (matcher.remove_socket(fd)) end_socket(fd);
    } else {
      if (at >= size || requests.empty()) break;
      const uint64_t h = 1 + data[at++] % requests.size();
      if (matcher.remove_request(h)) end_request(h);
    }
    FUZZ_CHECK(matcher.waiting_requests() <= capacity && matcher.waiting_sockets() <= capacity);
    FUZZ_CHECK(ended_requests.size() + matcher.waiting_requests() == requests.size());
    FUZZ_CHECK(ended_sockets.size() + matcher.waiting_sockets() == sockets.size());
  }
  return 0;
}
