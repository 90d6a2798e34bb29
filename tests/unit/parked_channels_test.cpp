// ParkedChannels (src/sock/upgrade/parked_channels.*): the bounds on
// parked channels (in all, per peer address, in time) and which one a
// connecting client takes, and the gauge parked_now. Bookkeeping only: the
// entries hold no channel.
#include <gtest/gtest.h>

#include <cstring>

#include "core/stats.hpp"
#include "sock/upgrade/parked_channels.hpp"

namespace vsock::sock::side_band {
namespace {

wire::FamilyEndpoint v4(uint8_t last, uint16_t port) {
  wire::FamilyEndpoint e;
  e.family = wire::kFamilyIpv4;
  const uint8_t ip[4] = {10, 0, 0, last};
  std::memcpy(e.endpoint.ip, ip, sizeof ip);
  e.endpoint.port = port;
  return e;
}

std::unique_ptr<ParkedChannel> entry(const wire::FamilyEndpoint& peer, bool client, bool ready, int64_t since) {
  auto parked = std::make_unique<ParkedChannel>();
  parked->peer = peer;
  parked->client = client;
  parked->ready = ready;
  parked->since_ms = since;
  return parked;
}

// The defaults of park_max and park_per_peer.
constexpr size_t kMaxParked = 32;
constexpr size_t kMaxPerPeer = 8;

TEST(ParkedChannels, BoundedPerPeerAddressAndInAll) {
  ParkedChannels parked(kMaxParked, kMaxPerPeer);
  for (size_t i = 0; i < kMaxPerPeer; ++i) {
    ASSERT_TRUE(parked.has_room(v4(1, static_cast<uint16_t>(80 + i))));
    parked.add(entry(v4(1, static_cast<uint16_t>(80 + i)), true, true, 0));
  }
  EXPECT_FALSE(parked.has_room(v4(1, 9999))) << "the port does not make another peer";
  EXPECT_TRUE(parked.has_room(v4(2, 80)));
  for (uint8_t host = 2; parked.size() < kMaxParked; ++host)
    for (size_t i = 0; i < kMaxPerPeer && parked.size() < kMaxParked; ++i)
      parked.add(entry(v4(host, 80), false, true, 0));
  EXPECT_FALSE(parked.has_room(v4(200, 80)));
}

TEST(ParkedChannels, TheGaugeSaysHowManyAreParked) {
  ParkedChannels parked(kMaxParked, kMaxPerPeer);
  parked.add(entry(v4(1, 80), true, true, 0));
  parked.add(entry(v4(1, 80), true, false, 0));
  parked.add(entry(v4(2, 0), false, true, 0));
  EXPECT_EQ(core::stat_get(core::Stat::parked_now), 3u);
  parked.take_ready(v4(1, 80));
  EXPECT_EQ(core::stat_get(core::Stat::parked_now), 2u);
  parked.expire(ParkedChannels::kServerIdleMs);
  EXPECT_EQ(core::stat_get(core::Stat::parked_now), 0u);
}

TEST(ParkedChannels, TheBoundsAreTheSettings) {
  ParkedChannels parked(3, 2);
  parked.add(entry(v4(1, 80), true, true, 0));
  parked.add(entry(v4(1, 81), true, true, 0));
  EXPECT_FALSE(parked.has_room(v4(1, 82)));
  EXPECT_TRUE(parked.has_room(v4(2, 80)));
  parked.add(entry(v4(2, 80), true, true, 0));
  EXPECT_FALSE(parked.has_room(v4(3, 80)));
}

TEST(ParkedChannels, AClientTakesTheOldestReadyOneToItsServer) {
  ParkedChannels parked(kMaxParked, kMaxPerPeer);
  parked.add(entry(v4(1, 80), true, false, 0));  // its server's Park has not come
  parked.add(entry(v4(1, 81), true, true, 1));   // another port
  parked.add(entry(v4(1, 80), false, true, 2));  // a server's side
  parked.add(entry(v4(1, 80), true, true, 3));
  parked.add(entry(v4(1, 80), true, true, 4));
  std::unique_ptr<ParkedChannel> taken = parked.take_ready(v4(1, 80));
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(taken->since_ms, 3);
  EXPECT_EQ(parked.size(), 4u);
  EXPECT_EQ(parked.take_ready(v4(1, 80))->since_ms, 4);
  EXPECT_EQ(parked.take_ready(v4(1, 80)), nullptr);
}

TEST(ParkedChannels, IPv4MappedAddressesAreTheSamePeer) {
  ParkedChannels parked(kMaxParked, kMaxPerPeer);
  parked.add(entry(v4(7, 443), true, true, 0));
  wire::FamilyEndpoint mapped;
  mapped.family = wire::kFamilyIpv6;
  const uint8_t ip[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 7};
  std::memcpy(mapped.endpoint.ip, ip, sizeof ip);
  mapped.endpoint.port = 443;
  EXPECT_NE(parked.take_ready(mapped), nullptr);
}

TEST(ParkedChannels, EachSideExpiresOnItsOwnClock) {
  ParkedChannels parked(kMaxParked, kMaxPerPeer);
  parked.add(entry(v4(1, 80), true, false, 0));   // waits for Park: kParkWaitMs
  parked.add(entry(v4(1, 80), true, true, 0));    // ready, unused: kClientIdleMs
  parked.add(entry(v4(1, 0), false, true, 0));    // a server's: kServerIdleMs
  EXPECT_EQ(parked.next_expiry_ms(0), ParkedChannels::kParkWaitMs);
  EXPECT_TRUE(parked.expire(ParkedChannels::kParkWaitMs - 1).empty());
  EXPECT_EQ(parked.expire(ParkedChannels::kParkWaitMs).size(), 1u);
  EXPECT_EQ(parked.next_expiry_ms(ParkedChannels::kParkWaitMs),
            ParkedChannels::kClientIdleMs - ParkedChannels::kParkWaitMs);
  EXPECT_EQ(parked.expire(ParkedChannels::kClientIdleMs).size(), 1u);
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_FALSE(parked.at(0).client) << "the server keeps its side longest";
  EXPECT_EQ(parked.expire(ParkedChannels::kServerIdleMs).size(), 1u);
  EXPECT_EQ(parked.next_expiry_ms(0), -1);
}

}  // namespace
}  // namespace vsock::sock::side_band
