// OwedAnnouncements (src/sock/dgram/owed_announcements.hpp): which sockets
// owe a destination an ANNOUNCE once its resolution ends — one record per
// socket and destination, handed out once, bounded per destination and in
// destinations, never for a group, broadcast or any address.
#include "sock/dgram/owed_announcements.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <vector>

namespace vsock::sock::dgram {
namespace {

PathKey v4(const char* ip, uint16_t port) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  inet_pton(AF_INET, ip, &in.sin_addr);
  PathKey key;
  EXPECT_TRUE(path_key_of(reinterpret_cast<sockaddr*>(&in), sizeof in, &key));
  return key;
}

PathKey v6(const char* ip, uint16_t port) {
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(port);
  inet_pton(AF_INET6, ip, &in6.sin6_addr);
  PathKey key;
  EXPECT_TRUE(path_key_of(reinterpret_cast<sockaddr*>(&in6), sizeof in6, &key));
  return key;
}

TEST(OwedAnnouncements, EachSocketOnceThenHandedOutOnceInOrder) {
  OwedAnnouncements owed;
  const PathKey server = v4("192.168.77.1", 5201);
  EXPECT_TRUE(owed.owe(server, OwedSocket{40000, 0xA}));
  EXPECT_TRUE(owed.owe(server, OwedSocket{40001, 0xB}));
  // The same socket sending again while the resolution runs: still one.
  EXPECT_TRUE(owed.owe(server, OwedSocket{40000, 0xA}));
  EXPECT_EQ(owed.destinations(), 1u);
  // Another destination (another port of the same address) is its own.
  const PathKey other = v4("192.168.77.1", 5202);
  EXPECT_TRUE(owed.owe(other, OwedSocket{40000, 0xA}));
  EXPECT_EQ(owed.destinations(), 2u);

  std::vector<OwedSocket> taken = owed.take(server);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0], (OwedSocket{40000, 0xA}));
  EXPECT_EQ(taken[1], (OwedSocket{40001, 0xB}));
  EXPECT_TRUE(owed.take(server).empty());  // once: the next resolution owes nothing
  EXPECT_EQ(owed.destinations(), 1u);
  EXPECT_EQ(owed.take(other).size(), 1u);
  EXPECT_EQ(owed.destinations(), 0u);
  EXPECT_TRUE(owed.take(v4("10.0.0.1", 1)).empty());  // never recorded
}

TEST(OwedAnnouncements, NoSocketPastTheBoundOfADestination) {
  OwedAnnouncements owed;
  const PathKey server = v4("192.168.77.1", 53);
  for (uint64_t i = 1; i <= OwedAnnouncements::kMaxSocketsPerDestination; ++i)
    EXPECT_TRUE(owed.owe(server, OwedSocket{static_cast<uint16_t>(30000 + i), i}));
  EXPECT_FALSE(owed.owe(server, OwedSocket{39999, 0xFFFF}));
  // One already recorded is still recorded.
  EXPECT_TRUE(owed.owe(server, OwedSocket{30001, 1}));
  EXPECT_EQ(owed.take(server).size(), OwedAnnouncements::kMaxSocketsPerDestination);
  // Taken: room again for the next resolution.
  EXPECT_TRUE(owed.owe(server, OwedSocket{39999, 0xFFFF}));
}

TEST(OwedAnnouncements, NoDestinationPastTheBound) {
  OwedAnnouncements owed;
  for (size_t i = 0; i < OwedAnnouncements::kMaxDestinations; ++i)
    ASSERT_TRUE(owed.owe(v4("192.168.77.1", static_cast<uint16_t>(1 + i)), OwedSocket{40000, 0xA}));
  const PathKey one_more = v4("192.168.77.2", 1);
  EXPECT_FALSE(owed.owe(one_more, OwedSocket{40000, 0xA}));
  EXPECT_EQ(owed.destinations(), OwedAnnouncements::kMaxDestinations);
  // A destination already recorded takes more sockets.
  EXPECT_TRUE(owed.owe(v4("192.168.77.1", 1), OwedSocket{40001, 0xB}));
  EXPECT_EQ(owed.take(v4("192.168.77.1", 1)).size(), 2u);
  EXPECT_TRUE(owed.owe(one_more, OwedSocket{40000, 0xA}));
}

TEST(OwedAnnouncements, NeverAGroupBroadcastOrAnyAddress) {
  OwedAnnouncements owed;
  const OwedSocket socket{40000, 0xA};
  EXPECT_FALSE(owed.owe(v4("239.1.2.3", 5000), socket));
  EXPECT_FALSE(owed.owe(v4("224.0.0.251", 5353), socket));
  EXPECT_FALSE(owed.owe(v4("255.255.255.255", 67), socket));
  EXPECT_FALSE(owed.owe(v4("0.0.0.0", 9), socket));
  EXPECT_FALSE(owed.owe(v6("ff02::fb", 5353), socket));
  EXPECT_EQ(owed.destinations(), 0u);
  EXPECT_TRUE(owed.owe(v4("223.255.255.255", 9), socket));  // just below 224/4
  EXPECT_TRUE(owed.owe(v4("240.0.0.1", 9), socket));        // just above it
  EXPECT_TRUE(owed.owe(v6("2001:db8::7", 9), socket));
  EXPECT_EQ(owed.destinations(), 3u);
}

TEST(OwedAnnouncements, NeedsAPortAndACookie) {
  OwedAnnouncements owed;
  const PathKey server = v4("192.168.77.1", 5201);
  EXPECT_FALSE(owed.owe(server, OwedSocket{0, 0xA}));     // a control message names its source port
  EXPECT_FALSE(owed.owe(server, OwedSocket{40000, 0}));   // 0 is no socket's cookie
  EXPECT_EQ(owed.destinations(), 0u);
}

}  // namespace
}  // namespace vsock::sock::dgram
