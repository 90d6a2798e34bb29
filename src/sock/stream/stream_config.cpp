#include "sock/stream/stream_config.hpp"

namespace vsock::sock {

StreamConfig StreamConfig::from_settings(const core::Settings& settings) {
  StreamConfig config;
  config.ring_size = settings.ring_size;
  config.ring_initial = settings.ring_initial_size < settings.ring_size ? settings.ring_initial_size : 0;
  config.sq_depth = settings.sq_depth;
  config.rq_depth = settings.rq_depth;
  config.inline_size = settings.inline_size;
  config.signal_every = settings.signal_every;
  config.autocork = settings.autocork;
  config.nagle = settings.nagle;
  config.cq_mod_count = settings.cq_mod_count;
  config.cq_mod_us = settings.cq_mod_us;
  const uint64_t largest = core::largest_profile_ring_size();
  config.max_peer_ring = settings.ring_size > largest ? settings.ring_size : largest;
  config.memory_budget = uint64_t{settings.memory_budget_mib} << 20;
  return config;
}

}  // namespace vsock::sock
