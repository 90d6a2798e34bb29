#include "sock/upgrade/shared_failure_table.hpp"

#include <cstring>

namespace vsock::sock {
namespace {

// A record is live for ttl_ms from its time; one from the future (a clock
// that cannot be ours) is not trusted.
bool live(int64_t failed_ms, int64_t now_ms, int64_t ttl_ms) {
  return failed_ms > 0 && failed_ms <= now_ms + 1000 && now_ms - failed_ms < ttl_ms;
}

}  // namespace

SharedFailureTable::Snapshot SharedFailureTable::snapshot_of(const wire::FamilyEndpoint& peer, int64_t failed_ms) {
  Snapshot key{};
  key.family_port = (uint32_t{peer.family} << 16) | peer.endpoint.port;
  std::memcpy(&key.ip_high, peer.endpoint.ip, 8);
  std::memcpy(&key.ip_low, peer.endpoint.ip + 8, 8);
  key.failed_ms = failed_ms;
  return key;
}

bool SharedFailureTable::Snapshot::same_peer(const Snapshot& other) const {
  return family_port == other.family_port && ip_high == other.ip_high && ip_low == other.ip_low;
}

void SharedFailureTable::init(SharedFailureMemory* memory) {
  memory->size = sizeof(SharedFailureMemory);
  memory->slots = SharedFailureMemory::kSlots;
  memory->magic.store(SharedFailureMemory::kMagic, std::memory_order_release);
}

bool SharedFailureTable::valid(const SharedFailureMemory* memory) {
  return memory->magic.load(std::memory_order_acquire) == SharedFailureMemory::kMagic &&
         memory->size == sizeof(SharedFailureMemory) && memory->slots == SharedFailureMemory::kSlots;
}

uint32_t SharedFailureTable::first_slot(const Snapshot& key) const {
  // Each word mixed in, then a finalizer (splitmix64's) that makes every
  // input bit reach the low bits the slot is taken from: hosts of one
  // subnet on one port differ only in bits a plain multiply leaves high.
  uint64_t hash = 0x9e3779b97f4a7c15ull;
  for (uint64_t word : {uint64_t{key.family_port}, key.ip_high, key.ip_low}) {
    hash ^= word;
    hash = (hash ^ (hash >> 30)) * 0xbf58476d1ce4e5b9ull;
    hash = (hash ^ (hash >> 27)) * 0x94d049bb133111ebull;
    hash ^= hash >> 31;
  }
  return static_cast<uint32_t>(hash % SharedFailureMemory::kSlots);
}

bool SharedFailureTable::read(uint32_t i, Snapshot* out) const {
  const SharedFailureSlot& slot = memory_->slot[i];
  const uint32_t before = slot.sequence.load(std::memory_order_acquire);
  if (before & 1u) return false;
  out->family_port = slot.family_port.load(std::memory_order_relaxed);
  out->ip_high = slot.ip_high.load(std::memory_order_relaxed);
  out->ip_low = slot.ip_low.load(std::memory_order_relaxed);
  out->failed_ms = slot.failed_ms.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return slot.sequence.load(std::memory_order_relaxed) == before;
}

bool SharedFailureTable::write(uint32_t i, const Snapshot& value) {
  SharedFailureSlot& slot = memory_->slot[i];
  uint32_t sequence = slot.sequence.load(std::memory_order_relaxed);
  if ((sequence & 1u) || !slot.sequence.compare_exchange_strong(sequence, sequence + 1, std::memory_order_acquire))
    return false;
  std::atomic_thread_fence(std::memory_order_release);
  slot.family_port.store(value.family_port, std::memory_order_relaxed);
  slot.ip_high.store(value.ip_high, std::memory_order_relaxed);
  slot.ip_low.store(value.ip_low, std::memory_order_relaxed);
  slot.failed_ms.store(value.failed_ms, std::memory_order_relaxed);
  slot.sequence.store(sequence + 2, std::memory_order_release);
  return true;
}

void SharedFailureTable::record(const wire::FamilyEndpoint& peer, int64_t now_ms, int64_t ttl_ms) {
  const Snapshot wanted = snapshot_of(peer, now_ms > 0 ? now_ms : 1);
  const uint32_t first = first_slot(wanted);
  // The peer's own slot if it has one; else the first free or expired one;
  // else the oldest of the probe.
  uint32_t chosen = first;
  int64_t oldest = INT64_MAX;
  bool free_found = false;
  for (uint32_t step = 0; step < kProbe; ++step) {
    const uint32_t i = (first + step) % SharedFailureMemory::kSlots;
    Snapshot seen{};
    if (!read(i, &seen)) continue;  // being written: not ours to take
    if (seen.same_peer(wanted)) {
      chosen = i;
      break;
    }
    if (free_found) continue;
    if (seen.family_port == 0 || !live(seen.failed_ms, now_ms, ttl_ms)) {
      chosen = i;
      free_found = true;
    } else if (seen.failed_ms < oldest) {
      oldest = seen.failed_ms;
      chosen = i;
    }
  }
  write(chosen, wanted);
}

bool SharedFailureTable::failed_recently(const wire::FamilyEndpoint& peer, int64_t now_ms, int64_t ttl_ms) const {
  const Snapshot wanted = snapshot_of(peer, 0);
  const uint32_t first = first_slot(wanted);
  // Every slot of the probe: two processes that recorded the peer at once
  // may have left it in two.
  for (uint32_t step = 0; step < kProbe; ++step) {
    Snapshot seen{};
    if (!read((first + step) % SharedFailureMemory::kSlots, &seen)) continue;
    if (seen.same_peer(wanted) && live(seen.failed_ms, now_ms, ttl_ms)) return true;
  }
  return false;
}

void SharedFailureTable::forget(const wire::FamilyEndpoint& peer) {
  const Snapshot wanted = snapshot_of(peer, 0);
  const uint32_t first = first_slot(wanted);
  for (uint32_t step = 0; step < kProbe; ++step) {
    const uint32_t i = (first + step) % SharedFailureMemory::kSlots;
    Snapshot seen{};
    if (!read(i, &seen)) continue;
    if (seen.same_peer(wanted)) write(i, Snapshot{});
  }
}

}  // namespace vsock::sock
