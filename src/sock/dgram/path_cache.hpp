// PathCache: what the process knows of UDP destinations (DESIGN decision
// 5): for an IP address and port, the UD path to a libvsock socket there
// (address handle, QP number, the socket's cookie), a resolution under
// way, or a recent failure that keeps datagrams to it on the kernel.
//
// Paths come from two places: a SIDR resolution (the destination's socket
// listens on its bound port), or a datagram that arrived over UD, which
// teaches the path back to its sender so that a server's replies need no
// resolution. A REVOKE (the peer's socket closed or went to another
// process) forgets a path; the next datagram goes through the kernel and
// resolves again.
//
// A failed resolution keeps the destination on the kernel for a hold that
// starts at kFirstFailureHoldMs and doubles with each failure in a row, up
// to `failure_hold_ms` (peer_fail_cache_s): a destination that is not a
// libvsock socket costs one SIDR request a minute once the hold has grown,
// while one that failed only for a moment (a busy host that answered late,
// a server still starting) is tried again within a second or two instead of
// staying on the kernel for a minute. Datagrams never wait for a resolution,
// so the retries cost only the side band's requests.
//
// An address handle depends only on the remote address, so there is one
// per address, shared by every path to it (every port, socket and process
// there). They are never destroyed while the process runs: a send posted
// through one may still be in the device's queue when its path is
// replaced. So their number is capped (kMaxHandles addresses), and so is
// the number of destinations (kMaxEntries): past either, new destinations
// stay on the kernel — a peer that makes up ports and cookies cannot grow
// this without bound.
//
// Thread-safe (one mutex; no call blocks).
#pragma once
#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rdma/address_handle.hpp"

namespace vsock::sock::dgram {

// An IP address and UDP port, as a map key (IPv4 as IPv4-mapped IPv6).
struct PathKey {
  uint8_t address[16] = {};
  uint16_t port = 0;  // host order
  bool operator<(const PathKey& other) const;
  bool operator==(const PathKey& other) const;
};
// The key of an AF_INET/AF_INET6 address; false for anything else.
bool path_key_of(const sockaddr* address, socklen_t length, PathKey* out);
// "192.0.2.1:53" or "[2001:db8::1]:53", for log lines.
std::string path_key_text(const PathKey& key);
// False for the addresses UD does not reach one to one: multicast (IPv4
// 224/4, IPv6 ff00::/8), the IPv4 broadcast and any addresses.
bool is_unicast(const PathKey& key);

struct UdPath {
  ibv_ah* ah = nullptr;
  uint32_t qpn = 0;
  uint64_t cookie = 0;  // the destination socket's
};

enum class PathLookup { kResolved, kUnknown, kResolving, kFailed };

class PathCache {
 public:
  static constexpr size_t kMaxHandles = 4096;
  static constexpr size_t kMaxEntries = 65536;

  static constexpr int64_t kFirstFailureHoldMs = 1000;

  // kResolved and *path, or where the destination stands. A failure whose
  // hold has passed reads kUnknown (resolve again) from this look on.
  PathLookup find(const PathKey& key, int64_t now_ms, UdPath* path);
  // The caller starts a resolution: true if it should (no path, none under
  // way, no recent failure), and the destination is marked as resolving.
  bool begin_resolution(const PathKey& key, int64_t now_ms);
  // The address handle kept for key's address, or null (make one, then
  // keep_handle()).
  ibv_ah* handle_for(const PathKey& key);
  // Keeps `ah` for key's address (or the one kept meanwhile); null past
  // kMaxHandles.
  ibv_ah* keep_handle(const PathKey& key, std::unique_ptr<rdma::AddressHandle> ah);
  // Addresses a handle is kept for.
  size_t handle_count();
  // A resolution ended, or an arrival taught the path: keeps it (`ah` from
  // handle_for/keep_handle), or the failure (held twice as long as the
  // one before it, when the one before it failed too). failed() returns
  // the hold in ms (0: a path was learnt meanwhile and is kept).
  void resolved(const PathKey& key, ibv_ah* ah, uint32_t qpn, uint64_t cookie);
  int64_t failed(const PathKey& key, int64_t now_ms);
  // A datagram from `key` came over UD from (qpn, cookie): true if the
  // path back is new or changed, and the caller should make a handle for
  // it and call resolved(). Known paths are left alone (no handle is made
  // per datagram); false for a path it knows fills *known, if given.
  bool needs_learning(const PathKey& key, uint32_t qpn, uint64_t cookie, UdPath* known = nullptr);
  // The socket `cookie` at `key` is gone: forget its path (if it is that
  // socket's).
  void revoke(const PathKey& key, uint64_t cookie);
  // The longest hold of a failure (the first is the shorter of this and
  // kFirstFailureHoldMs).
  void set_failure_hold_ms(int64_t ms) { failure_hold_ms_ = ms; }

 private:
  struct Entry {
    PathLookup state = PathLookup::kUnknown;
    UdPath path;
    int64_t failed_ms = 0;
    int failures = 0;  // in a row, since the last resolved path
  };
  int64_t hold_ms(const Entry& entry) const;
  std::mutex mu_;
  std::map<PathKey, Entry> entries_;
  struct AddressKey {
    uint8_t bytes[16];
    bool operator<(const AddressKey& other) const;
  };
  std::map<AddressKey, std::unique_ptr<rdma::AddressHandle>> handles_;
  int64_t failure_hold_ms_ = 60000;
};

}  // namespace vsock::sock::dgram
