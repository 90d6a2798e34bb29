#include "tools/vsock_info/memlock_report.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "sock/stream/stream_channel.hpp"
#include "sock/stream/stream_config.hpp"

namespace vsock::info {
namespace {

constexpr uint64_t kCapIpcLock = 14;  // linux/capability.h
// Work request and completion entry sizes differ per provider; 64 bytes
// is mlx5's send WQE basic block and CQE, the largest common case.
constexpr uint64_t kQueueEntryBytes = 64;

uint64_t page_round(uint64_t bytes) {
  long page = ::sysconf(_SC_PAGESIZE);
  uint64_t p = page > 0 ? static_cast<uint64_t>(page) : 4096;
  return (bytes + p - 1) / p * p;
}

// True if CapEff in /proc/self/status has CAP_IPC_LOCK.
bool has_cap_ipc_lock() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    uint64_t caps = std::stoull(line.substr(7), nullptr, 16);
    return (caps >> kCapIpcLock) & 1;
  }
  return false;
}

std::string human(uint64_t bytes) {
  char text[32];
  if (bytes >= (uint64_t{1} << 20)) std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  else if (bytes >= 1024) std::snprintf(text, sizeof text, "%.1f KiB", static_cast<double>(bytes) / 1024);
  else std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  return text;
}

}  // namespace

uint64_t memlock_per_connection(const core::Settings& s, uint64_t peer_ring) {
  uint64_t ring = page_round(s.ring_size);
  uint64_t send_buffer = page_round(peer_ring);
  uint64_t control = page_round((uint64_t{s.rq_depth} + 1) * sock::StreamChannel::kControlMessageMax);
  uint64_t queues = page_round(uint64_t{s.sq_depth} * kQueueEntryBytes) + page_round(uint64_t{s.rq_depth} * kQueueEntryBytes) +
                    page_round((uint64_t{s.sq_depth} + s.rq_depth) * kQueueEntryBytes);
  return ring + send_buffer + control + queues;
}

MemlockCheck check_memlock(const core::Settings& settings) {
  MemlockCheck check;
  // A peer with the same settings declares a ring of our size; one with
  // another profile may declare up to the bound the library accepts.
  check.per_connection = memlock_per_connection(settings, settings.ring_size);
  check.per_connection_max =
      memlock_per_connection(settings, sock::StreamConfig::from_settings(settings).max_peer_ring);
  rlimit limit{};
  ::getrlimit(RLIMIT_MEMLOCK, &limit);
  check.unlimited = limit.rlim_cur == RLIM_INFINITY;
  check.limit = check.unlimited ? 0 : limit.rlim_cur;
  check.cap_ipc_lock = has_cap_ipc_lock();
  check.connections = check.per_connection == 0 ? 0 : check.limit / check.per_connection;
  check.enough = check.unlimited || check.cap_ipc_lock || check.connections >= 1;
  return check;
}

void print_memlock(const MemlockCheck& check, const core::Settings& settings) {
  std::printf("memlock:\n");
  std::printf("  one connection pins about %s (ring_size %s, send buffer, sq %u, rq %u; profile %s)\n",
              human(check.per_connection).c_str(), human(settings.ring_size).c_str(), settings.sq_depth,
              settings.rq_depth, core::profile_name(settings.profile));
  if (check.per_connection_max > check.per_connection)
    std::printf("  up to %s when the peer's ring is the largest accepted (a peer on another profile)\n",
                human(check.per_connection_max).c_str());
  if (check.unlimited) std::printf("  RLIMIT_MEMLOCK: unlimited\n");
  else std::printf("  RLIMIT_MEMLOCK: %s: room for %llu connection(s)\n", human(check.limit).c_str(),
                   (unsigned long long)check.connections);
  if (check.cap_ipc_lock && !check.unlimited)
    std::printf("  this process has CAP_IPC_LOCK: the limit does not bind it (it binds processes without the capability)\n");
}

}  // namespace vsock::info
