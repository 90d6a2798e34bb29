// CmUdpListener: the answering side of SIDR (service ID resolution,
// rdma_cm RDMA_PS_UDP): an id listening on a UDP socket's address and port
// number, so that a peer's CmUdpResolver learns the process's UD QPN, qkey
// and an address handle for it without a datagram on the kernel path
// (DESIGN decision 5).
//
// A SIDR request arrives as a CONNECT_REQUEST on the channel (owns() tells
// it apart) with the requester's private data (kCmMaxSidrRequestPrivateData
// bytes, zero-padded to that size) and a new id that has no QP of its own.
// Each request gets an answer: answer() or refuse(); either destroys the
// request's id.
//
// What answer() relies on (librdmacm cma.c and the kernel's core/cma.c,
// ucma.c, cm.c): rdma_accept() on a UD id skips the QP transitions it does
// for connected ids and takes the QPN from conn_param.qp_num when the id
// has no QP; the kernel's rdma_accept() stores it as the id's qp_num and,
// for a UD id, sends a SIDR REP (status success) carrying that QPN, the
// id's qkey and the private data, and no ESTABLISHED or other event
// follows on this side. The qkey cannot be chosen: librdmacm's
// rdma_conn_param has no qkey field, and the kernel takes one from user
// space only for AF_IB ids; otherwise the reply carries RDMA_UDP_QKEY
// (= kUdQkey). refuse() is rdma_reject() on the UD id: a SIDR REP with
// status IB_SIDR_REJECT (2). A request nobody listens for is answered by
// the kernel's CM with IB_SIDR_UNSUPPORTED (1). Both reach the requester
// as UNREACHABLE with that status (CmUdpResolver: kRefused, kNoListener).
#pragma once
#include <sys/socket.h>

#include <cstdint>

#include "core/result.hpp"
#include "rdma/cm_event.hpp"
#include "rdma/cm_event_channel.hpp"
#include "rdma/cm_id.hpp"
#include "rdma/status.hpp"

namespace vsock::rdma {

class CmUdpListener {
 public:
  // Binds to `address` (AF_INET or AF_INET6 with the port; port 0: rdma_cm
  // picks one, see port()) in RDMA_PS_UDP and listens. EADDRINUSE: another
  // RDMA_PS_UDP id has that port; EADDRNOTAVAIL or ENODEV: the address is
  // not on an RDMA device.
  static core::Result<CmUdpListener> create(CmEventChannel& channel, const sockaddr* address);

  CmUdpListener() = default;
  CmUdpListener(CmUdpListener&&) noexcept = default;
  CmUdpListener& operator=(CmUdpListener&&) noexcept = default;

  bool valid() const { return id_.valid(); }
  rdma_cm_id* id() const { return id_.get(); }
  // The port bound, in host order.
  uint16_t port() const;
  // A request that came in on this listener, or an event about the
  // listening id itself (e.g. DEVICE_REMOVAL).
  bool owns(const CmEvent& event) const;
  // The requester's address (its IP; the port is rdma_cm's, not the
  // requesting UDP socket's). Returns the length, 0 for anything else.
  socklen_t source_of(const CmEvent& request, sockaddr_storage* out) const;

  // Answers `request` with our UD QP's number `qpn` and `private_data` (at
  // most kCmMaxSidrReplyPrivateData bytes), then destroys its id. `qkey`
  // must be kUdQkey (the only one the reply can carry, see above): EINVAL
  // otherwise, and the request is refused.
  Status answer(const CmEvent& request, uint32_t qpn, uint32_t qkey, const void* private_data,
                uint8_t length) const;
  // Refuses `request` (SIDR REP, status reject) and destroys its id.
  Status refuse(const CmEvent& request) const;

 private:
  bool is_request(const CmEvent& event) const;
  CmId id_;
};

}  // namespace vsock::rdma
