// CmUdpResolver: the asking side of SIDR (rdma_cm RDMA_PS_UDP), as an
// asynchronous state machine like CmConnector, so that the first datagram
// to an unknown destination goes through the kernel while this runs off
// the application's thread (DESIGN decision 5).
//
//   start():          rdma_resolve_addr                 -> kResolvingAddress
//   ADDR_RESOLVED:    rdma_resolve_route                -> kResolvingRoute
//   ROUTE_RESOLVED:   rdma_connect (sends the SIDR REQ) -> kConnecting
//   ESTABLISHED:      the SIDR REP's AH attributes, QPN, qkey -> kResolved
//
// The answer comes back as UNREACHABLE with the SIDR REP's status when it
// is not a success (the kernel's cma_sidr_rep_handler): 1 (no listener on
// that port: the remote CM answers for it) is kNoListener, 2 (the
// listener refused) kRefused, -ETIMEDOUT (no answer after the CM's
// retries) kUnreachable. The id is destroyed as soon as the attempt ends:
// the result keeps everything needed to build an AddressHandle, but the
// AH attributes are only good on the device and port the id resolved on,
// which the result names.
#pragma once
#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "core/result.hpp"
#include "rdma/cm_connector.hpp"
#include "rdma/cm_event.hpp"
#include "rdma/cm_event_channel.hpp"
#include "rdma/cm_id.hpp"

namespace vsock::rdma {

enum class SidrOutcome {
  kPending,       // still running
  kResolved,      // the listener answered: result() has its QPN, qkey, AH attributes
  kRefused,       // the listener refused (SIDR REP status 2)
  kNoListener,    // nothing listens in RDMA_PS_UDP on that port (status 1)
  kUnreachable,   // no answer in the CM's own time, or another SIDR status
  kAddressError,  // the address did not resolve to an RDMA device and a neighbour
  kRouteError,    // no route to it
  kTimeout,       // our own bound passed first
  kError,         // a local failure
};

const char* sidr_outcome_name(SidrOutcome outcome);

// SIDR REP statuses (IB spec, ib_cm_sidr_status) as CmEvent::status of an
// UNREACHABLE.
constexpr int kSidrStatusUnsupported = 1;  // no service: nobody listens there
constexpr int kSidrStatusReject = 2;       // the listener refused
constexpr int kSidrStatusNoQp = 3;
constexpr int kSidrStatusRedirect = 4;
constexpr int kSidrStatusVersion = 5;

struct SidrResult {
  SidrOutcome outcome = SidrOutcome::kPending;
  // Where the attempt was when it ended (for kTimeout: what it waited for).
  CmConnectStage stage = CmConnectStage::kResolvingAddress;
  // A positive errno for every outcome but kResolved and kPending.
  int error = 0;
  // The SIDR REP status of kRefused, kNoListener and a kUnreachable that
  // had one (0: none came).
  int sidr_status = 0;
  // kResolved: how to send to the listener's QP, valid on `device_name`,
  // port `port` only.
  ibv_ah_attr ah_attr{};
  uint32_t qpn = 0;
  uint32_t qkey = 0;
  std::string device_name;
  uint8_t port = 0;
  // The listener's private data (kResolved, kRefused), zero-padded to
  // kCmMaxSidrReplyPrivateData.
  CmPrivateData private_data;
};

class CmUdpResolver {
 public:
  // Starts resolving `destination` (AF_INET/AF_INET6 with the UDP port);
  // `source_or_null` pins the local address (its port is ignored).
  // `private_data` (at most kCmMaxSidrRequestPrivateData bytes) goes in the
  // SIDR REQ. Fails (and logs) only for bad parameters or when no id can
  // be made; anything later is an outcome, possibly at once.
  static core::Result<CmUdpResolver> start(CmEventChannel& channel, const sockaddr* destination,
                                           const sockaddr* source_or_null, int timeout_ms,
                                           const void* private_data, uint8_t length);

  CmUdpResolver() = default;
  CmUdpResolver(CmUdpResolver&&) noexcept = default;
  CmUdpResolver& operator=(CmUdpResolver&&) noexcept = default;

  bool owns(const CmEvent& event) const { return id_.valid() && event.id == id_.get(); }
  // Feeds one event that owns() accepted; returns the outcome so far.
  SidrOutcome on_event(const CmEvent& event);
  // kTimeout if the deadline has passed while pending; the outcome so far.
  SidrOutcome check_deadline();
  // Milliseconds until the deadline (0 when passed or no longer pending).
  int remaining_ms() const;

  SidrOutcome outcome() const { return result_.outcome; }
  CmConnectStage stage() const { return stage_; }
  const SidrResult& result() const { return result_; }

 private:
  SidrOutcome finish(SidrOutcome outcome, int error);
  SidrOutcome on_address_resolved();
  SidrOutcome on_route_resolved();
  SidrOutcome on_reply(const CmEvent& event);
  SidrOutcome on_unreachable(const CmEvent& event);

  CmId id_;
  sockaddr_storage destination_{};
  sockaddr_storage source_{};
  uint8_t private_data_[kCmMaxSidrRequestPrivateData] = {};
  uint8_t private_data_length_ = 0;
  CmConnectStage stage_ = CmConnectStage::kDone;
  SidrResult result_;
  int64_t deadline_ms_ = 0;  // CLOCK_MONOTONIC
};

// Runs a resolution to its outcome, waiting on `channel`, which must carry
// no other id's events (they are dropped): for tests and simple callers.
// Bounded by timeout_ms. Fails only as start() does, or on an error of the
// channel itself.
core::Result<CmUdpResolver> sidr_resolve_blocking(CmEventChannel& channel, const sockaddr* destination,
                                                  const sockaddr* source_or_null, int timeout_ms,
                                                  const void* private_data, uint8_t length);

}  // namespace vsock::rdma
