// RLIMIT_MEMLOCK against the memory one upgraded connection pins with the
// effective settings (receive ring, send buffer, control slots, queues).
#pragma once
#include <cstdint>
#include <string>

#include "core/settings.hpp"

namespace vsock::info {

struct MemlockCheck {
  uint64_t per_connection = 0;  // bytes pinned by one connection (estimate)
  uint64_t per_connection_max = 0;  // ... when the peer declares the largest ring we accept
  uint64_t limit = 0;           // soft RLIMIT_MEMLOCK, bytes
  bool unlimited = false;       // RLIM_INFINITY
  bool cap_ipc_lock = false;    // the limit is not enforced for this process
  bool enough = false;          // at least one connection fits
  uint64_t connections = 0;     // how many fit (when limited)
};

// Bytes one connection registers with these settings: its receive ring, a
// send buffer as large as the peer's ring (`peer_ring` bytes), the
// control-message slots, and the provider's queue and CQ buffers.
uint64_t memlock_per_connection(const core::Settings& settings, uint64_t peer_ring);

MemlockCheck check_memlock(const core::Settings& settings);
void print_memlock(const MemlockCheck& check, const core::Settings& settings);

}  // namespace vsock::info
