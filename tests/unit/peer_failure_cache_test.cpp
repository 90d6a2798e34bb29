// PeerFailureCache: peers that failed to upgrade, remembered for a while,
// bounded with LRU eviction; time passed in.
#include "sock/upgrade/peer_failure_cache.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>

namespace vsock::sock {
namespace {

struct Addr {
  sockaddr_storage storage{};
  socklen_t len = 0;
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

Addr v4(const char* ip, uint16_t port) {
  Addr a;
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET, ip, &in.sin_addr), 1);
  std::memcpy(&a.storage, &in, sizeof in);
  a.len = sizeof in;
  return a;
}

Addr v6(const char* ip, uint16_t port) {
  Addr a;
  sockaddr_in6 in{};
  in.sin6_family = AF_INET6;
  in.sin6_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET6, ip, &in.sin6_addr), 1);
  std::memcpy(&a.storage, &in, sizeof in);
  a.len = sizeof in;
  return a;
}

TEST(PeerFailureCache, RemembersAFailedPeerForItsTime) {
  PeerFailureCache cache(8, 60000);
  const Addr peer = v4("10.0.0.2", 5000);
  EXPECT_FALSE(cache.should_skip(peer.sa(), peer.len, 0));
  ASSERT_TRUE(cache.record_failure(peer.sa(), peer.len, 1000));
  EXPECT_TRUE(cache.should_skip(peer.sa(), peer.len, 1000));
  EXPECT_TRUE(cache.should_skip(peer.sa(), peer.len, 60999));
  EXPECT_FALSE(cache.should_skip(peer.sa(), peer.len, 61000));  // expired: try again
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.counters().hits, 2u);
  EXPECT_EQ(cache.counters().misses, 2u);
  EXPECT_EQ(cache.counters().expired, 1u);
  EXPECT_EQ(cache.counters().recorded, 1u);
}

TEST(PeerFailureCache, AHitDoesNotExtendTheTime) {
  PeerFailureCache cache(8, 100);
  const Addr peer = v4("10.0.0.2", 5000);
  cache.record_failure(peer.sa(), peer.len, 0);
  for (uint64_t t = 0; t < 100; t += 10) EXPECT_TRUE(cache.should_skip(peer.sa(), peer.len, t));
  EXPECT_FALSE(cache.should_skip(peer.sa(), peer.len, 100));
}

TEST(PeerFailureCache, ANewFailureRestartsTheTime) {
  PeerFailureCache cache(8, 100);
  const Addr peer = v4("10.0.0.2", 5000);
  cache.record_failure(peer.sa(), peer.len, 0);
  cache.record_failure(peer.sa(), peer.len, 90);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_TRUE(cache.should_skip(peer.sa(), peer.len, 150));
  EXPECT_FALSE(cache.should_skip(peer.sa(), peer.len, 190));
}

TEST(PeerFailureCache, PortAndAddressBothCount) {
  PeerFailureCache cache(8, 100);
  const Addr peer = v4("10.0.0.2", 5000);
  cache.record_failure(peer.sa(), peer.len, 0);
  const Addr other_port = v4("10.0.0.2", 5001), other_host = v4("10.0.0.3", 5000);
  EXPECT_FALSE(cache.should_skip(other_port.sa(), other_port.len, 1));
  EXPECT_FALSE(cache.should_skip(other_host.sa(), other_host.len, 1));
}

TEST(PeerFailureCache, MappedAddressesAreTheIpv4Peer) {
  PeerFailureCache cache(8, 100);
  const Addr plain = v4("10.0.0.2", 5000), mapped = v6("::ffff:10.0.0.2", 5000);
  cache.record_failure(mapped.sa(), mapped.len, 0);
  EXPECT_TRUE(cache.should_skip(plain.sa(), plain.len, 1));
  const Addr real_v6 = v6("fd00::2", 5000);
  EXPECT_FALSE(cache.should_skip(real_v6.sa(), real_v6.len, 1));
  cache.record_failure(real_v6.sa(), real_v6.len, 2);
  EXPECT_TRUE(cache.should_skip(real_v6.sa(), real_v6.len, 3));
}

