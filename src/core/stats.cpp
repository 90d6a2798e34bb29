#include "core/stats.hpp"

#include "core/log.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>

namespace vsock::core {
namespace {

std::atomic<uint64_t> g_counters[static_cast<int>(Stat::kCount)];

constexpr const char* kNames[] = {
#define VSOCK_STAT_NAME(name) #name,
    VSOCK_STAT_COUNTERS(VSOCK_STAT_NAME)
#undef VSOCK_STAT_NAME
};

}  // namespace

void stat_add(Stat stat, uint64_t amount) {
  g_counters[static_cast<int>(stat)].fetch_add(amount, std::memory_order_relaxed);
}

void stat_set(Stat stat, uint64_t value) { g_counters[static_cast<int>(stat)].store(value, std::memory_order_relaxed); }

void stat_transfer(Stat bytes_counter, Stat calls_counter, uint64_t bytes) {
  if (bytes == 0) return;
  stat_add(bytes_counter, bytes);
  stat_add(calls_counter);
}

uint64_t stat_get(Stat stat) { return g_counters[static_cast<int>(stat)].load(std::memory_order_relaxed); }

const char* stat_name(Stat stat) { return kNames[static_cast<int>(stat)]; }

void stats_print() {
  char line[2048];
  int len = std::snprintf(line, sizeof line, "libvsock[%ld]: stats:", static_cast<long>(::syscall(SYS_getpid)));
  for (int i = 0; i < static_cast<int>(Stat::kCount) && len < static_cast<int>(sizeof line) - 64; ++i)
    len += std::snprintf(line + len, sizeof line - static_cast<size_t>(len), " %s=%llu", kNames[i],
                         static_cast<unsigned long long>(g_counters[i].load()));
  line[len++] = '\n';
  log_write_line(line, static_cast<size_t>(len));
}

}  // namespace vsock::core
