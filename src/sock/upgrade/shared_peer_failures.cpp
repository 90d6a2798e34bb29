#include "sock/upgrade/shared_peer_failures.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <mutex>

#include "core/clock.hpp"
#include "core/config.hpp"
#include "sock/upgrade/owner_only_file.hpp"
#include "sock/upgrade/shared_failure_table.hpp"
#include "sys/real_calls.hpp"

namespace vsock::sock {
namespace {

// The mapping of fd if it is a table of ours that nobody else may open;
// null otherwise. `fresh`: just made, sized and initialised here.
SharedFailureMemory* map_table(int fd, bool fresh) {
  auto* memory = static_cast<SharedFailureMemory*>(owner_only::map(fd, sizeof(SharedFailureMemory), fresh));
  if (memory == nullptr) return nullptr;
  if (fresh) SharedFailureTable::init(memory);
  if (!SharedFailureTable::valid(memory)) {
    ::munmap(memory, sizeof(SharedFailureMemory));
    return nullptr;
  }
  return memory;
}

SharedFailureMemory* open_table() {
  char name[96];
  std::snprintf(name, sizeof name, "%s/libvsock-peers-1-%u", owner_only::kDirectory,
                static_cast<unsigned>(::geteuid()));
  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd = owner_only::open_published(name);
    if (fd >= 0) {
      SharedFailureMemory* memory = map_table(fd, false);
      sys::real().close(fd);
      return memory;  // null: not a table this library may use; left alone
    }
    if (errno != ENOENT) return nullptr;
    char temporary[128];
    std::snprintf(temporary, sizeof temporary, "%s/.libvsock-peers-1-%u-%d", owner_only::kDirectory,
                  static_cast<unsigned>(::geteuid()), static_cast<int>(::getpid()));
    fd = owner_only::create(temporary);
    if (fd < 0) return nullptr;  // no /dev/shm
    SharedFailureMemory* memory = map_table(fd, true);
    sys::real().close(fd);
    if (memory == nullptr) {
      ::unlink(temporary);
      return nullptr;
    }
    const int error = owner_only::publish(temporary, name);
    if (error == 0) return memory;
    ::munmap(memory, sizeof(SharedFailureMemory));
    if (error != EEXIST) return nullptr;
    // Another process published its table meanwhile: use that one.
  }
  return nullptr;
}

// The table, or null (none, or sharing is off); opened once per process.
SharedFailureMemory* table() {
  static std::once_flag opened;
  static SharedFailureMemory* memory = nullptr;
  if (core::config().settings.peer_fail_cache_s == 0) return nullptr;
  std::call_once(opened, [] { memory = open_table(); });
  return memory;
}

int64_t ttl_ms() { return int64_t{core::config().settings.peer_fail_cache_s} * 1000; }

}  // namespace

bool peer_plain_on_this_host(const sockaddr* peer, socklen_t length) {
  core::Result<wire::FamilyEndpoint> at = wire::endpoint_from_sockaddr(peer, length);
  SharedFailureMemory* memory = at ? table() : nullptr;
  return memory != nullptr && SharedFailureTable(memory).failed_recently(at.value(), core::monotonic_ms(), ttl_ms());
}

void share_plain_peer(const sockaddr* peer, socklen_t length) {
  core::Result<wire::FamilyEndpoint> at = wire::endpoint_from_sockaddr(peer, length);
  if (SharedFailureMemory* memory = at ? table() : nullptr)
    SharedFailureTable(memory).record(at.value(), core::monotonic_ms(), ttl_ms());
}

void forget_plain_peer(const sockaddr* peer, socklen_t length) {
  core::Result<wire::FamilyEndpoint> at = wire::endpoint_from_sockaddr(peer, length);
  if (SharedFailureMemory* memory = at ? table() : nullptr) SharedFailureTable(memory).forget(at.value());
}

}  // namespace vsock::sock
