// OwedAnnouncements: which sockets owe a destination an ANNOUNCE
// (docs/protocol.md §6). A socket whose datagram to a destination went
// through the kernel because that destination's resolution was under way
// may never send to it again (iperf3 --bidir's receiving stream sends one
// hello, then only receives). Its peer then has no UD path back: its own
// resolution of the socket's port fails when the socket does not listen
// there (an ephemeral port), and the peer's replies would stay on the
// kernel. So the hub records the socket here, and once the resolution
// succeeds it sends one ANNOUNCE from the socket, which teaches the peer
// the path back as a DATA would.
//
// Bounded, as everything a sending application can grow: at most
// kMaxSocketsPerDestination sockets per destination and kMaxDestinations
// destinations; past either, nothing more is recorded (that socket's peer
// answers through the kernel, as before). A socket is recorded once per
// destination however many datagrams it sends meanwhile. Multicast,
// broadcast and any addresses are never recorded (a group learns no path
// back from one member's announcement).
//
// Not thread-safe: the hub's lock.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "sock/dgram/path_cache.hpp"

namespace vsock::sock::dgram {

// A socket that owes an announcement: its bound port and its cookie.
struct OwedSocket {
  uint16_t port = 0;
  uint64_t cookie = 0;
  bool operator==(const OwedSocket& other) const { return port == other.port && cookie == other.cookie; }
};

class OwedAnnouncements {
 public:
  static constexpr size_t kMaxSocketsPerDestination = 8;
  static constexpr size_t kMaxDestinations = 4096;

  // Records that `socket` owes `destination` an announcement. False when
  // it is not recorded: a port or cookie of 0, a destination that is not
  // unicast, or no room; true if it is (or already was).
  bool owe(const PathKey& destination, const OwedSocket& socket);
  // The sockets that owe `destination`, in the order they were recorded;
  // the destination is forgotten.
  std::vector<OwedSocket> take(const PathKey& destination);
  // Destinations with sockets recorded.
  size_t destinations() const { return owed_.size(); }

 private:
  std::map<PathKey, std::vector<OwedSocket>> owed_;
};

}  // namespace vsock::sock::dgram
