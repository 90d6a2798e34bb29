// ProtectionDomain: groups the queue pairs and memory regions that may be
// used together. Move-only; deallocated on destruction (after everything
// created in it, which is the owner's job to order).
#pragma once
#include <infiniband/verbs.h>

#include "core/result.hpp"
#include "rdma/device.hpp"

namespace vsock::rdma {

class ProtectionDomain {
 public:
  static core::Result<ProtectionDomain> create(const Device& device);

  ProtectionDomain() = default;
  ~ProtectionDomain();
  ProtectionDomain(ProtectionDomain&& other) noexcept;
  ProtectionDomain& operator=(ProtectionDomain&& other) noexcept;
  ProtectionDomain(const ProtectionDomain&) = delete;
  ProtectionDomain& operator=(const ProtectionDomain&) = delete;

  bool valid() const { return pd_ != nullptr; }
  ibv_pd* get() const { return pd_; }

 private:
  void reset();
  ibv_pd* pd_ = nullptr;
};

}  // namespace vsock::rdma