TEST(PeerFailureCache, FullTableEvictsTheLeastRecentlyUsed) {
  PeerFailureCache cache(3, 1000);
  const Addr a = v4("10.0.0.1", 1), b = v4("10.0.0.1", 2), c = v4("10.0.0.1", 3), d = v4("10.0.0.1", 4);
  cache.record_failure(a.sa(), a.len, 0);
  cache.record_failure(b.sa(), b.len, 0);
  cache.record_failure(c.sa(), c.len, 0);
  EXPECT_TRUE(cache.should_skip(a.sa(), a.len, 1));  // a is now the most recent; b the least
  cache.record_failure(d.sa(), d.len, 2);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.counters().evicted, 1u);
  EXPECT_FALSE(cache.should_skip(b.sa(), b.len, 3));
  EXPECT_TRUE(cache.should_skip(a.sa(), a.len, 3));
  EXPECT_TRUE(cache.should_skip(c.sa(), c.len, 3));
  EXPECT_TRUE(cache.should_skip(d.sa(), d.len, 3));
}

TEST(PeerFailureCache, FullTableDropsAnExpiredEntryFirst) {
  PeerFailureCache cache(2, 100);
  const Addr a = v4("10.0.0.1", 1), b = v4("10.0.0.1", 2), c = v4("10.0.0.1", 3);
  cache.record_failure(a.sa(), a.len, 0);
  cache.record_failure(b.sa(), b.len, 50);
  EXPECT_TRUE(cache.should_skip(a.sa(), a.len, 60));  // a is most recent, but expires at 100
  cache.record_failure(c.sa(), c.len, 120);
  EXPECT_EQ(cache.counters().evicted, 0u);
  EXPECT_EQ(cache.counters().expired, 1u);
  EXPECT_TRUE(cache.should_skip(b.sa(), b.len, 121));
  EXPECT_TRUE(cache.should_skip(c.sa(), c.len, 121));
}

TEST(PeerFailureCache, Forget) {
  PeerFailureCache cache(8, 100);
  const Addr peer = v4("10.0.0.2", 5000);
  cache.record_failure(peer.sa(), peer.len, 0);
  EXPECT_TRUE(cache.forget(peer.sa(), peer.len));
  EXPECT_FALSE(cache.forget(peer.sa(), peer.len));
  EXPECT_FALSE(cache.should_skip(peer.sa(), peer.len, 1));
}

TEST(PeerFailureCache, DisabledByZeroTtlOrCapacity) {
  const Addr peer = v4("10.0.0.2", 5000);
  for (PeerFailureCache cache : {PeerFailureCache(8, 0), PeerFailureCache(0, 100)}) {
    EXPECT_FALSE(cache.record_failure(peer.sa(), peer.len, 0));
    EXPECT_FALSE(cache.should_skip(peer.sa(), peer.len, 0));
    EXPECT_EQ(cache.size(), 0u);
  }
}

TEST(PeerFailureCache, UnreadableAddressesAreMisses) {
  PeerFailureCache cache(8, 100);
  sockaddr_storage unix_addr{};
  unix_addr.ss_family = AF_UNIX;
  const sockaddr* sa = reinterpret_cast<const sockaddr*>(&unix_addr);
  EXPECT_FALSE(cache.record_failure(sa, sizeof unix_addr, 0));
  EXPECT_FALSE(cache.record_failure(nullptr, 0, 0));
  EXPECT_FALSE(cache.should_skip(sa, sizeof unix_addr, 0));
  EXPECT_FALSE(cache.forget(sa, sizeof unix_addr));
  EXPECT_EQ(cache.counters().misses, 1u);
}

TEST(PeerFailureCache, AClockGoingBackwardsKeepsTheEntry) {
  PeerFailureCache cache(8, 100);
  const Addr peer = v4("10.0.0.2", 5000);
  cache.record_failure(peer.sa(), peer.len, 1000);
  EXPECT_TRUE(cache.should_skip(peer.sa(), peer.len, 10));
}

}  // namespace
}  // namespace vsock::sock
