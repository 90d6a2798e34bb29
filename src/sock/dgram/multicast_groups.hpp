// MulticastGroups: which sockets of the process are members of which
// offloaded IPv4 groups, and so who gets a group datagram that came over
// UD (pure: no device, no system call; unit-tested). The multicast
// offload (multicast_offload.*) keeps one, under its lock.
//
// It mirrors what the kernel already accepted (the entry point calls the
// real setsockopt() first), so a call here that makes no sense (a leave
// without a join) is ignored rather than refused.
//
// Membership, as Linux keeps it per socket and group: an any-source join
// (IP_ADD_MEMBERSHIP, MCAST_JOIN_GROUP) is EXCLUDE mode with no source,
// narrowed by blocks (IP_BLOCK_SOURCE); a source-specific join
// (IP_ADD_SOURCE_MEMBERSHIP) is INCLUDE mode, one source per join, and the
// membership ends with its last source. The process is a member of a
// group while at least one socket is (the count join/leave report, so the
// caller joins with rdma_cm on the first and leaves on the last).
//
// Delivery, as the kernel's __udp4_lib_mcast_deliver() and
// ip_mc_sf_allow(): a datagram to group G, port P, from source S goes to
// every socket bound to port P whose bound address is the wildcard or G,
// and that either is a member of G whose filter lets S through, or is no
// member of G and has IP_MULTICAST_ALL on (the default). Nothing is
// delivered for a group the process is not a member of.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <vector>

namespace vsock::sock::dgram {

class MulticastGroups {
 public:
  // What a membership change did to the process's membership of the group.
  enum class Change {
    kNone,          // nothing: the process was and stays a member (or not)
    kFirstMember,   // the process is now a member (it was not): join
    kLastMemberLeft // the process is no longer a member: leave
  };

  // The socket `cookie` is bound to `port`, on `address` (IPv4, host
  // order, 0 for the wildcard), or to an address no IPv4 group datagram
  // reaches (an IPv6 one other than ::): then reaches_ipv4 is false.
  void bound(uint64_t cookie, uint16_t port, uint32_t address, bool reaches_ipv4);
  void set_multicast_all(uint64_t cookie, bool on);

  // Groups and sources are IPv4 host order; source 0 means any source.
  Change join(uint64_t cookie, uint32_t group, uint32_t source);
  Change leave(uint64_t cookie, uint32_t group, uint32_t source);
  // Exclude-mode filters of an any-source membership.
  void block(uint64_t cookie, uint32_t group, uint32_t source);
  void unblock(uint64_t cookie, uint32_t group, uint32_t source);

  // IP_MSFILTER / MCAST_MSFILTER: the whole filter of a membership the
  // socket has (none: nothing). INCLUDE with no source ends it, as Linux.
  Change set_filter(uint64_t cookie, uint32_t group, bool include, const std::vector<uint32_t>& sources);

  // The socket is gone (closed, left UD): the groups the process left
  // with it.
  std::vector<uint32_t> forget(uint64_t cookie);

  bool is_member(uint32_t group) const;
  // Whether `cookie` itself is a member of `group`.
  bool socket_is_member(uint64_t cookie, uint32_t group) const;
  // The sockets a datagram to group:port from `source` goes to, in cookie order.
  std::vector<uint64_t> receivers(uint32_t group, uint32_t source, uint16_t port) const;

 private:
  struct Membership {
    bool include = false;          // INCLUDE mode (source-specific) or EXCLUDE
    std::set<uint32_t> sources;    // included, or blocked
  };
  struct Socket {
    bool bound = false;
    uint16_t port = 0;
    uint32_t address = 0;
    bool reaches_ipv4 = true;
    bool multicast_all = true;
    std::map<uint32_t, Membership> groups;
  };
  Change count_join(uint32_t group);
  Change count_leave(uint32_t group);
  static bool filter_allows(const Membership& membership, uint32_t source);

  std::map<uint64_t, Socket> sockets_;
  std::map<uint32_t, uint32_t> members_;  // group -> sockets that are members
};

}  // namespace vsock::sock::dgram
