#include "rdma/cm_udp_resolver.hpp"

#include <netinet/in.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/clock.hpp"
#include "core/log.hpp"
#include "rdma/status.hpp"

namespace vsock::rdma {
namespace {

socklen_t inet_length(const sockaddr* address) {
  if (address == nullptr) return 0;
  if (address->sa_family == AF_INET) return sizeof(sockaddr_in);
  if (address->sa_family == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

// A negative errno from an event (or 0) as a positive one, never 0.
int event_errno(int status, int fallback) { return status < 0 ? -status : fallback; }

}  // namespace

const char* sidr_outcome_name(SidrOutcome outcome) {
  switch (outcome) {
    case SidrOutcome::kPending: return "pending";
    case SidrOutcome::kResolved: return "resolved";
    case SidrOutcome::kRefused: return "refused";
    case SidrOutcome::kNoListener: return "no_listener";
    case SidrOutcome::kUnreachable: return "unreachable";
    case SidrOutcome::kAddressError: return "address_error";
    case SidrOutcome::kRouteError: return "route_error";
    case SidrOutcome::kTimeout: return "timeout";
    case SidrOutcome::kError: return "error";
  }
  return "?";
}

core::Result<CmUdpResolver> CmUdpResolver::start(CmEventChannel& channel, const sockaddr* destination,
                                                 const sockaddr* source_or_null, int timeout_ms,
                                                 const void* private_data, uint8_t length) {
  using R = core::Result<CmUdpResolver>;
  socklen_t destination_length = inet_length(destination);
  socklen_t source_length = inet_length(source_or_null);
  if (destination_length == 0 || (source_or_null != nullptr && source_length == 0) || timeout_ms <= 0 ||
      length > kCmMaxSidrRequestPrivateData || (length > 0 && private_data == nullptr))
    return R::fail(report_error(EINVAL, "CmUdpResolver::start: bad destination, source, timeout or private data"));
  core::Result<CmId> id = CmId::create_udp(channel);
  if (!id) return R::fail(id.error());

  CmUdpResolver resolver;
  resolver.id_ = std::move(id.value());
  std::memcpy(&resolver.destination_, destination, destination_length);
  if (source_or_null != nullptr) {
    std::memcpy(&resolver.source_, source_or_null, source_length);
    // Only the address pins the device; the UDP socket's port means nothing
    // to rdma_cm (and may be bound in its own RDMA_PS_UDP space).
    if (resolver.source_.ss_family == AF_INET)
      reinterpret_cast<sockaddr_in*>(&resolver.source_)->sin_port = 0;
    else
      reinterpret_cast<sockaddr_in6*>(&resolver.source_)->sin6_port = 0;
  }
  if (length > 0) std::memcpy(resolver.private_data_, private_data, length);
  resolver.private_data_length_ = length;
  resolver.deadline_ms_ = core::monotonic_ms() + timeout_ms;
  resolver.stage_ = CmConnectStage::kResolvingAddress;
  sockaddr* source = source_or_null ? reinterpret_cast<sockaddr*>(&resolver.source_) : nullptr;
  if (rdma_resolve_addr(resolver.id_.get(), source, reinterpret_cast<sockaddr*>(&resolver.destination_),
                        timeout_ms) != 0) {
    int error = errno;
    VSOCK_LOG(kDebug, "rdma_cm: rdma_resolve_addr(SIDR) refused: %s", strerrordesc_np(error));
    resolver.finish(SidrOutcome::kAddressError, error);
  }
  return R::ok(std::move(resolver));
}

int CmUdpResolver::remaining_ms() const {
  if (result_.outcome != SidrOutcome::kPending) return 0;
  int64_t left = deadline_ms_ - core::monotonic_ms();
  return left <= 0 ? 0 : static_cast<int>(left);
}

SidrOutcome CmUdpResolver::check_deadline() {
  if (result_.outcome == SidrOutcome::kPending && core::monotonic_ms() >= deadline_ms_)
    return finish(SidrOutcome::kTimeout, ETIMEDOUT);
  return result_.outcome;
}

SidrOutcome CmUdpResolver::finish(SidrOutcome outcome, int error) {
  result_.outcome = outcome;
  result_.stage = stage_;
  result_.error = error;
  stage_ = CmConnectStage::kDone;
  // Whatever the outcome, the id has served: destroying it withdraws a
  // request still outstanding and drops its queued events.
  id_.reset();
  return outcome;
}

SidrOutcome CmUdpResolver::on_event(const CmEvent& event) {
  if (result_.outcome != SidrOutcome::kPending || !owns(event)) return result_.outcome;
  if (check_deadline() != SidrOutcome::kPending) return result_.outcome;
  switch (event.type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (stage_ == CmConnectStage::kResolvingAddress) return on_address_resolved();
      break;
    case RDMA_CM_EVENT_ADDR_ERROR:
      return finish(SidrOutcome::kAddressError, event_errno(event.status, EHOSTUNREACH));
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      if (stage_ == CmConnectStage::kResolvingRoute) return on_route_resolved();
      break;
    case RDMA_CM_EVENT_ROUTE_ERROR:
      return finish(SidrOutcome::kRouteError, event_errno(event.status, ENETUNREACH));
    case RDMA_CM_EVENT_ESTABLISHED:
      if (stage_ == CmConnectStage::kConnecting) return on_reply(event);
      break;
    case RDMA_CM_EVENT_UNREACHABLE:
      return on_unreachable(event);
    case RDMA_CM_EVENT_REJECTED:
      // Not what the kernel sends for SIDR today; read as the IB CM reasons.
      result_.sidr_status = 0;
      if (event.status == kCmRejectInvalidServiceId) return finish(SidrOutcome::kNoListener, ECONNREFUSED);
      result_.private_data = event.private_data;
      return finish(SidrOutcome::kRefused, ECONNREFUSED);
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return finish(SidrOutcome::kError, event_errno(event.status, ECONNABORTED));
    default:
      break;
  }
  VSOCK_LOG(kDebug, "rdma_cm: %s (status %d) ignored while resolving (SIDR, %s)", cm_event_name(event.type),
            event.status, cm_connect_stage_name(stage_));
  return result_.outcome;
}

SidrOutcome CmUdpResolver::on_address_resolved() {
  int left = remaining_ms();
  if (left <= 0) return finish(SidrOutcome::kTimeout, ETIMEDOUT);
  if (rdma_resolve_route(id_.get(), left) != 0)
    return finish(SidrOutcome::kRouteError, report_error(errno, "rdma_resolve_route(SIDR)"));
  stage_ = CmConnectStage::kResolvingRoute;
  return result_.outcome;
}

SidrOutcome CmUdpResolver::on_route_resolved() {
  stage_ = CmConnectStage::kConnecting;
  // Keep what the AH attributes will be good for before the id goes.
  result_.device_name = id_.device_name();
  result_.port = id_.port();
  rdma_conn_param param{};
  param.private_data = private_data_length_ > 0 ? private_data_ : nullptr;
  param.private_data_len = private_data_length_;
  // On a UD id, rdma_connect sends a SIDR REQ; the request does not carry
  // our QPN (the answer's datagrams carry it), so none is given.
  if (rdma_connect(id_.get(), &param) != 0)
    return finish(SidrOutcome::kError, report_error(errno, "rdma_connect(SIDR)"));
  return result_.outcome;
}

SidrOutcome CmUdpResolver::on_reply(const CmEvent& event) {
  if (event.status != 0 || !event.ud.has)
    return finish(SidrOutcome::kError, event_errno(event.status, EPROTO));
  result_.ah_attr = event.ud.ah_attr;
  result_.qpn = event.ud.qpn;
  result_.qkey = event.ud.qkey;
  result_.private_data = event.private_data;
  if (result_.qpn == 0 || result_.qpn > 0xffffff) return finish(SidrOutcome::kError, EPROTO);
  return finish(SidrOutcome::kResolved, 0);
}

SidrOutcome CmUdpResolver::on_unreachable(const CmEvent& event) {
  if (event.status < 0) return finish(SidrOutcome::kUnreachable, event_errno(event.status, ETIMEDOUT));
  result_.sidr_status = event.status;
  if (event.status == kSidrStatusUnsupported) return finish(SidrOutcome::kNoListener, ECONNREFUSED);
  if (event.status == kSidrStatusReject) {
    result_.private_data = event.private_data;
    return finish(SidrOutcome::kRefused, ECONNREFUSED);
  }
  return finish(SidrOutcome::kUnreachable, EHOSTUNREACH);
}

core::Result<CmUdpResolver> sidr_resolve_blocking(CmEventChannel& channel, const sockaddr* destination,
                                                  const sockaddr* source_or_null, int timeout_ms,
                                                  const void* private_data, uint8_t length) {
  using R = core::Result<CmUdpResolver>;
  R started = CmUdpResolver::start(channel, destination, source_or_null, timeout_ms, private_data, length);
  if (!started) return started;
  CmUdpResolver& resolver = started.value();
  for (int round = 0; round < 100000 && resolver.outcome() == SidrOutcome::kPending; ++round) {
    core::Result<CmEvent> event = channel.next_event(resolver.remaining_ms());
    if (!event) {
      if (event.error() != EAGAIN && event.error() != EINTR) return R::fail(event.error());
      resolver.check_deadline();
      continue;
    }
    if (resolver.owns(event.value())) {
      resolver.on_event(event.value());
    } else {
      VSOCK_LOG(kDebug, "rdma_cm: sidr_resolve_blocking dropped %s of another id", cm_event_name(event.value().type));
    }
  }
  if (resolver.outcome() == SidrOutcome::kPending) resolver.check_deadline();
  return started;
}

}  // namespace vsock::rdma
