// CmConnector: the active side of the rdma_cm side band, as an
// asynchronous state machine, so that a non-blocking TCP connect never
// waits for the upgrade.
//
//   start():            rdma_resolve_addr            -> kResolvingAddress
//   ADDR_RESOLVED:      rdma_resolve_route           -> kResolvingRoute
//   ROUTE_RESOLVED:     QP (INIT), rdma_connect      -> kConnecting
//   CONNECT_RESPONSE:   QP RTR/RTS, rdma_establish   -> kEstablished
//
// Every way it can end is a distinct outcome, because the caller falls back
// to TCP on all but one and counts them by reason. The owner feeds it the
// events that owns() accepts, and calls check_deadline() when remaining_ms()
// have passed without one. A failed attempt releases its id and QP at once
// (destroying the id also tells a peer that has not answered yet).
#pragma once
#include <sys/socket.h>

#include <cstdint>

#include "core/result.hpp"
#include "rdma/cm_connection.hpp"
#include "rdma/cm_event.hpp"
#include "rdma/cm_event_channel.hpp"
#include "rdma/cm_id.hpp"
#include "rdma/cm_qp.hpp"
#include "rdma/rc_queue_pair.hpp"

namespace vsock::rdma {

enum class CmOutcome {
  kPending,       // still running
  kEstablished,   // connected; result().private_data is the peer's accept
  kRejected,      // the peer's application said no; private_data is its reject's
  kNoListener,    // nothing listens in rdma_cm on that port (REJECTED, reason 8)
  kUnreachable,   // the peer's CM never answered (UNREACHABLE)
  kAddressError,  // the address did not resolve to an RDMA device and a neighbour
  kRouteError,    // no route to it
  kTimeout,       // our own bound (CmConnectParams::timeout_ms) passed first
  kError,         // a local failure: another device, out of QPs, a failed call
};

enum class CmConnectStage { kResolvingAddress, kResolvingRoute, kConnecting, kDone };

const char* cm_outcome_name(CmOutcome outcome);
const char* cm_connect_stage_name(CmConnectStage stage);

// IB CM reject reasons that rdma_cm passes up in CmEvent::status.
constexpr int kCmRejectInvalidServiceId = 8;   // no listener for that port
constexpr int kCmRejectConsumerDefined = 28;   // rdma_reject() by the peer

struct CmConnectParams {
  sockaddr_storage destination{};  // the TCP peer: address and port number
  sockaddr_storage source{};       // our TCP address (port ignored); AF_UNSPEC: any
  // Bound of the whole attempt, e.g. Settings::upgrade_timeout_ms.
  int timeout_ms = 200;
  uint8_t private_data[kCmMaxConnectPrivateData] = {};
  uint8_t private_data_length = 0;
};

struct CmConnectResult {
  CmOutcome outcome = CmOutcome::kPending;
  // Where the attempt was when it ended (for kTimeout: what it waited for).
  CmConnectStage stage = CmConnectStage::kResolvingAddress;
  // A positive errno for kAddressError, kRouteError, kUnreachable,
  // kTimeout (ETIMEDOUT) and kError.
  int error = 0;
  // The IB CM reject reason for kRejected and kNoListener.
  int reject_reason = 0;
  // The peer's private data: its accept's for kEstablished, its reject's
  // for kRejected (zero-padded to the CM message's size, see CmPrivateData).
  CmPrivateData private_data;
};

class CmConnector {
 public:
  // Starts an attempt. Fails (and logs) only for bad parameters or when no
  // cm id can be made; anything later is an outcome, possibly at once (an
  // address rdma_cm refuses outright is kAddressError).
  static core::Result<CmConnector> start(CmEventChannel& channel, const CmConnectParams& params,
                                         const CmQpSetup& setup);

  CmConnector() = default;
  CmConnector(CmConnector&&) noexcept = default;
  CmConnector& operator=(CmConnector&&) noexcept = default;

  bool owns(const CmEvent& event) const { return id_.valid() && event.id == id_.get(); }
  // Feeds one event that owns() accepted; returns the outcome so far.
  CmOutcome on_event(const CmEvent& event);
  // kTimeout if the deadline has passed while pending; the outcome so far.
  CmOutcome check_deadline();
  // Milliseconds until the deadline (0 when passed or no longer pending).
  int remaining_ms() const;

  CmOutcome outcome() const { return result_.outcome; }
  CmConnectStage stage() const { return stage_; }
  const CmConnectResult& result() const { return result_; }
  // The QP of an attempt that got as far as kConnecting (for posting
  // receives early); invalid before that and after take_connection().
  RcQueuePair& qp() { return qp_; }
  // After kEstablished: the connection (state kConnected), once.
  CmConnection take_connection();

 private:
  CmOutcome finish(CmOutcome outcome, int error);
  CmOutcome on_address_resolved();
  CmOutcome on_route_resolved();
  CmOutcome on_connect_response(const CmEvent& event);
  CmOutcome on_rejected(const CmEvent& event);

  CmQpSetup setup_;
  CmConnectParams params_;
  CmId id_;
  RcQueuePair qp_;
  CmConnectStage stage_ = CmConnectStage::kDone;
  CmConnectResult result_;
  int64_t deadline_ms_ = 0;  // CLOCK_MONOTONIC
};

// Runs an attempt to its outcome, waiting on `channel`, which must carry
// no other id's events (they would be dropped): for tests and simple
// callers. Bounded by params.timeout_ms (plus the time to tear down).
// Fails only as start() does, or on an error of the channel itself.
core::Result<CmConnector> cm_connect_blocking(CmEventChannel& channel, const CmConnectParams& params,
                                              const CmQpSetup& setup);

}  // namespace vsock::rdma
