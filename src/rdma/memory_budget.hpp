// What this process has registered with the device, and the budget that
// bounds what connections may register (setting memory_budget_mib). A
// connection's channel reserves, before it registers anything, the bytes
// its rings and buffers will take; the reservation goes back when the
// channel is destroyed. A reservation past the budget fails (ENOBUFS) and
// that connection stays on TCP. The registered count (every MemoryRegion)
// feeds the stats registered_bytes and registered_bytes_peak.
#pragma once
#include <cstdint>
#include <utility>

#include "core/result.hpp"

namespace vsock::rdma {

class BudgetReservation {
 public:
  BudgetReservation() = default;
  ~BudgetReservation() { give_back(); }
  BudgetReservation(BudgetReservation&& other) noexcept : bytes_(std::exchange(other.bytes_, 0)) {}
  BudgetReservation& operator=(BudgetReservation&& other) noexcept {
    if (this != &other) {
      give_back();
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  BudgetReservation(const BudgetReservation&) = delete;
  BudgetReservation& operator=(const BudgetReservation&) = delete;

  // Reserves `bytes` against `budget` (0: no limit): ENOBUFS if the
  // process's reservations would pass it.
  static core::Result<BudgetReservation> take(uint64_t bytes, uint64_t budget);
  // Grows by `bytes` whatever the budget (what turned out to be needed
  // once the peer said how large its ring is).
  void grow(uint64_t bytes);
  // Grows by `bytes` if the budget allows it (a ring that grows with its
  // traffic): false, and nothing changes, otherwise.
  bool try_grow(uint64_t bytes, uint64_t budget);
  // Gives `bytes` (at most bytes()) back early: a ring that was replaced.
  void shrink(uint64_t bytes);
  uint64_t bytes() const { return bytes_; }

 private:
  void give_back();
  uint64_t bytes_ = 0;
};

// What registering `bytes` takes: whole pages (MemoryRegion rounds up).
uint64_t page_rounded(uint64_t bytes);

// Every MemoryRegion: `bytes` were registered (positive) or deregistered.
void note_registered(int64_t bytes);
uint64_t registered_bytes();
uint64_t reserved_bytes();

}  // namespace vsock::rdma
