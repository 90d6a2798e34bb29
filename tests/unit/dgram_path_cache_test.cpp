// PathCache (src/sock/dgram/path_cache.hpp): what the process knows of UDP
// destinations — resolved, resolving, failed for a while, learnt from an
// arrival, revoked. Address handles are empty here (no device).
#include "sock/dgram/path_cache.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

namespace vsock::sock::dgram {
namespace {

PathKey key_of(const char* ip, uint16_t port) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  inet_pton(AF_INET, ip, &in.sin_addr);
  PathKey key;
  EXPECT_TRUE(path_key_of(reinterpret_cast<sockaddr*>(&in), sizeof in, &key));
  return key;
}

// A stand-in address handle: the cache only stores and hands it out.
ibv_ah* fake_handle() { return reinterpret_cast<ibv_ah*>(0x1000); }

TEST(PathCache, AnIpv4AddressAndItsMappedIpv6FormAreOneKey) {
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(53);
  inet_pton(AF_INET6, "::ffff:192.168.77.1", &in6.sin6_addr);
  PathKey mapped;
  ASSERT_TRUE(path_key_of(reinterpret_cast<sockaddr*>(&in6), sizeof in6, &mapped));
  EXPECT_EQ(mapped, key_of("192.168.77.1", 53));
  EXPECT_FALSE(mapped == key_of("192.168.77.1", 54));
  EXPECT_FALSE(mapped == key_of("192.168.77.2", 53));
  sockaddr other{};
  other.sa_family = AF_UNIX;
  PathKey none;
  EXPECT_FALSE(path_key_of(&other, sizeof other, &none));
  EXPECT_FALSE(path_key_of(reinterpret_cast<sockaddr*>(&in6), sizeof(sockaddr_in) - 1, &none));
}

TEST(PathCache, OneResolutionAtATimeThenThePath) {
  PathCache cache;
  PathKey key = key_of("192.168.77.1", 7000);
  UdPath path;
  EXPECT_EQ(cache.find(key, 0, &path), PathLookup::kUnknown);
  EXPECT_TRUE(cache.begin_resolution(key, 0));
  EXPECT_FALSE(cache.begin_resolution(key, 1));  // under way
  EXPECT_EQ(cache.find(key, 1, &path), PathLookup::kResolving);
  cache.resolved(key, fake_handle(), 42, 0xC00C1E);
  ASSERT_EQ(cache.find(key, 2, &path), PathLookup::kResolved);
  EXPECT_EQ(path.qpn, 42u);
  EXPECT_EQ(path.cookie, 0xC00C1Eu);
  EXPECT_FALSE(cache.begin_resolution(key, 3));  // nothing to resolve
}

TEST(PathCache, AFailureKeepsTheDestinationOnTheKernelForItsTime) {
  PathCache cache;
  cache.set_failure_hold_ms(1000);
  PathKey key = key_of("192.168.77.9", 9);
  UdPath path;
  ASSERT_TRUE(cache.begin_resolution(key, 100));
  cache.failed(key, 100);
  EXPECT_EQ(cache.find(key, 500, &path), PathLookup::kFailed);
  EXPECT_FALSE(cache.begin_resolution(key, 1099));
  EXPECT_EQ(cache.find(key, 1100, &path), PathLookup::kUnknown);  // forgotten at this look
  EXPECT_TRUE(cache.begin_resolution(key, 1100));
}

TEST(PathCache, FailuresInARowHoldTwiceAsLongUpToTheLongestHold) {
  PathCache cache;
  cache.set_failure_hold_ms(5000);
  PathKey key = key_of("192.168.77.9", 9);
  UdPath path;
  int64_t now = 0;
  // 1 s, 2 s, 4 s, then the longest hold (5 s) however many more fail.
  for (int64_t hold : {1000, 2000, 4000, 5000, 5000}) {
    ASSERT_TRUE(cache.begin_resolution(key, now)) << "hold " << hold;
    cache.failed(key, now);
    EXPECT_FALSE(cache.begin_resolution(key, now + hold - 1)) << "hold " << hold;
    EXPECT_EQ(cache.find(key, now + hold - 1, &path), PathLookup::kFailed);
    now += hold;
    EXPECT_EQ(cache.find(key, now, &path), PathLookup::kUnknown) << "hold " << hold;
  }
  // A path learnt, then revoked, starts the count again.
  ASSERT_TRUE(cache.begin_resolution(key, now));
  cache.resolved(key, fake_handle(), 5, 0x5);
  cache.revoke(key, 0x5);
  ASSERT_TRUE(cache.begin_resolution(key, now));
  cache.failed(key, now);
  EXPECT_EQ(cache.find(key, now + 999, &path), PathLookup::kFailed);
  EXPECT_EQ(cache.find(key, now + 1000, &path), PathLookup::kUnknown);
}

TEST(PathCache, AnArrivalTeachesThePathBackOnlyWhenItIsNew) {
  PathCache cache;
  PathKey key = key_of("192.168.77.1", 5000);
  EXPECT_TRUE(cache.needs_learning(key, 7, 0x1111));
  cache.resolved(key, fake_handle(), 7, 0x1111);
  EXPECT_FALSE(cache.needs_learning(key, 7, 0x1111));
  EXPECT_TRUE(cache.needs_learning(key, 7, 0x2222));  // another socket on that port now
  EXPECT_TRUE(cache.needs_learning(key, 8, 0x1111));  // another process
  // A path learnt while a resolution failed is not undone by the failure.
  cache.failed(key, 10);
  UdPath path;
  EXPECT_EQ(cache.find(key, 10, &path), PathLookup::kResolved);
}

TEST(PathCache, RevokeForgetsOnlyThatSocketsPath) {
  PathCache cache;
  PathKey key = key_of("192.168.77.1", 6000);
  cache.resolved(key, fake_handle(), 3, 0xAAAA);
  UdPath path;
  cache.revoke(key, 0xBBBB);  // another socket's: not this path
  EXPECT_EQ(cache.find(key, 0, &path), PathLookup::kResolved);
  cache.revoke(key, 0xAAAA);
  EXPECT_EQ(cache.find(key, 0, &path), PathLookup::kUnknown);
  EXPECT_TRUE(cache.begin_resolution(key, 0));  // the next datagram resolves again
}

TEST(PathCache, OneHandlePerAddressWhateverThePortOrSocket) {
  PathCache cache;
  PathKey a = key_of("192.168.77.1", 1000), b = key_of("192.168.77.1", 2000), c = key_of("192.168.77.2", 1000);
  // Empty AddressHandles stand in (no device): what counts is how many
  // addresses hold one.
  cache.keep_handle(a, std::make_unique<rdma::AddressHandle>());
  EXPECT_EQ(cache.handle_count(), 1u);
  cache.keep_handle(b, std::make_unique<rdma::AddressHandle>());  // same address, another port: the first stays
  EXPECT_EQ(cache.handle_count(), 1u);
  cache.keep_handle(c, std::make_unique<rdma::AddressHandle>());
  EXPECT_EQ(cache.handle_count(), 2u);
}

}  // namespace
}  // namespace vsock::sock::dgram
