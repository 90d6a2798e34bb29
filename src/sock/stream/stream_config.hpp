// StreamConfig: the tunables of one StreamChannel, normally taken from the
// profile's core::Settings; tests set them directly (small rings and
// queues exercise credit, wrap-around and full queues hard).
#pragma once
#include <cstdint>

#include "core/settings.hpp"

namespace vsock::sock {

struct StreamConfig {
  // This side's receive ring (what the peer may have in flight): a power of
  // two, a whole number of pages.
  uint64_t ring_size = 2u << 20;
  // What the ring starts at (0: ring_size). While the peer's writes fill it
  // past half, it grows x4 up to ring_size (docs/protocol.md §3.1).
  uint64_t ring_initial = 0;
  uint32_t sq_depth = 256;     // send queue work requests
  uint32_t rq_depth = 256;     // zero-length receives kept posted for immediates
  uint32_t inline_size = 128;  // writes up to this size go inline (capped by the device)
  uint32_t signal_every = 16;  // a signalled completion at least every N sends
  // Hold small writes while a completion is pending: always (autocork), or
  // unless the socket has TCP_NODELAY (nagle). set_coalescing() applies it.
  bool autocork = false;
  bool nagle = false;
  // Largest single RDMA write (a large write() becomes several, so the wire
  // starts before the copy ends). Also capped at what an immediate carries.
  uint32_t max_segment = 256u << 10;
  // With autocork: flush once this much is held (0: a quarter of the peer's
  // ring, at most max_segment).
  uint32_t cork_bytes = 0;
  // While coalescing: small writes within this long of the last DATA post
  // gather (0: only while a completion is pending).
  uint32_t cork_window_us = 200;
  // Completion moderation of the channel's CQ (0 / 0: none); ignored, with
  // one log line, on devices without it.
  uint32_t cq_mod_count = 0;
  uint32_t cq_mod_us = 0;
  // The largest ring a peer may declare: the send buffer that mirrors it is
  // registered here, so the peer must not choose its size freely (never
  // above StreamChannel::kMaxPeerRing).
  uint64_t max_peer_ring = 8u << 20;
  // The process's budget of registered memory for connections, bytes (0:
  // no limit; rdma/memory_budget.hpp).
  uint64_t memory_budget = 0;

  static StreamConfig from_settings(const core::Settings& settings);
};

}  // namespace vsock::sock
