// PeerFailureCache: peers (address + port) whose upgrade failed recently
// (rejected, no listener, unreachable, timed out: UpgradeState::
// remember_peer), so the next connect() to them stays on TCP at once
// instead of waiting for the same outcome again (DESIGN decision 2).
//
// An entry lives for `ttl_ms` from the failure (peer_fail_cache_s): a
// lookup does not extend it, so a peer that starts running libvsock is
// tried again after at most that long. The table holds at most `capacity`
// peers; a new one when full evicts the least recently used. Addresses are
// compared in canonical form (IPv4-mapped = IPv4). Time is passed in.
// Not thread-safe: the caller holds a lock around it.
#pragma once
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sock/wire/endpoint.hpp"

namespace vsock::sock {

struct PeerFailureCounters {
  uint64_t hits = 0;         // lookups that found a live entry: a connect spared
  uint64_t misses = 0;       // lookups that found none (or an expired one)
  uint64_t recorded = 0;     // failures recorded (new or refreshed)
  uint64_t evicted = 0;      // entries pushed out by a full table
  uint64_t expired = 0;      // entries found past their time
};

class PeerFailureCache {
 public:
  // capacity 0 or ttl_ms 0 disables the cache: nothing is remembered.
  PeerFailureCache(size_t capacity, uint64_t ttl_ms);

  // The upgrade to `peer` failed at now_ms. Restarts its time if present.
  // False (nothing recorded) for a sockaddr that cannot be read.
  bool record_failure(const sockaddr* peer, socklen_t len, uint64_t now_ms);
  // Whether a connect to `peer` should skip the upgrade. Counts a hit or a
  // miss; a hit makes the entry the most recently used.
  bool should_skip(const sockaddr* peer, socklen_t len, uint64_t now_ms);
  // The peer upgraded after all (e.g. an attempt made anyway): forget it.
  bool forget(const sockaddr* peer, socklen_t len);

  size_t size() const { return entries_.size(); }
  size_t capacity() const { return capacity_; }
  const PeerFailureCounters& counters() const { return counters_; }

 private:
  struct Entry {
    wire::FamilyEndpoint peer;
    uint64_t failed_ms;
    uint64_t last_used;  // a use stamp for LRU order
  };

  // Index of the entry for `peer`, or -1.
  long find(const wire::FamilyEndpoint& peer) const;
  bool live(const Entry& entry, uint64_t now_ms) const;
  void erase(size_t index);

  size_t capacity_;
  uint64_t ttl_ms_;
  uint64_t use_clock_ = 0;
  // Linear scans: the table is small (a process talks to few peers that
  // refuse it) and a lookup happens once per connect().
  std::vector<Entry> entries_;
  PeerFailureCounters counters_;
};

}  // namespace vsock::sock
