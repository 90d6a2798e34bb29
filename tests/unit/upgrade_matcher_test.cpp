// UpgradeMatcher: connect requests and accepted sockets, in either order,
// bounded in number and time (docs/protocol.md §1).
#include "sock/upgrade/upgrade_matcher.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>

namespace vsock::sock {
namespace {

// One kernel connection as both sides see it.
struct Connection {
  sockaddr_storage client{}, server{};
  socklen_t client_len = 0, server_len = 0;
};

sockaddr_storage v4(const char* ip, uint16_t port) {
  sockaddr_storage storage{};
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET, ip, &in.sin_addr), 1);
  std::memcpy(&storage, &in, sizeof in);
  return storage;
}

sockaddr_storage v6(const char* ip, uint16_t port) {
  sockaddr_storage storage{};
  sockaddr_in6 in{};
  in.sin6_family = AF_INET6;
  in.sin6_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET6, ip, &in.sin6_addr), 1);
  std::memcpy(&storage, &in, sizeof in);
  return storage;
}

const sockaddr* sa(const sockaddr_storage& s) { return reinterpret_cast<const sockaddr*>(&s); }

Connection v4_connection(uint16_t client_port) {
  return {v4("10.0.0.1", client_port), v4("10.0.0.2", 5000), sizeof(sockaddr_in), sizeof(sockaddr_in)};
}

wire::UpgradeRequest request_for(const Connection& c, uint64_t nonce = 7) {
  core::Result<wire::UpgradeRequest> r =
      wire::build_upgrade_request(sa(c.client), c.client_len, sa(c.server), c.server_len, nonce);
  EXPECT_TRUE(r);
  return r.value();
}

// The server's accept(): local is the server end, peer the client end.
core::Result<SocketResult> accept_socket(UpgradeMatcher& m, int fd, const Connection& c, uint64_t now) {
  return m.add_socket(fd, sa(c.server), c.server_len, sa(c.client), c.client_len, now);
}

TEST(UpgradeMatcher, RequestThenSocket) {
  UpgradeMatcher m(8, 1000);
  const Connection c = v4_connection(40000);
  RequestResult r = m.add_request(request_for(c), 11, 0);
  EXPECT_EQ(r.verdict, RequestVerdict::kPending);
  EXPECT_FALSE(r.evicted);
  EXPECT_EQ(m.waiting_requests(), 1u);
  core::Result<SocketResult> s = accept_socket(m, 5, c, 10);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s.value().matched);
  EXPECT_EQ(s.value().handle, 11u);
  EXPECT_EQ(s.value().request, request_for(c));
  EXPECT_EQ(m.waiting_requests(), 0u);
  EXPECT_EQ(m.waiting_sockets(), 0u);
}

TEST(UpgradeMatcher, SocketThenRequest) {
  UpgradeMatcher m(8, 1000);
  const Connection c = v4_connection(40000);
  core::Result<SocketResult> s = accept_socket(m, 5, c, 0);
  ASSERT_TRUE(s);
  EXPECT_FALSE(s.value().matched);
  EXPECT_EQ(m.waiting_sockets(), 1u);
  RequestResult r = m.add_request(request_for(c), 11, 10);
  EXPECT_EQ(r.verdict, RequestVerdict::kMatched);
  EXPECT_EQ(r.fd, 5);
  EXPECT_EQ(m.waiting_sockets(), 0u);
  EXPECT_EQ(m.waiting_requests(), 0u);
}

TEST(UpgradeMatcher, OnlyTheRightConnectionMatches) {
  UpgradeMatcher m(8, 1000);
  ASSERT_TRUE(accept_socket(m, 5, v4_connection(40000), 0));
  ASSERT_TRUE(accept_socket(m, 6, v4_connection(40001), 0));
  RequestResult r = m.add_request(request_for(v4_connection(40001)), 1, 0);
  EXPECT_EQ(r.verdict, RequestVerdict::kMatched);
  EXPECT_EQ(r.fd, 6);
  EXPECT_EQ(m.add_request(request_for(v4_connection(40002)), 2, 0).verdict, RequestVerdict::kPending);
  // Client and server swapped is another connection.
  Connection swapped = v4_connection(40000);
  std::swap(swapped.client, swapped.server);
  EXPECT_EQ(m.add_request(request_for(swapped), 3, 0).verdict, RequestVerdict::kPending);
  EXPECT_EQ(m.waiting_sockets(), 1u);
}

