#include "rdma/cm_connector.hpp"

#include <netinet/in.h>
#include <time.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/clock.hpp"
#include "core/log.hpp"
#include "rdma/status.hpp"

namespace vsock::rdma {
namespace {

bool is_inet(const sockaddr_storage& address) {
  return address.ss_family == AF_INET || address.ss_family == AF_INET6;
}

// A negative errno from an event (or 0) as a positive one, never 0.
int event_errno(int status, int fallback) { return status < 0 ? -status : (status > 0 ? status : fallback); }

}  // namespace

const char* cm_outcome_name(CmOutcome outcome) {
  switch (outcome) {
    case CmOutcome::kPending: return "pending";
    case CmOutcome::kEstablished: return "established";
    case CmOutcome::kRejected: return "rejected";
    case CmOutcome::kNoListener: return "no_listener";
    case CmOutcome::kUnreachable: return "unreachable";
    case CmOutcome::kAddressError: return "address_error";
    case CmOutcome::kRouteError: return "route_error";
    case CmOutcome::kTimeout: return "timeout";
    case CmOutcome::kError: return "error";
  }
  return "?";
}

const char* cm_connect_stage_name(CmConnectStage stage) {
  switch (stage) {
    case CmConnectStage::kResolvingAddress: return "resolving_address";
    case CmConnectStage::kResolvingRoute: return "resolving_route";
    case CmConnectStage::kConnecting: return "connecting";
    case CmConnectStage::kDone: return "done";
  }
  return "?";
}

core::Result<CmConnector> CmConnector::start(CmEventChannel& channel, const CmConnectParams& params,
                                             const CmQpSetup& setup) {
  using R = core::Result<CmConnector>;
  if (!is_inet(params.destination) || (params.source.ss_family != AF_UNSPEC && !is_inet(params.source)) ||
      params.timeout_ms <= 0 || params.private_data_length > kCmMaxConnectPrivateData)
    return R::fail(report_error(EINVAL, "CmConnector::start: bad destination, source, timeout or private data"));
  if (setup.device == nullptr ||
      (setup.existing == nullptr && (setup.pd == nullptr || setup.send_cq == nullptr || setup.recv_cq == nullptr)))
    return R::fail(report_error(EINVAL, "CmConnector::start: incomplete CmQpSetup"));
  core::Result<CmId> id = CmId::create_tcp(channel);
  if (!id) return R::fail(id.error());

  CmConnector connector;
  connector.setup_ = setup;
  connector.params_ = params;
  connector.id_ = std::move(id.value());
  connector.deadline_ms_ = core::monotonic_ms() + params.timeout_ms;
  connector.stage_ = CmConnectStage::kResolvingAddress;
  // The source pins the device and port rdma_cm uses to the interface the
  // TCP connection left from; without it the routing table decides. Its
  // port is the TCP socket's and means nothing here: rdma_cm would try to
  // bind it in its own TCP port space (EADDRINUSE if a listener has it).
  if (connector.params_.source.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&connector.params_.source)->sin_port = 0;
  else if (connector.params_.source.ss_family == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&connector.params_.source)->sin6_port = 0;
  sockaddr* source =
      params.source.ss_family == AF_UNSPEC ? nullptr : reinterpret_cast<sockaddr*>(&connector.params_.source);
  sockaddr* destination = reinterpret_cast<sockaddr*>(&connector.params_.destination);
  if (rdma_resolve_addr(connector.id_.get(), source, destination, params.timeout_ms) != 0) {
    // Refused at once (no RDMA device for that source, unreachable network):
    // an outcome like any other, not a failure of the library.
    int error = errno;
    VSOCK_LOG(kDebug, "rdma_cm: rdma_resolve_addr refused: %s", strerrordesc_np(error));
    connector.finish(CmOutcome::kAddressError, error);
  }
  return R::ok(std::move(connector));
}

int CmConnector::remaining_ms() const {
  if (result_.outcome != CmOutcome::kPending) return 0;
  int64_t left = deadline_ms_ - core::monotonic_ms();
  return left <= 0 ? 0 : static_cast<int>(left);
}

CmOutcome CmConnector::check_deadline() {
  if (result_.outcome == CmOutcome::kPending && core::monotonic_ms() >= deadline_ms_) return finish(CmOutcome::kTimeout, ETIMEDOUT);
  return result_.outcome;
}

CmOutcome CmConnector::finish(CmOutcome outcome, int error) {
  result_.outcome = outcome;
  result_.stage = stage_;
  result_.error = error;
  stage_ = CmConnectStage::kDone;
  if (outcome != CmOutcome::kEstablished) {
    // QP first, then the id: destroying the id withdraws a request the peer
    // has not answered (its CM sees a reject) and drops queued events.
    qp_ = RcQueuePair();
    id_.reset();
  }
  return outcome;
}

CmOutcome CmConnector::on_event(const CmEvent& event) {
  if (result_.outcome != CmOutcome::kPending || !owns(event)) return result_.outcome;
  if (check_deadline() != CmOutcome::kPending) return result_.outcome;  // too late: the bound is the bound
  switch (event.type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (stage_ == CmConnectStage::kResolvingAddress) return on_address_resolved();
      break;
    case RDMA_CM_EVENT_ADDR_ERROR:
      return finish(CmOutcome::kAddressError, event_errno(event.status, EHOSTUNREACH));
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      if (stage_ == CmConnectStage::kResolvingRoute) return on_route_resolved();
      break;
    case RDMA_CM_EVENT_ROUTE_ERROR:
      return finish(CmOutcome::kRouteError, event_errno(event.status, ENETUNREACH));
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      if (stage_ == CmConnectStage::kConnecting) return on_connect_response(event);
      break;
    case RDMA_CM_EVENT_REJECTED:
      return on_rejected(event);
    case RDMA_CM_EVENT_UNREACHABLE:
      return finish(CmOutcome::kUnreachable, event_errno(event.status, ETIMEDOUT));
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return finish(CmOutcome::kError, event_errno(event.status, ECONNABORTED));
    default:
      break;
  }
  VSOCK_LOG(kDebug, "rdma_cm: %s (status %d) ignored while %s", cm_event_name(event.type), event.status,
            cm_connect_stage_name(stage_));
  return result_.outcome;
}

CmOutcome CmConnector::on_address_resolved() {
  int left = remaining_ms();
  if (left <= 0) return finish(CmOutcome::kTimeout, ETIMEDOUT);
  if (rdma_resolve_route(id_.get(), left) != 0)
    return finish(CmOutcome::kRouteError, report_error(errno, "rdma_resolve_route"));
  stage_ = CmConnectStage::kResolvingRoute;
  return result_.outcome;
}

CmOutcome CmConnector::on_route_resolved() {
  stage_ = CmConnectStage::kConnecting;
  core::Result<RcQueuePair> qp = cm_create_qp(id_, setup_);
  if (!qp) return finish(CmOutcome::kError, qp.error());
  qp_ = std::move(qp.value());
  rdma_conn_param param = cm_conn_param(qp_, params_.private_data, params_.private_data_length);
  if (rdma_connect(id_.get(), &param) != 0) return finish(CmOutcome::kError, report_error(errno, "rdma_connect"));
  return result_.outcome;
}

CmOutcome CmConnector::on_connect_response(const CmEvent& event) {
  result_.private_data = event.private_data;
  // The QP is ours, not librdmacm's: it hands us CONNECT_RESPONSE and leaves
  // RTR, RTS and the final handshake message (rdma_establish) to us.
  Status ready = cm_qp_ready(id_, qp_);
  if (!ready) return finish(CmOutcome::kError, ready.error());
  if (rdma_establish(id_.get()) != 0) return finish(CmOutcome::kError, report_error(errno, "rdma_establish"));
  return finish(CmOutcome::kEstablished, 0);
}

CmOutcome CmConnector::on_rejected(const CmEvent& event) {
  result_.reject_reason = event.status;
  if (event.status == kCmRejectInvalidServiceId) return finish(CmOutcome::kNoListener, ECONNREFUSED);
  result_.private_data = event.private_data;
  return finish(CmOutcome::kRejected, ECONNREFUSED);
}

CmConnection CmConnector::take_connection() {
  if (result_.outcome != CmOutcome::kEstablished || !id_.valid()) return CmConnection();
  return CmConnection::connected(std::move(id_), std::move(qp_));
}

core::Result<CmConnector> cm_connect_blocking(CmEventChannel& channel, const CmConnectParams& params,
                                              const CmQpSetup& setup) {
  using R = core::Result<CmConnector>;
  R started = CmConnector::start(channel, params, setup);
  if (!started) return started;
  CmConnector& connector = started.value();
  // Bounded by the deadline; the count only guards against a channel that
  // keeps yielding events of no interest.
  for (int round = 0; round < 100000 && connector.outcome() == CmOutcome::kPending; ++round) {
    int wait = connector.remaining_ms();
    core::Result<CmEvent> event = channel.next_event(wait);
    if (!event) {
      if (event.error() != EAGAIN && event.error() != EINTR) return R::fail(event.error());
      connector.check_deadline();
      continue;
    }
    if (connector.owns(event.value())) {
      connector.on_event(event.value());
    } else {
      VSOCK_LOG(kDebug, "rdma_cm: cm_connect_blocking dropped %s of another id", cm_event_name(event.value().type));
    }
  }
  if (connector.outcome() == CmOutcome::kPending) connector.check_deadline();
  return started;
}

}  // namespace vsock::rdma
