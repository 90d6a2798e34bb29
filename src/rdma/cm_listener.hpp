// CmListener: the passive side of the rdma_cm side band (docs/protocol.md
// section 1): an id listening in RDMA_PS_TCP on the TCP listener's address
// and port number.
//
// Connect requests arrive as CONNECT_REQUEST events on the listener's
// channel (owns() tells them apart), with the peer's private data (at most
// kCmMaxConnectPrivateData bytes, zero-padded to that size). Each request
// gets an answer: accept() it, reject() it, or prepare() a connection and
// then accept or reject that. Destroying the listener stops new requests;
// the kernel rejects those still queued on the channel. Requests already
// taken from the channel are the caller's (see CmEvent::id).
#pragma once
#include <sys/socket.h>

#include <cstdint>

#include "core/result.hpp"
#include "rdma/cm_connection.hpp"
#include "rdma/cm_event.hpp"
#include "rdma/cm_event_channel.hpp"
#include "rdma/cm_id.hpp"
#include "rdma/cm_qp.hpp"
#include "rdma/status.hpp"

namespace vsock::rdma {

class CmListener {
 public:
  // Binds to `address` (AF_INET or AF_INET6, with the port; a wildcard
  // address listens on every RDMA device) and listens with `backlog`.
  // EADDRINUSE: another rdma_cm listener has that port; EADDRNOTAVAIL or
  // ENODEV: the address is not on an RDMA device.
  static core::Result<CmListener> create(CmEventChannel& channel, const sockaddr* address, int backlog);

  CmListener() = default;
  CmListener(CmListener&&) noexcept = default;
  CmListener& operator=(CmListener&&) noexcept = default;

  bool valid() const { return id_.valid(); }
  rdma_cm_id* id() const { return id_.get(); }
  // The port bound, in host order.
  uint16_t port() const;
  // Whether `event` belongs to this listener: a request that came in on it
  // (or an event about the listening id itself, e.g. DEVICE_REMOVAL).
  bool owns(const CmEvent& event) const;
  // The address a CONNECT_REQUEST of this listener came from (the
  // requester's IP; its port is an rdma_cm port, not a TCP one). Returns
  // the length, 0 for anything else.
  socklen_t source_of(const CmEvent& request, sockaddr_storage* out) const;

  // A connection for `request` (a CONNECT_REQUEST of this listener) with its
  // QP in INIT, for a caller that posts receives before accepting. On
  // failure the request is rejected and its id destroyed.
  core::Result<CmConnection> prepare(const CmEvent& request, const CmQpSetup& setup) const;
  // prepare() then CmConnection::accept(): the returned connection is
  // kAccepting, and kConnected after its ESTABLISHED event.
  core::Result<CmConnection> accept(const CmEvent& request, const CmQpSetup& setup, const void* private_data,
                                    uint8_t length) const;
  // Rejects `request` with `private_data` (at most kCmMaxRejectPrivateData
  // bytes) and destroys its id.
  Status reject(const CmEvent& request, const void* private_data, uint8_t length) const;

 private:
  bool is_request(const CmEvent& event) const;
  CmId id_;
};

}  // namespace vsock::rdma
