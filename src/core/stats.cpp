#include "core/stats.hpp"

#include "core/log.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <new>

namespace vsock::core {
namespace {

constexpr int kCounters = static_cast<int>(Stat::kCount);

// One thread's counters. Only the owning thread writes `values` (load +
// store, no read-modify-write); readers load them at any time. Blocks are
// never freed: a reader walks the list without a lock.
struct alignas(64) CounterBlock {
  std::atomic<uint64_t> values[kCounters] = {};
  std::atomic<bool> owned{true};
  CounterBlock* next = nullptr;  // fixed before the block is published
};

std::atomic<CounterBlock*> g_blocks{nullptr};
// stat_set() values, and what threads count after their own block is gone
// (a counter bumped from a thread_local destructor that runs after ours).
std::atomic<uint64_t> g_shared[kCounters];

// Fast path: a plain initial-exec TLS pointer (the library is preloaded, so
// static TLS is available). The holder below only exists to give the block
// back when the thread ends; it is touched once per thread.
__thread CounterBlock* t_block __attribute__((tls_model("initial-exec"))) = nullptr;
__thread bool t_block_gone __attribute__((tls_model("initial-exec"))) = false;

struct BlockHolder {
  CounterBlock* block = nullptr;
  ~BlockHolder() {
    t_block = nullptr;
    t_block_gone = true;
    if (block != nullptr) block->owned.store(false, std::memory_order_release);
  }
};
thread_local BlockHolder t_holder;

CounterBlock* claim_block() {
  // A block whose thread has ended: its counts stay in it and go on.
  for (CounterBlock* b = g_blocks.load(std::memory_order_acquire); b != nullptr; b = b->next) {
    bool free = false;
    if (!b->owned.load(std::memory_order_relaxed) &&
        b->owned.compare_exchange_strong(free, true, std::memory_order_acquire))
      return b;
  }
  auto* fresh = new (std::nothrow) CounterBlock;
  if (fresh == nullptr) return nullptr;
  CounterBlock* head = g_blocks.load(std::memory_order_relaxed);
  do {
    fresh->next = head;
  } while (!g_blocks.compare_exchange_weak(head, fresh, std::memory_order_release, std::memory_order_relaxed));
  return fresh;
}

CounterBlock* my_block() {
  if (t_block != nullptr) return t_block;
  if (t_block_gone) return nullptr;
  CounterBlock* block = claim_block();
  if (block == nullptr) return nullptr;
  t_holder.block = block;  // registers the holder's destructor for this thread
  t_block = block;
  return block;
}

constexpr const char* kNames[] = {
#define VSOCK_STAT_NAME(name) #name,
    VSOCK_STAT_COUNTERS(VSOCK_STAT_NAME)
#undef VSOCK_STAT_NAME
};

}  // namespace

void stat_add(Stat stat, uint64_t amount) {
  const int i = static_cast<int>(stat);
  if (CounterBlock* block = my_block()) {
    std::atomic<uint64_t>& value = block->values[i];
    value.store(value.load(std::memory_order_relaxed) + amount, std::memory_order_relaxed);
    return;
  }
  g_shared[i].fetch_add(amount, std::memory_order_relaxed);
}

void stat_set(Stat stat, uint64_t value) { g_shared[static_cast<int>(stat)].store(value, std::memory_order_relaxed); }

void stat_transfer(Stat bytes_counter, Stat calls_counter, uint64_t bytes) {
  if (bytes == 0) return;
  stat_add(bytes_counter, bytes);
  stat_add(calls_counter);
}

uint64_t stat_get(Stat stat) {
  const int i = static_cast<int>(stat);
  uint64_t sum = g_shared[i].load(std::memory_order_relaxed);
  for (CounterBlock* b = g_blocks.load(std::memory_order_acquire); b != nullptr; b = b->next)
    sum += b->values[i].load(std::memory_order_relaxed);
  return sum;
}

void stats_start_anew_in_child() {
  for (CounterBlock* b = g_blocks.load(std::memory_order_acquire); b != nullptr; b = b->next) {
    for (std::atomic<uint64_t>& value : b->values) value.store(0, std::memory_order_relaxed);
    if (b != t_block) b->owned.store(false, std::memory_order_release);
  }
  for (std::atomic<uint64_t>& value : g_shared) value.store(0, std::memory_order_relaxed);
}

const char* stat_name(Stat stat) { return kNames[static_cast<int>(stat)]; }

void stats_print() {
  char line[2048];
  int len = std::snprintf(line, sizeof line, "libvsock[%ld]: stats:", static_cast<long>(::syscall(SYS_getpid)));
  for (int i = 0; i < kCounters && len < static_cast<int>(sizeof line) - 64; ++i)
    len += std::snprintf(line + len, sizeof line - static_cast<size_t>(len), " %s=%llu", kNames[i],
                         static_cast<unsigned long long>(stat_get(static_cast<Stat>(i))));
  line[len++] = '\n';
  log_write_line(line, static_cast<size_t>(len));
}

}  // namespace vsock::core
