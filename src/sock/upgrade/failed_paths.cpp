#include "sock/upgrade/failed_paths.hpp"

#include <cstdint>
#include <mutex>

#include "core/clock.hpp"
#include "core/config.hpp"
#include "sock/upgrade/peer_failure_cache.hpp"

namespace vsock::sock {
namespace {

constexpr size_t kCapacity = 256;

struct FailedPaths {
  std::mutex mu;
  PeerFailureCache cache{kCapacity, uint64_t{core::config().settings.peer_fail_cache_s} * 1000};
};

FailedPaths& failed_paths() {
  static FailedPaths* paths = new FailedPaths();  // never destroyed: used up to exit
  return *paths;
}

}  // namespace

void note_failed_path(const sockaddr* peer, socklen_t len) {
  FailedPaths& paths = failed_paths();
  std::lock_guard<std::mutex> held(paths.mu);
  paths.cache.record_failure(peer, len, static_cast<uint64_t>(core::monotonic_ms()));
}

bool path_failed_recently(const sockaddr* peer, socklen_t len) {
  FailedPaths& paths = failed_paths();
  std::lock_guard<std::mutex> held(paths.mu);
  return paths.cache.size() != 0 && paths.cache.should_skip(peer, len, static_cast<uint64_t>(core::monotonic_ms()));
}

}  // namespace vsock::sock
