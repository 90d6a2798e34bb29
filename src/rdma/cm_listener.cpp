#include "rdma/cm_listener.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <utility>

#include "core/log.hpp"

namespace vsock::rdma {

core::Result<CmListener> CmListener::create(CmEventChannel& channel, const sockaddr* address, int backlog) {
  using R = core::Result<CmListener>;
  if (address == nullptr || (address->sa_family != AF_INET && address->sa_family != AF_INET6) || backlog < 0)
    return R::fail(report_error(EINVAL, "CmListener::create: need an AF_INET/AF_INET6 address and a backlog >= 0"));
  core::Result<CmId> id = CmId::create_tcp(channel);
  if (!id) return R::fail(id.error());
  CmListener listener;
  listener.id_ = std::move(id.value());
  // rdma_bind_addr takes a non-const pointer but does not write through it.
  if (rdma_bind_addr(listener.id_.get(), const_cast<sockaddr*>(address)) != 0)
    return R::fail(report_error(errno, "rdma_bind_addr (rdma_cm listener)"));
  if (rdma_listen(listener.id_.get(), backlog) != 0) return R::fail(report_error(errno, "rdma_listen"));
  return R::ok(std::move(listener));
}

uint16_t CmListener::port() const { return id_.valid() ? ntohs(rdma_get_src_port(id_.get())) : 0; }

bool CmListener::owns(const CmEvent& event) const {
  return id_.valid() && (event.listen_id == id_.get() || event.id == id_.get());
}

socklen_t CmListener::source_of(const CmEvent& request, sockaddr_storage* out) const {
  return is_request(request) ? cm_peer_address(request.id, out) : 0;
}

bool CmListener::is_request(const CmEvent& event) const {
  return id_.valid() && event.type == RDMA_CM_EVENT_CONNECT_REQUEST && event.listen_id == id_.get() &&
         event.id != nullptr;
}

core::Result<CmConnection> CmListener::prepare(const CmEvent& request, const CmQpSetup& setup) const {
  using R = core::Result<CmConnection>;
  if (!is_request(request)) return R::fail(report_error(EINVAL, "CmListener::prepare: not a request of this listener"));
  CmId id = CmId::adopt(request.id);  // ours from here on: destroyed on every failure path
  core::Result<RcQueuePair> qp = cm_create_qp(id, setup);
  if (!qp) {
    rdma_reject(id.get(), nullptr, 0);  // the peer falls back at once instead of timing out
    return R::fail(qp.error());
  }
  return R::ok(CmConnection::prepared(std::move(id), std::move(qp.value())));
}

core::Result<CmConnection> CmListener::accept(const CmEvent& request, const CmQpSetup& setup,
                                              const void* private_data, uint8_t length) const {
  using R = core::Result<CmConnection>;
  R connection = prepare(request, setup);
  if (!connection) return connection;
  Status accepted = connection.value().accept(private_data, length);
  if (!accepted) return R::fail(accepted.error());  // accept() has rejected; the id goes with the connection
  return connection;
}

Status CmListener::reject(const CmEvent& request, const void* private_data, uint8_t length) const {
  if (!is_request(request)) return Status::fail(report_error(EINVAL, "CmListener::reject: not a request of this listener"));
  CmId id = CmId::adopt(request.id);
  if (length > kCmMaxRejectPrivateData || (length > 0 && private_data == nullptr)) {
    rdma_reject(id.get(), nullptr, 0);
    return Status::fail(report_error(EINVAL, "CmListener::reject: %u bytes of private data (at most %zu)", length,
                                     kCmMaxRejectPrivateData));
  }
  if (rdma_reject(id.get(), private_data, length) != 0) {
    // EINVAL: the CM no longer holds the request (its client gave up or
    // went, which is why a held request is answered late): nothing to do.
    if (errno == EINVAL) {
      VSOCK_LOG(kDebug, "rdma: rdma_reject: the request is gone (its client gave up)");
      return Status::fail(EINVAL);
    }
    return Status::fail(report_error(errno, "rdma_reject"));
  }
  return ok_status();
}

}  // namespace vsock::rdma