// A dual-stack server sees the IPv4 client as ::ffff:a.b.c.d; the client
// sent family 4. They are the same connection.
TEST(UpgradeMatcher, MappedAddressesMatchPlainIpv4) {
  UpgradeMatcher m(8, 1000);
  const Connection plain = v4_connection(40000);
  const Connection mapped{v6("::ffff:10.0.0.1", 40000), v6("::ffff:10.0.0.2", 5000), sizeof(sockaddr_in6),
                          sizeof(sockaddr_in6)};
  ASSERT_TRUE(accept_socket(m, 5, mapped, 0));
  EXPECT_EQ(m.add_request(request_for(plain), 1, 0).verdict, RequestVerdict::kMatched);

  // And a duplicate check sees through the mapping too.
  wire::UpgradeRequest as_v6 = request_for(plain);
  as_v6.family = wire::kFamilyIpv6;
  const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  for (wire::Endpoint* e : {&as_v6.client, &as_v6.server}) {
    uint8_t v4bytes[4];
    std::memcpy(v4bytes, e->ip, 4);
    std::memcpy(e->ip, prefix, 12);
    std::memcpy(e->ip + 12, v4bytes, 4);
  }
  EXPECT_TRUE(same_connection(as_v6, request_for(plain)));
  EXPECT_EQ(m.add_request(request_for(plain), 2, 0).verdict, RequestVerdict::kPending);
  EXPECT_EQ(m.add_request(as_v6, 3, 0).verdict, RequestVerdict::kDuplicate);
}

TEST(UpgradeMatcher, Ipv6Connection) {
  UpgradeMatcher m(8, 1000);
  const Connection c{v6("fd00::1", 40000), v6("fd00::2", 5000), sizeof(sockaddr_in6), sizeof(sockaddr_in6)};
  EXPECT_EQ(m.add_request(request_for(c), 1, 0).verdict, RequestVerdict::kPending);
  core::Result<SocketResult> s = accept_socket(m, 9, c, 0);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s.value().matched);
  EXPECT_EQ(s.value().handle, 1u);
}

TEST(UpgradeMatcher, DuplicateRequestRejectsTheNewer) {
  UpgradeMatcher m(8, 1000);
  const Connection c = v4_connection(40000);
  EXPECT_EQ(m.add_request(request_for(c, 1), 100, 0).verdict, RequestVerdict::kPending);
  RequestResult dup = m.add_request(request_for(c, 2), 200, 5);  // another nonce, same connection
  EXPECT_EQ(dup.verdict, RequestVerdict::kDuplicate);
  EXPECT_EQ(m.waiting_requests(), 1u);
  core::Result<SocketResult> s = accept_socket(m, 5, c, 10);
  ASSERT_TRUE(s);
  EXPECT_EQ(s.value().handle, 100u);  // the first one wins
  EXPECT_EQ(s.value().request.nonce, 1u);
}

TEST(UpgradeMatcher, FullRequestTableRejectsTheOldest) {
  UpgradeMatcher m(3, 1000);
  for (uint16_t i = 0; i < 3; ++i) {
    RequestResult r = m.add_request(request_for(v4_connection(40000 + i)), i, i);
    EXPECT_FALSE(r.evicted);
  }
  RequestResult r = m.add_request(request_for(v4_connection(40003)), 3, 3);
  EXPECT_EQ(r.verdict, RequestVerdict::kPending);
  EXPECT_TRUE(r.evicted);
  EXPECT_EQ(r.evicted_handle, 0u);
  EXPECT_EQ(m.waiting_requests(), 3u);
  // The evicted one no longer matches; the others do.
  core::Result<SocketResult> gone = accept_socket(m, 10, v4_connection(40000), 4);
  ASSERT_TRUE(gone);
  EXPECT_FALSE(gone.value().matched);
  core::Result<SocketResult> kept = accept_socket(m, 11, v4_connection(40001), 4);
  ASSERT_TRUE(kept);
  EXPECT_TRUE(kept.value().matched);
  EXPECT_EQ(kept.value().handle, 1u);
}

