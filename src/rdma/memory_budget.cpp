#include "rdma/memory_budget.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "core/stats.hpp"

namespace vsock::rdma {
namespace {

std::atomic<uint64_t> g_reserved{0};
std::atomic<uint64_t> g_registered{0};
std::atomic<uint64_t> g_peak{0};

// A fork() child has none of its parent's registrations (they are
// MADV_DONTFORK) and never gives back the parent's reservations (the
// channels it inherited are forgotten, not destroyed).
void start_counting_in_child() {
  g_reserved.store(0);
  g_registered.store(0);
  g_peak.store(0);
  core::stat_set(core::Stat::registered_bytes, 0);
  core::stat_set(core::Stat::registered_bytes_peak, 0);
}

__attribute__((constructor)) void install_budget_fork_handler() {
  pthread_atfork(nullptr, nullptr, start_counting_in_child);
}

}  // namespace

core::Result<BudgetReservation> BudgetReservation::take(uint64_t bytes, uint64_t budget) {
  using R = core::Result<BudgetReservation>;
  uint64_t now = g_reserved.load(std::memory_order_relaxed);
  do {
    if (budget != 0 && (bytes > budget || now > budget - bytes)) return R::fail(ENOBUFS);
  } while (!g_reserved.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed));
  BudgetReservation reservation;
  reservation.bytes_ = bytes;
  return R::ok(std::move(reservation));
}

void BudgetReservation::grow(uint64_t bytes) {
  g_reserved.fetch_add(bytes, std::memory_order_relaxed);
  bytes_ += bytes;
}

bool BudgetReservation::try_grow(uint64_t bytes, uint64_t budget) {
  core::Result<BudgetReservation> more = take(bytes, budget);
  if (!more) return false;
  bytes_ += std::exchange(more.value().bytes_, 0);
  return true;
}

void BudgetReservation::shrink(uint64_t bytes) {
  if (bytes > bytes_) bytes = bytes_;
  g_reserved.fetch_sub(bytes, std::memory_order_relaxed);
  bytes_ -= bytes;
}

void BudgetReservation::give_back() {
  if (bytes_ != 0) g_reserved.fetch_sub(bytes_, std::memory_order_relaxed);
  bytes_ = 0;
}

void note_registered(int64_t bytes) {
  const uint64_t now = g_registered.fetch_add(static_cast<uint64_t>(bytes), std::memory_order_relaxed) +
                       static_cast<uint64_t>(bytes);
  core::stat_set(core::Stat::registered_bytes, now);
  uint64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  if (now > peak) core::stat_set(core::Stat::registered_bytes_peak, g_peak.load(std::memory_order_relaxed));
}

uint64_t page_rounded(uint64_t bytes) {
  static const uint64_t page = [] {
    long size = ::sysconf(_SC_PAGESIZE);
    return size > 0 ? static_cast<uint64_t>(size) : uint64_t{4096};
  }();
  return (bytes + page - 1) / page * page;
}

uint64_t registered_bytes() { return g_registered.load(std::memory_order_relaxed); }
uint64_t reserved_bytes() { return g_reserved.load(std::memory_order_relaxed); }

}  // namespace vsock::rdma
