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

VSOCK_EXPORT size_t vsock_stats_snapshot(struct vsock_stats* out, size_t size) {
  struct vsock_stats stats = {};
  stats.tcp_sockets = core::stat_get(core::Stat::tcp_sockets);
  stats.udp_sockets = core::stat_get(core::Stat::udp_sockets);
  stats.other_sockets = core::stat_get(core::Stat::other_sockets);
  stats.kernel_by_rule = core::stat_get(core::Stat::kernel_by_rule);
  stats.kernel_no_device = core::stat_get(core::Stat::kernel_no_device);
  stats.device_opened = core::stat_get(core::Stat::device_opened);
  stats.forks = core::stat_get(core::Stat::forks);
  if (out != nullptr) std::memcpy(out, &stats, size < sizeof stats ? size : sizeof stats);
  return sizeof stats;
}