TEST(UpgradeMatcher, FullSocketTableLeavesTheOldestOnTcp) {
  UpgradeMatcher m(2, 1000);
  ASSERT_TRUE(accept_socket(m, 5, v4_connection(40000), 0));
  ASSERT_TRUE(accept_socket(m, 6, v4_connection(40001), 1));
  core::Result<SocketResult> s = accept_socket(m, 7, v4_connection(40002), 2);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s.value().evicted);
  EXPECT_EQ(s.value().evicted_fd, 5);
  EXPECT_EQ(m.waiting_sockets(), 2u);
  EXPECT_EQ(m.add_request(request_for(v4_connection(40000)), 1, 3).verdict, RequestVerdict::kPending);
}

TEST(UpgradeMatcher, ZeroCapacityHoldsOne) {
  UpgradeMatcher m(0, 1000);
  EXPECT_EQ(m.capacity(), 1u);
  ASSERT_TRUE(accept_socket(m, 5, v4_connection(40000), 0));
  EXPECT_EQ(m.add_request(request_for(v4_connection(40000)), 1, 0).fd, 5);
}

TEST(UpgradeMatcher, ExpiryRejectsRequestsAndLeavesSocketsOnTcp) {
  UpgradeMatcher m(8, 100);
  m.add_request(request_for(v4_connection(40000)), 1, 0);
  m.add_request(request_for(v4_connection(40001)), 2, 50);
  ASSERT_TRUE(accept_socket(m, 5, v4_connection(41000), 20));
  ASSERT_TRUE(accept_socket(m, 6, v4_connection(41001), 80));

  Expired none = m.expire(99);
  EXPECT_TRUE(none.rejected_handles.empty());
  EXPECT_TRUE(none.tcp_fds.empty());

  Expired first = m.expire(100);  // exactly the timeout: expired
  EXPECT_EQ(first.rejected_handles, std::vector<uint64_t>({1}));
  EXPECT_TRUE(first.tcp_fds.empty());

  Expired second = m.expire(179);
  EXPECT_EQ(second.rejected_handles, std::vector<uint64_t>({2}));
  EXPECT_EQ(second.tcp_fds, std::vector<int>({5}));
  EXPECT_EQ(m.waiting_requests(), 0u);
  EXPECT_EQ(m.waiting_sockets(), 1u);

  Expired third = m.expire(10000);
  EXPECT_EQ(third.tcp_fds, std::vector<int>({6}));
  EXPECT_EQ(m.waiting_sockets(), 0u);
}

TEST(UpgradeMatcher, AClockGoingBackwardsExpiresNothing) {
  UpgradeMatcher m(8, 100);
  m.add_request(request_for(v4_connection(40000)), 1, 1000);
  EXPECT_TRUE(m.expire(0).rejected_handles.empty());
  EXPECT_EQ(m.waiting_requests(), 1u);
}

TEST(UpgradeMatcher, ARequestMatchedLateStillMatchesBeforeExpiry) {
  UpgradeMatcher m(8, 100);
  m.add_request(request_for(v4_connection(40000)), 1, 0);
  core::Result<SocketResult> s = accept_socket(m, 5, v4_connection(40000), 99);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s.value().matched);
}

TEST(UpgradeMatcher, RemoveSocketAndRequest) {
  UpgradeMatcher m(8, 100);
  ASSERT_TRUE(accept_socket(m, 5, v4_connection(40000), 0));
  EXPECT_TRUE(m.remove_socket(5));
  EXPECT_FALSE(m.remove_socket(5));
  EXPECT_EQ(m.add_request(request_for(v4_connection(40000)), 1, 0).verdict, RequestVerdict::kPending);
  EXPECT_TRUE(m.remove_request(1));
  EXPECT_FALSE(m.remove_request(1));
  core::Result<SocketResult> s = accept_socket(m, 5, v4_connection(40000), 0);
  ASSERT_TRUE(s);
  EXPECT_FALSE(s.value().matched);
}

// close() then accept() gave the same fd number to another connection
// before the socket layer told the matcher: the new one replaces the old.
TEST(UpgradeMatcher, ARecycledFdReplacesItsStaleEntry) {
  UpgradeMatcher m(8, 100);
  ASSERT_TRUE(accept_socket(m, 5, v4_connection(40000), 0));
  ASSERT_TRUE(accept_socket(m, 5, v4_connection(40001), 1));
  EXPECT_EQ(m.waiting_sockets(), 1u);
  EXPECT_EQ(m.add_request(request_for(v4_connection(40000)), 1, 2).verdict, RequestVerdict::kPending);
  EXPECT_EQ(m.add_request(request_for(v4_connection(40001)), 2, 2).fd, 5);
}

