#include "rdma/protection_domain.hpp"

#include <cerrno>
#include <utility>

#include "rdma/status.hpp"

namespace vsock::rdma {

core::Result<ProtectionDomain> ProtectionDomain::create(const Device& device) {
  using R = core::Result<ProtectionDomain>;
  if (!device.valid()) return R::fail(report_error(EINVAL, "ProtectionDomain::create: no device"));
  ProtectionDomain pd;
  pd.pd_ = ibv_alloc_pd(device.context());
  if (pd.pd_ == nullptr) return R::fail(report_error(errno, "ibv_alloc_pd(%s)", device.name().c_str()));
  return R::ok(std::move(pd));
}

ProtectionDomain::~ProtectionDomain() { reset(); }

// ibv_dealloc_pd fails (EBUSY) while a QP or MR still uses the PD; that is an
// ownership bug in the caller, so it is logged rather than hidden.
void ProtectionDomain::reset() {
  if (pd_ != nullptr) {
    int rc = ibv_dealloc_pd(pd_);
    if (rc != 0) report_error(rc, "ibv_dealloc_pd");
  }
  pd_ = nullptr;
}

ProtectionDomain::ProtectionDomain(ProtectionDomain&& other) noexcept : pd_(std::exchange(other.pd_, nullptr)) {}

ProtectionDomain& ProtectionDomain::operator=(ProtectionDomain&& other) noexcept {
  if (this != &other) {
    reset();
    pd_ = std::exchange(other.pd_, nullptr);
  }
  return *this;
}

}  // namespace vsock::rdma
