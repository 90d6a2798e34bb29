// MulticastGroups: per-socket memberships and filters, the process's member
// count per group, and which sockets a group datagram goes to (Linux's
// __udp4_lib_mcast_deliver and ip_mc_sf_allow rules).
#include "sock/dgram/multicast_groups.hpp"

#include <gtest/gtest.h>

namespace vsock::sock::dgram {
namespace {

using Change = MulticastGroups::Change;
using Cookies = std::vector<uint64_t>;

constexpr uint32_t kGroup = 0xEF010203;   // 239.1.2.3
constexpr uint32_t kOther = 0xEF010204;   // 239.1.2.4
constexpr uint32_t kSourceA = 0xC0A84D01; // 192.168.77.1
constexpr uint32_t kSourceB = 0xC0A84D02;
constexpr uint16_t kPort = 47123;

TEST(MulticastGroups, ProcessJoinsOnFirstMemberAndLeavesOnLast) {
  MulticastGroups g;
  EXPECT_EQ(g.join(1, kGroup, 0), Change::kFirstMember);
  EXPECT_EQ(g.join(2, kGroup, 0), Change::kNone);
  EXPECT_TRUE(g.is_member(kGroup));
  EXPECT_EQ(g.leave(1, kGroup, 0), Change::kNone);
  EXPECT_TRUE(g.is_member(kGroup));
  EXPECT_EQ(g.leave(2, kGroup, 0), Change::kLastMemberLeft);
  EXPECT_FALSE(g.is_member(kGroup));
  // A leave without a join, or twice, changes nothing.
  EXPECT_EQ(g.leave(2, kGroup, 0), Change::kNone);
  EXPECT_EQ(g.leave(9, kGroup, 0), Change::kNone);
}

TEST(MulticastGroups, ASecondJoinOfTheSameSocketIsNotASecondMember) {
  MulticastGroups g;
  EXPECT_EQ(g.join(1, kGroup, 0), Change::kFirstMember);
  EXPECT_EQ(g.join(1, kGroup, 0), Change::kNone);
  EXPECT_EQ(g.leave(1, kGroup, 0), Change::kLastMemberLeft);
}

TEST(MulticastGroups, ForgetLeavesEveryGroupTheSocketWasTheLastMemberOf) {
  MulticastGroups g;
  g.join(1, kGroup, 0);
  g.join(1, kOther, 0);
  g.join(2, kOther, 0);
  EXPECT_EQ(g.forget(1), std::vector<uint32_t>{kGroup});
  EXPECT_FALSE(g.is_member(kGroup));
  EXPECT_TRUE(g.is_member(kOther));
  EXPECT_EQ(g.forget(2), std::vector<uint32_t>{kOther});
  EXPECT_TRUE(g.forget(2).empty());
}

TEST(MulticastGroups, SourceSpecificMembershipEndsWithItsLastSource) {
  MulticastGroups g;
  EXPECT_EQ(g.join(1, kGroup, kSourceA), Change::kFirstMember);
  EXPECT_EQ(g.join(1, kGroup, kSourceB), Change::kNone);
  EXPECT_EQ(g.leave(1, kGroup, kSourceA), Change::kNone);
  EXPECT_TRUE(g.socket_is_member(1, kGroup));
  EXPECT_EQ(g.leave(1, kGroup, kSourceB), Change::kLastMemberLeft);
  EXPECT_FALSE(g.socket_is_member(1, kGroup));
}

TEST(MulticastGroups, NothingIsDeliveredForAGroupTheProcessIsNoMemberOf) {
  MulticastGroups g;
  g.bound(1, kPort, 0, true);
  EXPECT_TRUE(g.receivers(kGroup, kSourceA, kPort).empty());
}

TEST(MulticastGroups, MulticastAllDeliversToEverySocketBoundToThePort) {
  MulticastGroups g;
  g.bound(1, kPort, 0, true);       // joined
  g.bound(2, kPort, 0, true);       // bound, never joined: IP_MULTICAST_ALL on
  g.bound(3, kPort, 0, true);       // never joined, IP_MULTICAST_ALL off
  g.bound(4, kPort + 1, 0, true);   // another port
  g.bound(5, kPort, kGroup, true);  // bound to the group address
  g.bound(6, kPort, kSourceA, true);// bound to a unicast address: no group datagram
  g.bound(7, kPort, 0, false);      // an IPv6 socket bound to another address than ::
  g.set_multicast_all(3, false);
  g.join(1, kGroup, 0);
  EXPECT_EQ(g.receivers(kGroup, kSourceA, kPort), (Cookies{1, 2, 5}));
  EXPECT_TRUE(g.receivers(kGroup, kSourceA, kPort + 2).empty());
}

TEST(MulticastGroups, MulticastAllOffStillDeliversWhatTheSocketJoined) {
  MulticastGroups g;
  g.bound(1, kPort, 0, true);
  g.set_multicast_all(1, false);
  g.join(1, kGroup, 0);
  g.join(2, kOther, 0);  // makes the process a member of kOther
  EXPECT_EQ(g.receivers(kGroup, kSourceA, kPort), (Cookies{1}));
  EXPECT_TRUE(g.receivers(kOther, kSourceA, kPort).empty());
}

TEST(MulticastGroups, SourceFiltersDecideForMembers) {
  MulticastGroups g;
  g.bound(1, kPort, 0, true);  // any source, B blocked
  g.bound(2, kPort, 0, true);  // source-specific: A only
  g.join(1, kGroup, 0);
  g.block(1, kGroup, kSourceB);
  g.join(2, kGroup, kSourceA);
  EXPECT_EQ(g.receivers(kGroup, kSourceA, kPort), (Cookies{1, 2}));
  EXPECT_TRUE(g.receivers(kGroup, kSourceB, kPort).empty());
  g.unblock(1, kGroup, kSourceB);
  EXPECT_EQ(g.receivers(kGroup, kSourceB, kPort), (Cookies{1}));
  // A block on a source-specific membership means nothing (Linux refuses it).
  g.block(2, kGroup, kSourceA);
  EXPECT_EQ(g.receivers(kGroup, kSourceA, kPort), (Cookies{1, 2}));
}

TEST(MulticastGroups, WholeFilterReplacesTheMembershipsFilter) {
  MulticastGroups g;
  g.bound(1, kPort, 0, true);
  g.join(1, kGroup, 0);
  EXPECT_EQ(g.set_filter(1, kGroup, true, {kSourceB}), Change::kNone);
  EXPECT_TRUE(g.receivers(kGroup, kSourceA, kPort).empty());
  EXPECT_EQ(g.receivers(kGroup, kSourceB, kPort), (Cookies{1}));
  EXPECT_EQ(g.set_filter(1, kGroup, false, {kSourceB}), Change::kNone);
  EXPECT_EQ(g.receivers(kGroup, kSourceA, kPort), (Cookies{1}));
  // INCLUDE with no source ends the membership, as Linux.
  EXPECT_EQ(g.set_filter(1, kGroup, true, {}), Change::kLastMemberLeft);
  EXPECT_FALSE(g.is_member(kGroup));
  // A filter for a group the socket did not join does nothing.
  EXPECT_EQ(g.set_filter(1, kOther, true, {kSourceA}), Change::kNone);
  EXPECT_FALSE(g.socket_is_member(1, kOther));
}

}  // namespace
}  // namespace vsock::sock::dgram
