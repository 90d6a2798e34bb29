// CmConnection: one rdma_cm connection, its cm id and its RC queue pair.
//
// Made by CmListener::prepare() on the passive side (state kPrepared: the QP
// is in INIT and receives may be posted; then accept() or reject()) and by
// CmConnector on the active side (state kConnected). Its events (routed by
// owns()) move it on:
//
//   kPrepared --accept()--> kAccepting --ESTABLISHED--> kConnected
//   kAccepting --REJECTED / CONNECT_ERROR / UNREACHABLE--> kFailed
//   kConnected --disconnect()--> kDisconnecting --DISCONNECTED--> kDisconnected
//   kConnected --DISCONNECTED (peer)--> kDisconnected (answered at once)
//
// Teardown: a connection that still runs is disconnected (the peer gets a
// DISCONNECTED event), its QP moved to ERROR so that outstanding work
// requests flush, the QP destroyed, then the cm id. The caller keeps the
// PD, CQs and event channel alive until after that, and takes the flushed
// completions out of its CQs.
#pragma once
#include <rdma/rdma_cma.h>

#include <cstdint>

#include "core/result.hpp"
#include "rdma/cm_event.hpp"
#include "rdma/cm_id.hpp"
#include "rdma/rc_queue_pair.hpp"
#include "rdma/status.hpp"

namespace vsock::rdma {

enum class CmConnectionState { kEmpty, kPrepared, kAccepting, kConnected, kDisconnecting, kDisconnected, kFailed };

const char* cm_connection_state_name(CmConnectionState state);

class CmConnection {
 public:
  // Wraps an id whose request has arrived and the QP made for it (INIT).
  static CmConnection prepared(CmId id, RcQueuePair qp);
  // Wraps an id and a QP that are connected already (the active side).
  static CmConnection connected(CmId id, RcQueuePair qp);

  CmConnection() = default;
  ~CmConnection();
  CmConnection(CmConnection&& other) noexcept;
  CmConnection& operator=(CmConnection&& other) noexcept;
  CmConnection(const CmConnection&) = delete;
  CmConnection& operator=(const CmConnection&) = delete;

  CmConnectionState state() const { return state_; }
  rdma_cm_id* id() const { return id_.get(); }
  RcQueuePair& qp() { return qp_; }
  const RcQueuePair& qp() const { return qp_; }
  // Whether `event` is about this connection's id.
  bool owns(const CmEvent& event) const { return id_.valid() && event.id == id_.get(); }
  // The other end's address and rdma_cm port, as rdma_cm knows it; 0 when
  // there is no id or no address.
  socklen_t peer_address(sockaddr_storage* out) const;
  // The status of the event that failed or ended the connection (0: none).
  int last_status() const { return last_status_; }

  // kPrepared only: moves the QP to RTS and answers the request with
  // `private_data` (at most kCmMaxAcceptPrivateData bytes) -> kAccepting.
  // On failure the request is rejected and the state is kFailed.
  Status accept(const void* private_data, uint8_t length);
  // kPrepared only: answers the request with a reject carrying
  // `private_data` (at most kCmMaxRejectPrivateData bytes) -> kFailed.
  Status reject(const void* private_data, uint8_t length);
  // Feeds an event owned by this connection. Unexpected events are logged
  // at debug level and change nothing.
  Status on_event(const CmEvent& event);
  // Starts an orderly disconnect (kAccepting, kConnected): the peer gets
  // DISCONNECTED, we get DISCONNECTED once it answered (or the CM gave up).
  // The QP goes to ERROR at once. A no-op in other states. In kAccepting the
  // CM has nothing to disconnect yet (no DISCONNECTED follows): destroying
  // the connection is what withdraws an accept.
  // The last ACKs may be lost with the QP: a peer waiting for a completion
  // learns of the end from its DISCONNECTED event (which flushes its QP).
  // Disconnect when both sides are done, as a close handshake does.
  Status disconnect();

 private:
  CmConnection(CmId id, RcQueuePair qp, CmConnectionState state)
      : id_(std::move(id)), qp_(std::move(qp)), state_(state) {}
  void reset();
  void stop_qp();

  // Declaration order matters only for the defaulted parts; reset() orders
  // teardown explicitly (QP before id).
  CmId id_;
  RcQueuePair qp_;
  CmConnectionState state_ = CmConnectionState::kEmpty;
  bool disconnect_sent_ = false;
  int last_status_ = 0;
};

}  // namespace vsock::rdma
