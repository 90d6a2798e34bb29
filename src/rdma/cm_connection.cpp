#include "rdma/cm_connection.hpp"

#include <cerrno>
#include <utility>

#include "core/log.hpp"
#include "rdma/cm_qp.hpp"

namespace vsock::rdma {

const char* cm_connection_state_name(CmConnectionState state) {
  switch (state) {
    case CmConnectionState::kEmpty: return "empty";
    case CmConnectionState::kPrepared: return "prepared";
    case CmConnectionState::kAccepting: return "accepting";
    case CmConnectionState::kConnected: return "connected";
    case CmConnectionState::kDisconnecting: return "disconnecting";
    case CmConnectionState::kDisconnected: return "disconnected";
    case CmConnectionState::kFailed: return "failed";
  }
  return "?";
}

CmConnection CmConnection::prepared(CmId id, RcQueuePair qp) {
  return CmConnection(std::move(id), std::move(qp), CmConnectionState::kPrepared);
}

CmConnection CmConnection::connected(CmId id, RcQueuePair qp) {
  return CmConnection(std::move(id), std::move(qp), CmConnectionState::kConnected);
}

CmConnection::~CmConnection() { reset(); }

CmConnection::CmConnection(CmConnection&& other) noexcept
    : id_(std::move(other.id_)),
      qp_(std::move(other.qp_)),
      state_(std::exchange(other.state_, CmConnectionState::kEmpty)),
      disconnect_sent_(other.disconnect_sent_),
      last_status_(other.last_status_) {}

CmConnection& CmConnection::operator=(CmConnection&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = std::move(other.id_);
    qp_ = std::move(other.qp_);
    state_ = std::exchange(other.state_, CmConnectionState::kEmpty);
    disconnect_sent_ = other.disconnect_sent_;
    last_status_ = other.last_status_;
  }
  return *this;
}

socklen_t CmConnection::peer_address(sockaddr_storage* out) const { return cm_peer_address(id_.get(), out); }

void CmConnection::reset() {
  if (state_ == CmConnectionState::kPrepared) {
    // A request we never answered: say no explicitly, so the peer falls
    // back at once whatever the transport's CM does for a destroyed id.
    rdma_reject(id_.get(), nullptr, 0);
  } else if (state_ == CmConnectionState::kAccepting || state_ == CmConnectionState::kConnected) {
    disconnect();
  }
  stop_qp();
  qp_ = RcQueuePair();  // destroys the QP, then
  id_.reset();          // the id: the kernel CM finishes the disconnect (timewait) on its own
  state_ = CmConnectionState::kEmpty;
}

void CmConnection::stop_qp() {
  // ERROR flushes what is still posted; a QP that is already there (or was
  // never used) needs nothing, and a failure here changes nothing for the
  // caller, who is tearing down anyway.
  if (qp_.valid()) qp_.to_error();
}

Status CmConnection::accept(const void* private_data, uint8_t length) {
  if (state_ != CmConnectionState::kPrepared)
    return Status::fail(report_error(EINVAL, "CmConnection::accept in state %s", cm_connection_state_name(state_)));
  if (length > kCmMaxAcceptPrivateData || (length > 0 && private_data == nullptr))
    return Status::fail(report_error(EINVAL, "CmConnection::accept: %u bytes of private data (at most %zu)", length,
                                     kCmMaxAcceptPrivateData));
  // As librdmacm does for QPs it manages: RTR and RTS before the reply, so
  // the QP can take the peer's first message as soon as it has our answer.
  Status ready = cm_qp_ready(id_, qp_);
  if (ready) {
    rdma_conn_param param = cm_conn_param(qp_, private_data, length);
    if (rdma_accept(id_.get(), &param) == 0) {
      state_ = CmConnectionState::kAccepting;
      return ok_status();
    }
    ready = Status::fail(report_error(errno, "rdma_accept"));
  }
  rdma_reject(id_.get(), nullptr, 0);
  stop_qp();
  state_ = CmConnectionState::kFailed;
  return ready;
}

Status CmConnection::reject(const void* private_data, uint8_t length) {
  if (state_ != CmConnectionState::kPrepared)
    return Status::fail(report_error(EINVAL, "CmConnection::reject in state %s", cm_connection_state_name(state_)));
  if (length > kCmMaxRejectPrivateData || (length > 0 && private_data == nullptr))
    return Status::fail(report_error(EINVAL, "CmConnection::reject: %u bytes of private data (at most %zu)", length,
                                     kCmMaxRejectPrivateData));
  state_ = CmConnectionState::kFailed;
  stop_qp();
  if (rdma_reject(id_.get(), private_data, length) != 0) return Status::fail(report_error(errno, "rdma_reject"));
  return ok_status();
}

Status CmConnection::on_event(const CmEvent& event) {
  if (!owns(event)) return Status::fail(report_error(EINVAL, "CmConnection::on_event: not this connection's event"));
  switch (event.type) {
    case RDMA_CM_EVENT_ESTABLISHED:
      if (state_ == CmConnectionState::kAccepting) state_ = CmConnectionState::kConnected;
      return ok_status();
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      // The peer gave up on our accept (or the device went away): the owner
      // falls back and destroys the connection.
      last_status_ = event.status;
      state_ = CmConnectionState::kFailed;
      stop_qp();
      return ok_status();
    case RDMA_CM_EVENT_DISCONNECTED:
      last_status_ = event.status;
      if (!disconnect_sent_) {
        // The peer asked: answer now (its DISCONNECTED comes at once instead
        // of after its CM's timeout) and flush our side.
        disconnect_sent_ = true;
        rdma_disconnect(id_.get());
      }
      stop_qp();
      state_ = CmConnectionState::kDisconnected;
      return ok_status();
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
    case RDMA_CM_EVENT_ADDR_CHANGE:
    default:
      VSOCK_LOG(kDebug, "rdma_cm: %s ignored in connection state %s", cm_event_name(event.type),
                cm_connection_state_name(state_));
      return ok_status();
  }
}

Status CmConnection::disconnect() {
  if (state_ != CmConnectionState::kAccepting && state_ != CmConnectionState::kConnected) return ok_status();
  state_ = CmConnectionState::kDisconnecting;
  stop_qp();
  if (disconnect_sent_) return ok_status();
  disconnect_sent_ = true;
  // EINVAL: the kernel CM has already left the connected state (the peer's
  // disconnect crossed ours); its DISCONNECTED event is on its way.
  if (rdma_disconnect(id_.get()) != 0 && errno != EINVAL) return Status::fail(report_error(errno, "rdma_disconnect"));
  return ok_status();
}

}  // namespace vsock::rdma
