// SharedFailureTable: peers that do not run libvsock, remembered for every
// process of this user on this host (docs/protocol.md §1, "Failure
// memory"). The engine's PeerFailureCache is per process, so each new
// process paid a failed upgrade (device open, side-band thread, an rdma_cm
// round trip) before it knew a plain server; with this table a process
// that connects to a peer another process found plain within
// peer_fail_cache_s stays on TCP at once, without opening the device.
//
// Only answers from the peer's host that say "no libvsock there" are
// shared (no rdma_cm listener, a reject as a whole); a timeout or an
// unreachable peer is not (a busy host, a server slow to start, a link
// down for a moment: no plain server).
//
// The table is a fixed array of slots in shared memory (the mapping is
// shared_peer_failures.*; this part is pure and unit-tested on ordinary
// memory). A peer's slots are kProbe slots from its hash. Each slot is a
// sequence lock: a writer makes the sequence odd (compare-and-swap, so two
// writers never mix; the loser drops its write: a failure not shared costs
// one more attempt), writes, and makes it even again; a reader that sees an
// odd or changed sequence takes the slot as empty. Every field is an
// atomic, so a torn read is detected, never undefined. Times are
// CLOCK_MONOTONIC milliseconds, the same in every process of the boot.
#pragma once
#include <atomic>
#include <cstdint>

#include "sock/wire/endpoint.hpp"

namespace vsock::sock {

struct SharedFailureSlot {
  std::atomic<uint32_t> sequence;  // odd while written
  std::atomic<uint32_t> family_port;  // family << 16 | port; 0: empty
  std::atomic<uint64_t> ip_high;
  std::atomic<uint64_t> ip_low;
  std::atomic<int64_t> failed_ms;
};

struct SharedFailureMemory {
  static constexpr uint64_t kMagic = 0x5653'4B50'4545'5231;  // "VSKPEER1"
  static constexpr uint32_t kSlots = 1024;
  std::atomic<uint64_t> magic;
  uint32_t size;
  uint32_t slots;
  SharedFailureSlot slot[kSlots];
};

class SharedFailureTable {
 public:
  static constexpr uint32_t kProbe = 8;

  // Over `memory`, zeroed by its maker and then init()ed.
  explicit SharedFailureTable(SharedFailureMemory* memory) : memory_(memory) {}
  static void init(SharedFailureMemory* memory);
  // Whether `memory` has this layout (another version's is not read).
  static bool valid(const SharedFailureMemory* memory);

  // The upgrade to `peer` found no libvsock there at now_ms.
  void record(const wire::FamilyEndpoint& peer, int64_t now_ms, int64_t ttl_ms);
  // Whether a process recorded `peer` less than ttl_ms before now_ms.
  bool failed_recently(const wire::FamilyEndpoint& peer, int64_t now_ms, int64_t ttl_ms) const;
  // `peer` upgraded after all: its record goes.
  void forget(const wire::FamilyEndpoint& peer);

 private:
  struct Snapshot {
    uint32_t family_port = 0;
    uint64_t ip_high = 0, ip_low = 0;
    int64_t failed_ms = 0;
    bool same_peer(const Snapshot& other) const;
  };
  static Snapshot snapshot_of(const wire::FamilyEndpoint& peer, int64_t failed_ms);
  // A consistent copy of slot i; false while it is being written.
  bool read(uint32_t i, Snapshot* out) const;
  // Writes slot i if no other writer holds it; false otherwise.
  bool write(uint32_t i, const Snapshot& value);
  uint32_t first_slot(const Snapshot& key) const;

  SharedFailureMemory* memory_;
};

}  // namespace vsock::sock
