#include "core/setting_text.hpp"

namespace vsock::core {
namespace {

const char* mode_text(OffloadMode mode) { return mode == OffloadMode::kKernel ? "kernel" : "offload"; }
const char* bool_text(bool value) { return value ? "on" : "off"; }

}  // namespace

std::string setting_text(const Settings& s, std::string_view name) {
  if (name == "profile") return profile_name(s.profile);
  if (name == "log_level") return log_level_name(s.log_level);
  if (name == "log_file") return s.log_file.empty() ? "stderr" : s.log_file;
  if (name == "stats") return bool_text(s.stats);
  if (name == "stats_shm") return bool_text(s.stats_shm);
  if (name == "spin_adapt") return bool_text(s.spin_adapt);
  if (name == "park_channels") return bool_text(s.park_channels);
  if (name == "park_max") return std::to_string(s.park_max);
  if (name == "park_per_peer") return std::to_string(s.park_per_peer);
  if (name == "device") return s.device;
  if (name == "tcp") return mode_text(s.tcp);
  if (name == "udp") return mode_text(s.udp);
  if (name == "spin_us") return std::to_string(s.spin_us);
  if (name == "inline_size") return std::to_string(s.inline_size);
  if (name == "ring_size") return std::to_string(s.ring_size);
  if (name == "ring_initial_size") return std::to_string(s.ring_initial_size);
  if (name == "sq_depth") return std::to_string(s.sq_depth);
  if (name == "rq_depth") return std::to_string(s.rq_depth);
  if (name == "signal_every") return std::to_string(s.signal_every);
  if (name == "autocork") return bool_text(s.autocork);
  if (name == "nagle") return bool_text(s.nagle);
  if (name == "cq_mod_count") return std::to_string(s.cq_mod_count);
  if (name == "cq_mod_us") return std::to_string(s.cq_mod_us);
  if (name == "upgrade_timeout_ms") return std::to_string(s.upgrade_timeout_ms);
  if (name == "peer_fail_cache_s") return std::to_string(s.peer_fail_cache_s);
  if (name == "memory_budget_mib") return std::to_string(s.memory_budget_mib);
  if (name == "udp_receive_buffers") return std::to_string(s.udp_receive_buffers);
  if (name == "udp_progress_us") return std::to_string(s.udp_progress_us);
  if (name == "epoll_sweep_ms") return std::to_string(s.epoll_sweep_ms);
  if (name == "udp_mcast_offload") return multicast_prefixes_text(s.udp_mcast_offload);
  return "";
}

}  // namespace vsock::core
