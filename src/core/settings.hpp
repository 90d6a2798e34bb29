// Settings: every tunable of the library, with its name, range and default.
// A setting is named the same everywhere: `spin_us` in the rules file is
// VSOCK_SPIN_US in the environment (docs/configuration.md lists them all).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include <vector>

#include "core/log.hpp"
#include "core/multicast_prefix.hpp"

namespace vsock::core {

enum class Profile { kDefault, kLatency, kThroughput };
enum class OffloadMode { kOffload, kKernel };

struct Settings {
  Profile profile = Profile::kDefault;
  LogLevel log_level = LogLevel::kWarn;
  std::string log_file;          // empty: stderr
  bool stats = false;            // print counters at exit
  bool stats_shm = true;         // publish counters for vsock-stat (core/stats_segment.hpp)
  bool spin_adapt = true;        // fit spins to the observed wait (sock/wait/spin_history.hpp)
  std::string device;            // empty: first active verbs device
  OffloadMode tcp = OffloadMode::kOffload;
  OffloadMode udp = OffloadMode::kOffload;
  // Profile-dependent bundle (profiles.cpp sets these together).
  uint32_t spin_us = 50;               // busy-poll budget before sleeping
  uint32_t inline_size = 128;          // sends up to this size go inline
  uint32_t ring_size = 2u << 20;       // per-connection receive ring, bytes, at most
  // What a connection's receive ring starts at; it grows (x4) up to
  // ring_size while its traffic fills it (docs/protocol.md §3.1).
  uint32_t ring_initial_size = 16u << 10;
  uint32_t sq_depth = 256;             // send queue work requests
  uint32_t rq_depth = 256;             // receive queue work requests
  uint32_t signal_every = 16;          // request a completion every N sends
  bool autocork = false;               // coalesce small writes, TCP_NODELAY or not
  bool nagle = true;                   // coalesce small writes unless TCP_NODELAY is set
  uint32_t cq_mod_count = 0;           // completion moderation (0: off)
  uint32_t cq_mod_us = 0;
  uint32_t upgrade_timeout_ms = 200;   // how long connect() waits for RDMA
  uint32_t peer_fail_cache_s = 60;     // remember peers that cannot upgrade
  bool park_channels = true;           // keep cleanly closed channels for the next connection (protocol.md §1.2)
  uint32_t park_max = 32;              // parked channels per process
  uint32_t park_per_peer = 8;          // parked channels per peer address
  uint32_t memory_budget_mib = 0;      // connections' registered memory, MiB (0: no limit)
  uint32_t udp_receive_buffers = 2048;  // the UD endpoint's posted receive buffers
  uint32_t udp_progress_us = 1000;     // receive progress thread's tick (0: none)
  // How often a quiet epoll entry is looked at without news (its peer
  // probe; sock/wait/epoll_quiet.hpp). 0: never.
  uint32_t epoll_sweep_ms = 1000;
  // IPv4 multicast groups sent and received over UD (empty: none). A sender
  // to such a group sends over UD only: every receiver must run libvsock.
  std::vector<MulticastPrefix> udp_mcast_offload;
};

// Applies `value` to the setting called `name` (lower-case, e.g. "spin_us").
// On failure returns false and writes a one-line reason to *why.
bool apply_setting(Settings* settings, std::string_view name, std::string_view value, std::string* why);

// True if `name` is a setting apply_setting() knows.
bool is_setting_name(std::string_view name);

// Visits every setting name in table order (for docs checks and tests).
template <class Fn>
void for_each_setting_name(Fn fn);

bool parse_profile(std::string_view text, Profile* out);
const char* profile_name(Profile profile);

// Sets the profile and the bundle of settings it implies (profiles.cpp).
void apply_profile(Settings* settings, Profile profile);
// The largest ring_size any profile sets: with our own ring_size, the most
// a peer's ring may be (its declared size is what we register to mirror it).
uint32_t largest_profile_ring_size();

// True for the settings apply_profile() sets (spin_us, ring_size, ...).
bool is_profile_setting(std::string_view name);

// Lower-case setting name -> environment variable name ("spin_us" -> "VSOCK_SPIN_US").
std::string env_name_of(std::string_view setting_name);

extern const char* const kSettingNames[];
extern const int kSettingCount;

template <class Fn>
void for_each_setting_name(Fn fn) {
  for (int i = 0; i < kSettingCount; ++i) fn(kSettingNames[i]);
}

}  // namespace vsock::core
