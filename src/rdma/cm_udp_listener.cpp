#include "rdma/cm_udp_listener.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <utility>

#include "core/log.hpp"
#include "rdma/ud_queue_pair.hpp"

namespace vsock::rdma {
namespace {

constexpr uint32_t kQpnMask = 0xffffff;

// rdma_reject() of a request whose requester may have gone: EINVAL then
// means the CM no longer holds it, which is not worth an error line.
Status reject_request(rdma_cm_id* id, const char* what) {
  if (rdma_reject(id, nullptr, 0) == 0) return ok_status();
  if (errno == EINVAL) {
    VSOCK_LOG(kDebug, "rdma: %s: rdma_reject: the request is gone", what);
    return Status::fail(EINVAL);
  }
  return Status::fail(report_error(errno, "%s: rdma_reject", what));
}

}  // namespace

core::Result<CmUdpListener> CmUdpListener::create(CmEventChannel& channel, const sockaddr* address) {
  using R = core::Result<CmUdpListener>;
  if (address == nullptr || (address->sa_family != AF_INET && address->sa_family != AF_INET6))
    return R::fail(report_error(EINVAL, "CmUdpListener::create: need an AF_INET/AF_INET6 address"));
  core::Result<CmId> id = CmId::create_udp(channel);
  if (!id) return R::fail(id.error());
  CmUdpListener listener;
  listener.id_ = std::move(id.value());
  if (rdma_bind_addr(listener.id_.get(), const_cast<sockaddr*>(address)) != 0)
    return R::fail(report_error(errno, "rdma_bind_addr (rdma_cm UDP listener)"));
  // The backlog bounds requests not yet taken from the channel; 0 lets
  // rdma_cm use its default.
  if (rdma_listen(listener.id_.get(), 0) != 0) return R::fail(report_error(errno, "rdma_listen(RDMA_PS_UDP)"));
  return R::ok(std::move(listener));
}

uint16_t CmUdpListener::port() const { return id_.valid() ? ntohs(rdma_get_src_port(id_.get())) : 0; }

bool CmUdpListener::owns(const CmEvent& event) const {
  return id_.valid() && (event.listen_id == id_.get() || event.id == id_.get());
}

bool CmUdpListener::is_request(const CmEvent& event) const {
  return id_.valid() && event.type == RDMA_CM_EVENT_CONNECT_REQUEST && event.listen_id == id_.get() &&
         event.id != nullptr;
}

socklen_t CmUdpListener::source_of(const CmEvent& request, sockaddr_storage* out) const {
  return is_request(request) ? cm_peer_address(request.id, out) : 0;
}

Status CmUdpListener::answer(const CmEvent& request, uint32_t qpn, uint32_t qkey, const void* private_data,
                             uint8_t length) const {
  if (!is_request(request))
    return Status::fail(report_error(EINVAL, "CmUdpListener::answer: not a request of this listener"));
  CmId id = CmId::adopt(request.id);  // ours from here on: destroyed on every path
  if (qpn == 0 || qpn > kQpnMask || qkey != kUdQkey || length > kCmMaxSidrReplyPrivateData ||
      (length > 0 && private_data == nullptr)) {
    reject_request(id.get(), "CmUdpListener::answer");
    return Status::fail(report_error(EINVAL,
                                     "CmUdpListener::answer: qpn %u, qkey 0x%x (must be 0x%x), %u bytes of "
                                     "private data (at most %zu)",
                                     qpn, qkey, kUdQkey, length, kCmMaxSidrReplyPrivateData));
  }
  rdma_conn_param param{};
  param.private_data = private_data;
  param.private_data_len = length;
  param.qp_num = qpn;  // the id has no QP: this is the QPN the SIDR REP carries
  if (rdma_accept(id.get(), &param) != 0) {
    if (errno == EINVAL) {
      VSOCK_LOG(kDebug, "rdma: rdma_accept(SIDR): the request is gone");
      return Status::fail(EINVAL);
    }
    return Status::fail(report_error(errno, "rdma_accept(SIDR, qpn %u)", qpn));
  }
  return ok_status();
}

Status CmUdpListener::refuse(const CmEvent& request) const {
  if (!is_request(request))
    return Status::fail(report_error(EINVAL, "CmUdpListener::refuse: not a request of this listener"));
  CmId id = CmId::adopt(request.id);
  return reject_request(id.get(), "CmUdpListener::refuse");
}

}  // namespace vsock::rdma
