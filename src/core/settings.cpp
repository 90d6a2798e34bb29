#include "core/settings.hpp"

#include <cerrno>
#include <cstdlib>

namespace vsock::core {
namespace {

bool parse_u32(std::string_view text, uint32_t min, uint32_t max, uint32_t* out, std::string* why) {
  if (text.empty() || text.size() > 10) {
    *why = "expected a number";
    return false;
  }
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      *why = "expected a number";
      return false;
    }
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  if (value < min || value > max) {
    *why = "out of range " + std::to_string(min) + ".." + std::to_string(max);
    return false;
  }
  *out = static_cast<uint32_t>(value);
  return true;
}

bool parse_bool(std::string_view text, bool* out, std::string* why) {
  if (text == "1" || text == "yes" || text == "on" || text == "true") {
    *out = true;
    return true;
  }
  if (text == "0" || text == "no" || text == "off" || text == "false") {
    *out = false;
    return true;
  }
  *why = "expected 0/1, yes/no, on/off or true/false";
  return false;
}

bool parse_mode(std::string_view text, OffloadMode* out, std::string* why) {
  if (text == "offload") {
    *out = OffloadMode::kOffload;
    return true;
  }
  if (text == "kernel") {
    *out = OffloadMode::kKernel;
    return true;
  }
  *why = "expected offload or kernel";
  return false;
}

bool is_power_of_two(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

// A ring's bytes: a power of two from `min` to 512 MiB.
bool parse_ring_bytes(std::string_view value, uint32_t min, uint32_t* out, std::string* why) {
  uint32_t v;
  // 512 MiB: the largest ring a peer accepts (StreamChannel::kMaxPeerRing).
  if (!parse_u32(value, min, 1u << 29, &v, why)) return false;
  if (!is_power_of_two(v)) {
    *why = "must be a power of two";
    return false;
  }
  *out = v;
  return true;
}

}  // namespace

const char* const kSettingNames[] = {
    "profile",  "log_level", "log_file",     "stats",        "stats_shm",    "device",       "tcp",
    "udp",      "spin_us",   "inline_size",  "ring_size",    "sq_depth",     "rq_depth",
    "signal_every", "autocork", "nagle", "cq_mod_count", "cq_mod_us", "upgrade_timeout_ms", "peer_fail_cache_s",
    "udp_receive_buffers", "udp_progress_us", "udp_mcast_offload", "spin_adapt", "memory_budget_mib", "ring_initial_size",
    "park_channels", "park_max", "park_per_peer", "epoll_sweep_ms",
};
const int kSettingCount = sizeof kSettingNames / sizeof kSettingNames[0];

bool is_setting_name(std::string_view name) {
  for (int i = 0; i < kSettingCount; ++i)
    if (name == kSettingNames[i]) return true;
  return false;
}

std::string env_name_of(std::string_view setting_name) {
  std::string env = "VSOCK_";
  for (char c : setting_name) env += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return env;
}

bool apply_setting(Settings* s, std::string_view name, std::string_view value, std::string* why) {
  if (name == "profile") {
    Profile p;
    if (!parse_profile(value, &p)) {
      *why = "expected latency, throughput or default";
      return false;
    }
    apply_profile(s, p);
    return true;
  }
  if (name == "log_level") {
    if (parse_log_level(value, &s->log_level)) return true;
    *why = "expected error, warn, info, debug or trace";
    return false;
  }
  if (name == "log_file") {
    s->log_file = std::string(value);
    return true;
  }
  if (name == "device") {
    s->device = std::string(value);
    return true;
  }
  if (name == "stats") return parse_bool(value, &s->stats, why);
  if (name == "stats_shm") return parse_bool(value, &s->stats_shm, why);
  if (name == "spin_adapt") return parse_bool(value, &s->spin_adapt, why);
  if (name == "park_channels") return parse_bool(value, &s->park_channels, why);
  if (name == "park_max") return parse_u32(value, 1, 4096, &s->park_max, why);
  if (name == "park_per_peer") return parse_u32(value, 1, 4096, &s->park_per_peer, why);
  if (name == "autocork") return parse_bool(value, &s->autocork, why);
  if (name == "nagle") return parse_bool(value, &s->nagle, why);
  if (name == "tcp") return parse_mode(value, &s->tcp, why);
  if (name == "udp") return parse_mode(value, &s->udp, why);
  if (name == "spin_us") return parse_u32(value, 0, 10'000'000, &s->spin_us, why);
  if (name == "inline_size") return parse_u32(value, 0, 1024, &s->inline_size, why);
  if (name == "ring_size") return parse_ring_bytes(value, 64u << 10, &s->ring_size, why);
  if (name == "ring_initial_size") return parse_ring_bytes(value, 4u << 10, &s->ring_initial_size, why);
  if (name == "sq_depth") return parse_u32(value, 16, 16384, &s->sq_depth, why);
  if (name == "rq_depth") return parse_u32(value, 16, 16384, &s->rq_depth, why);
  if (name == "signal_every") return parse_u32(value, 1, 1024, &s->signal_every, why);
  if (name == "cq_mod_count") return parse_u32(value, 0, 65535, &s->cq_mod_count, why);
  if (name == "cq_mod_us") return parse_u32(value, 0, 65535, &s->cq_mod_us, why);
  if (name == "upgrade_timeout_ms") return parse_u32(value, 0, 60'000, &s->upgrade_timeout_ms, why);
  if (name == "peer_fail_cache_s") return parse_u32(value, 0, 86'400, &s->peer_fail_cache_s, why);
  if (name == "memory_budget_mib") return parse_u32(value, 0, 1u << 30, &s->memory_budget_mib, why);
  if (name == "udp_receive_buffers") return parse_u32(value, 64, 16384, &s->udp_receive_buffers, why);
  if (name == "udp_progress_us") return parse_u32(value, 0, 1'000'000, &s->udp_progress_us, why);
  if (name == "epoll_sweep_ms") return parse_u32(value, 0, 60'000, &s->epoll_sweep_ms, why);
  if (name == "udp_mcast_offload") return parse_multicast_prefixes(value, &s->udp_mcast_offload, why);
  *why = "unknown setting";
  return false;
}

}  // namespace vsock::core
