// The public C API of include/vsock/vsock.h.
#include "vsock/vsock.h"

#include <cstring>

#include "core/stats.hpp"
#include "preload/entry_common.hpp"

using namespace vsock;

#define VSOCK_STR2(x) #x
#define VSOCK_STR(x) VSOCK_STR2(x)

VSOCK_EXPORT const char* vsock_version(void) {
  return VSOCK_STR(VSOCK_VERSION_MAJOR) "." VSOCK_STR(VSOCK_VERSION_MINOR) "." VSOCK_STR(VSOCK_VERSION_PATCH);
}

// The public struct has one field per counter, in the same order.
static_assert(sizeof(struct vsock_stats) == sizeof(uint64_t) * static_cast<size_t>(core::Stat::kCount),
              "include/vsock/vsock.h and VSOCK_STAT_COUNTERS differ");

VSOCK_EXPORT size_t vsock_stats_snapshot(struct vsock_stats* out, size_t size) {
  struct vsock_stats stats = {};
#define VSOCK_STAT_COPY(name) stats.name = core::stat_get(core::Stat::name);
  VSOCK_STAT_COUNTERS(VSOCK_STAT_COPY)
#undef VSOCK_STAT_COPY
  if (out != nullptr) std::memcpy(out, &stats, size < sizeof stats ? size : sizeof stats);
  return sizeof stats;
}
