#include "rdma/address_handle.hpp"

#include <cerrno>
#include <utility>

#include "rdma/status.hpp"

namespace vsock::rdma {

static_assert(sizeof(ibv_grh) == kGrhSize, "the GRH slot is 40 bytes");

core::Result<AddressHandle> AddressHandle::create(const ProtectionDomain& pd, const ibv_ah_attr& attr) {
  using R = core::Result<AddressHandle>;
  if (!pd.valid()) return R::fail(report_error(EINVAL, "AddressHandle::create: invalid PD"));
  AddressHandle handle;
  ibv_ah_attr copy = attr;  // ibv_create_ah takes a non-const pointer
  handle.ah_ = ibv_create_ah(pd.get(), &copy);
  if (handle.ah_ == nullptr) return R::fail(report_error(errno, "ibv_create_ah(port %u)", attr.port_num));
  return R::ok(std::move(handle));
}

core::Result<AddressHandle> AddressHandle::from_completion(const ProtectionDomain& pd, uint8_t port,
                                                           const ibv_wc& wc, const ibv_grh* grh) {
  using R = core::Result<AddressHandle>;
  if (!pd.valid() || grh == nullptr)
    return R::fail(report_error(EINVAL, "AddressHandle::from_completion: no PD or GRH"));
  // The slot comes from the network: refuse what rdma-core would misread.
  if ((wc.wc_flags & IBV_WC_GRH) && !parse_grh(reinterpret_cast<const uint8_t*>(grh), kGrhSize))
    return R::fail(EPROTO);
  AddressHandle handle;
  ibv_wc wc_copy = wc;
  ibv_grh grh_copy = *grh;
  handle.ah_ = ibv_create_ah_from_wc(pd.get(), &wc_copy, &grh_copy, port);
  if (handle.ah_ == nullptr)
    return R::fail(report_error(errno, "ibv_create_ah_from_wc(port %u, source QP %u)", port, wc.src_qp));
  return R::ok(std::move(handle));
}

AddressHandle::~AddressHandle() { reset(); }

void AddressHandle::reset() {
  if (ah_ != nullptr) {
    int rc = ibv_destroy_ah(ah_);
    if (rc != 0) report_error(rc, "ibv_destroy_ah");
  }
  ah_ = nullptr;
}

AddressHandle::AddressHandle(AddressHandle&& other) noexcept : ah_(std::exchange(other.ah_, nullptr)) {}

AddressHandle& AddressHandle::operator=(AddressHandle&& other) noexcept {
  if (this != &other) {
    reset();
    ah_ = std::exchange(other.ah_, nullptr);
  }
  return *this;
}

socklen_t source_address_of(const ibv_grh& grh, sockaddr_storage* out) {
  core::Result<GrhInfo> info = parse_grh(reinterpret_cast<const uint8_t*>(&grh), sizeof grh);
  if (!info) return 0;
  *out = info.value().source;
  return grh_address_length(*out);
}

socklen_t destination_address_of(const ibv_grh& grh, sockaddr_storage* out) {
  core::Result<GrhInfo> info = parse_grh(reinterpret_cast<const uint8_t*>(&grh), sizeof grh);
  if (!info) return 0;
  *out = info.value().destination;
  return grh_address_length(*out);
}

}  // namespace vsock::rdma
