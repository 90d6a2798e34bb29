// MemoryRegion: a page-aligned, zero-filled buffer of its own, registered
// with a protection domain. Move-only; deregistered, then unmapped, on
// destruction, so a stale rkey is dead before the memory goes away.
#pragma once
#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

#include "core/result.hpp"
#include "rdma/protection_domain.hpp"

namespace vsock::rdma {

class MemoryRegion {
 public:
  // Maps at least `size` bytes (rounded up to whole pages) and registers them
  // with `access` (IBV_ACCESS_* flags). Grant remote access only to memory a
  // peer must write or read: the design allows it for receive rings alone.
  static core::Result<MemoryRegion> allocate(const ProtectionDomain& pd, size_t size, int access);

  MemoryRegion() = default;
  ~MemoryRegion();
  MemoryRegion(MemoryRegion&& other) noexcept;
  MemoryRegion& operator=(MemoryRegion&& other) noexcept;
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  bool valid() const { return mr_ != nullptr; }
  ibv_mr* get() const { return mr_; }
  uint8_t* data() const { return static_cast<uint8_t*>(base_); }
  // The usable size: what was asked for, rounded up to whole pages.
  size_t size() const { return size_; }
  uint64_t address() const { return reinterpret_cast<uintptr_t>(base_); }
  uint32_t lkey() const { return mr_ ? mr_->lkey : 0; }
  uint32_t rkey() const { return mr_ ? mr_->rkey : 0; }
  int access() const { return access_; }

 private:
  void reset();
  void* base_ = nullptr;
  size_t size_ = 0;
  int access_ = 0;
  ibv_mr* mr_ = nullptr;
};

}  // namespace vsock::rdma
