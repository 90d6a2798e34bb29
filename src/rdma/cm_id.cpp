#include "rdma/cm_id.hpp"

#include <cerrno>
#include <cstring>
#include <utility>

#include "rdma/cm_event_channel.hpp"
#include "rdma/status.hpp"

namespace vsock::rdma {

core::Result<CmId> CmId::create_tcp(CmEventChannel& channel) {
  using R = core::Result<CmId>;
  if (!channel.valid()) return R::fail(report_error(EINVAL, "CmId::create_tcp: no event channel"));
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel.get(), &id, nullptr, RDMA_PS_TCP) != 0)
    return R::fail(report_error(errno, "rdma_create_id(RDMA_PS_TCP)"));
  return R::ok(CmId(id));
}

core::Result<CmId> CmId::create_udp(CmEventChannel& channel) {
  using R = core::Result<CmId>;
  if (!channel.valid()) return R::fail(report_error(EINVAL, "CmId::create_udp: no event channel"));
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel.get(), &id, nullptr, RDMA_PS_UDP) != 0)
    return R::fail(report_error(errno, "rdma_create_id(RDMA_PS_UDP)"));
  return R::ok(CmId(id));
}

CmId::~CmId() { reset(); }

void CmId::reset() {
  if (id_ != nullptr && rdma_destroy_id(id_) != 0) report_error(errno, "rdma_destroy_id");
  id_ = nullptr;
}

CmId::CmId(CmId&& other) noexcept : id_(std::exchange(other.id_, nullptr)) {}

CmId& CmId::operator=(CmId&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = std::exchange(other.id_, nullptr);
  }
  return *this;
}

std::string CmId::device_name() const {
  if (id_ == nullptr || id_->verbs == nullptr || id_->verbs->device == nullptr) return std::string();
  const char* name = ibv_get_device_name(id_->verbs->device);
  return name ? std::string(name) : std::string();
}

socklen_t cm_peer_address(rdma_cm_id* id, sockaddr_storage* out) {
  const sockaddr* peer = id != nullptr ? rdma_get_peer_addr(id) : nullptr;
  socklen_t length = peer == nullptr                  ? 0
                     : peer->sa_family == AF_INET    ? sizeof(sockaddr_in)
                     : peer->sa_family == AF_INET6   ? sizeof(sockaddr_in6)
                                                      : 0;
  if (length != 0) std::memcpy(out, peer, length);
  return length;
}

}  // namespace vsock::rdma