TEST(UpgradeMatcher, UnreadableSockaddrsAreRefused) {
  UpgradeMatcher m(8, 100);
  const Connection c = v4_connection(40000);
  EXPECT_EQ(m.add_socket(5, nullptr, 0, sa(c.client), c.client_len, 0).error(), EINVAL);
  EXPECT_EQ(m.add_socket(5, sa(c.server), 4, sa(c.client), c.client_len, 0).error(), EINVAL);
  EXPECT_EQ(m.add_socket(5, sa(c.server), sizeof(sockaddr_storage) + 1, sa(c.client), c.client_len, 0).error(),
            EINVAL);
  sockaddr_storage unix_addr{};
  unix_addr.ss_family = AF_UNIX;
  EXPECT_FALSE(m.add_socket(5, sa(unix_addr), sizeof unix_addr, sa(c.client), c.client_len, 0));
  EXPECT_EQ(m.waiting_sockets(), 0u);
}

// Random arrivals in random order, with duplicates, evictions and expiry:
// every request handle ends exactly once (matched, duplicate-rejected,
// evicted, expired or still waiting), every socket too, and a match always
// pairs a request with its own connection.
TEST(UpgradeMatcher, RandomisedEveryArrivalEndsOnce) {
  std::mt19937_64 rng(99);
  for (int round = 0; round < 200; ++round) {
    const size_t capacity = 1 + rng() % 6;
    UpgradeMatcher m(capacity, 50);
    std::set<uint64_t> ended_requests;
    std::set<int> ended_sockets;
    uint64_t next_handle = 1;
    int next_fd = 100;
    uint64_t now = 0;
    std::vector<std::pair<uint64_t, uint16_t>> handles;  // handle -> client port
    std::vector<std::pair<int, uint16_t>> fds;
    auto end_request = [&](uint64_t h) { ASSERT_TRUE(ended_requests.insert(h).second) << h; };
    auto end_socket = [&](int fd) { ASSERT_TRUE(ended_sockets.insert(fd).second) << fd; };
    auto port_of_handle = [&](uint64_t h) {
      for (auto& p : handles)
        if (p.first == h) return p.second;
      return uint16_t{0};
    };
    auto port_of_fd = [&](int fd) {
      for (auto& p : fds)
        if (p.first == fd) return p.second;
      return uint16_t{0};
    };
    for (int step = 0; step < 200; ++step) {
      now += rng() % 10;
      const uint16_t port = static_cast<uint16_t>(40000 + rng() % 12);
      switch (rng() % 3) {
        case 0: {
          const uint64_t h = next_handle++;
          handles.push_back({h, port});
          RequestResult r = m.add_request(request_for(v4_connection(port)), h, now);
          if (r.evicted) end_request(r.evicted_handle);
          if (r.verdict == RequestVerdict::kMatched) {
            ASSERT_EQ(port_of_fd(r.fd), port);
            end_request(h);
            end_socket(r.fd);
          } else if (r.verdict == RequestVerdict::kDuplicate) {
            end_request(h);
          }
          break;
        }
        case 1: {
          // The kernel never has two live connections with one 4-tuple: a
          // port whose socket still waits is not accepted again.
          bool live = false;
          for (auto& p : fds)
            if (p.second == port && !ended_sockets.count(p.first)) live = true;
          if (live) break;
          const int fd = next_fd++;
          fds.push_back({fd, port});
          core::Result<SocketResult> s = accept_socket(m, fd, v4_connection(port), now);
          ASSERT_TRUE(s);
          if (s.value().evicted) end_socket(s.value().evicted_fd);
          if (s.value().matched) {
            ASSERT_EQ(port_of_handle(s.value().handle), port);
            end_request(s.value().handle);
            end_socket(fd);
          }
          break;
        }
        default: {
          Expired e = m.expire(now);
          for (uint64_t h : e.rejected_handles) end_request(h);
          for (int fd : e.tcp_fds) end_socket(fd);
        }
      }
      ASSERT_LE(m.waiting_requests(), capacity);
      ASSERT_LE(m.waiting_sockets(), capacity);
      ASSERT_EQ(ended_requests.size() + m.waiting_requests(), next_handle - 1);
      ASSERT_EQ(ended_sockets.size() + m.waiting_sockets(), static_cast<size_t>(next_fd - 100));
    }
  }
}

}  // namespace
}  // namespace vsock::sock
