// FdTable<T>: a map from fd number to T*, lock-free on lookup, with no cap
// below RLIMIT_NOFILE. Two levels: 2^15 lazily mapped chunks of 2^16 slots
// cover every non-negative int. The top level is 256 KiB of zeroed .bss; only
// the chunks that hold fds in use are ever touched.
#pragma once
#include <sys/mman.h>

#include <atomic>
#include <climits>
#include <cstddef>

// LeakSanitizer does not scan anonymous mappings, so a state reachable only
// from a chunk would be reported as leaked at exit. When a sanitizer runtime
// is loaded it defines this, and each chunk is declared a root region.
extern "C" void __lsan_register_root_region(const void* begin, size_t size) __attribute__((weak));

namespace vsock::sock {

template <class T>
class FdTable {
 public:
  static constexpr int kChunkBits = 16;
  static constexpr int kChunkSlots = 1 << kChunkBits;
  static constexpr int kChunks = (INT_MAX >> kChunkBits) + 1;

  // The pointer stored for fd, or nullptr. Wait-free: two acquire loads.
  T* lookup(int fd) const {
    if (fd < 0) return nullptr;
    std::atomic<T*>* chunk = chunks_[fd >> kChunkBits].load(std::memory_order_acquire);
    if (chunk == nullptr) return nullptr;
    return chunk[fd & (kChunkSlots - 1)].load(std::memory_order_acquire);
  }

  // Stores value for fd and returns what was there. Fails (returns false)
  // only if fd < 0 or memory for a new chunk cannot be mapped.
  bool exchange(int fd, T* value, T** previous) {
    *previous = nullptr;
    if (fd < 0) return false;
    std::atomic<T*>* chunk = chunk_for(fd >> kChunkBits, value != nullptr);
    if (chunk == nullptr) return value == nullptr;
    *previous = chunk[fd & (kChunkSlots - 1)].exchange(value, std::memory_order_acq_rel);
    return true;
  }

  // Stores value only if the slot still holds expected.
  bool compare_exchange(int fd, T* expected, T* value) {
    if (fd < 0) return false;
    std::atomic<T*>* chunk = chunk_for(fd >> kChunkBits, value != nullptr);
    if (chunk == nullptr) return expected == nullptr && value == nullptr;
    return chunk[fd & (kChunkSlots - 1)].compare_exchange_strong(expected, value, std::memory_order_acq_rel);
  }

  // Calls fn(fd) for every fd in [first, last] that holds a pointer,
  // skipping chunks that were never mapped.
  template <class Fn>
  void for_each_used(int first, int last, Fn fn) const {
    if (first < 0) first = 0;
    for (int index = first >> kChunkBits; index <= (last >> kChunkBits) && index < kChunks; ++index) {
      std::atomic<T*>* chunk = chunks_[index].load(std::memory_order_acquire);
      if (chunk == nullptr) continue;
      int base = index << kChunkBits;
      int lo = first > base ? first - base : 0;
      int hi = last - base < kChunkSlots - 1 ? last - base : kChunkSlots - 1;
      for (int slot = lo; slot <= hi; ++slot)
        if (chunk[slot].load(std::memory_order_acquire) != nullptr) fn(base + slot);
    }
  }

 private:
  std::atomic<T*>* chunk_for(int index, bool create) {
    std::atomic<T*>* chunk = chunks_[index].load(std::memory_order_acquire);
    if (chunk != nullptr || !create) return chunk;
    // mmap gives zeroed pages; std::atomic<T*> of all-zero bits is nullptr.
    void* mem = ::mmap(nullptr, sizeof(std::atomic<T*>) * kChunkSlots, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return nullptr;
    auto* fresh = static_cast<std::atomic<T*>*>(mem);
    if (chunks_[index].compare_exchange_strong(chunk, fresh, std::memory_order_acq_rel)) {
      if (__lsan_register_root_region != nullptr) __lsan_register_root_region(mem, sizeof(std::atomic<T*>) * kChunkSlots);
      return fresh;
    }
    ::munmap(mem, sizeof(std::atomic<T*>) * kChunkSlots);  // another thread won the race
    return chunk;
  }

  std::atomic<std::atomic<T*>*> chunks_[kChunks] = {};
};

}  // namespace vsock::sock
