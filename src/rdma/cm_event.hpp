// CmEvent: what the library keeps of one rdma_cm event.
//
// librdmacm's rdma_cm_event (and the private data it points into) is only
// valid until rdma_ack_cm_event(), and rdma_destroy_id() waits for every
// event of its id to be acknowledged. So the channel copies the little that
// matters into a CmEvent and acknowledges at once: nothing the caller keeps
// can ever make a destroy wait.
#pragma once
#include <rdma/rdma_cma.h>

#include <cstddef>
#include <cstdint>

namespace vsock::rdma {

// Private data limits of the IB CM (RoCE uses it too), as rdma_cm applies
// them in RDMA_PS_TCP: a connect request carries 92 bytes, of which rdma_cm
// takes 36 for its own header (addresses, ports).
constexpr size_t kCmMaxConnectPrivateData = 56;
constexpr size_t kCmMaxAcceptPrivateData = 196;  // IB CM REP
constexpr size_t kCmMaxRejectPrivateData = 148;  // IB CM REJ
// The same for SIDR (RDMA_PS_UDP): a SIDR REQ carries 216 bytes
// (IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE), of which rdma_cm takes the same
// 36-byte header (cma_user_data_offset: struct cma_hdr), so 180 are the
// requester's; the listener is told 180, zero-padded. A SIDR REP carries
// 136 (IB_CM_SIDR_REP_PRIVATE_DATA_SIZE), all the answerer's, and the
// requester is told 136, whether the reply accepts or refuses.
constexpr size_t kCmMaxSidrRequestPrivateData = 180;
constexpr size_t kCmMaxSidrReplyPrivateData = 136;

// Private data as received. On IB/RoCE the receiver cannot tell how much the
// sender wrote: the kernel reports the full size of the CM message field
// (56 for a request, 196 for an accept, 148 for a reject), zero-padded. A
// parser must therefore take the bytes it expects and ignore the rest.
struct CmPrivateData {
  static constexpr size_t kCapacity = 256;  // RDMA_MAX_PRIVATE_DATA in librdmacm
  uint8_t bytes[kCapacity] = {};
  size_t length = 0;
};

// The UD part of an event of an RDMA_PS_UDP id: a SIDR reply (ESTABLISHED
// on the requesting id) or a multicast join (MULTICAST_JOIN) tells how to
// send to the peer's QP or the group.
struct CmUdParam {
  bool has = false;       // the event carried one
  ibv_ah_attr ah_attr{};  // for the device and port the id is bound to
  uint32_t qpn = 0;       // the remote UD QP (0xFFFFFF for a multicast group)
  uint32_t qkey = 0;
};

struct CmEvent {
  rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
  // 0 on success. Negative errno for address, route and unreachable errors
  // (e.g. -ETIMEDOUT, -ENETUNREACH); for REJECTED the IB CM reject reason
  // (28: rejected by the peer's application, 8: nobody listens there); for
  // the UNREACHABLE of a UD id that got a SIDR reply, the reply's SIDR
  // status (1: nobody listens there, 2: refused; see cm_udp_resolver.hpp).
  int status = 0;
  // The id the event is about. For CONNECT_REQUEST a new id that the caller
  // now owns: it must be accepted or rejected (CmListener), else it leaks.
  // Only valid while that id lives: handle each event before destroying ids.
  rdma_cm_id* id = nullptr;
  // CONNECT_REQUEST only: the listening id the request came in on.
  rdma_cm_id* listen_id = nullptr;
  CmPrivateData private_data;
  CmUdParam ud;
  // MULTICAST_JOIN and MULTICAST_ERROR only: the context the join was
  // made with (rdma_join_multicast's `context`), which names the group.
  const void* join_context = nullptr;
};

// "RDMA_CM_EVENT_ESTABLISHED" etc., for logs and test output.
const char* cm_event_name(rdma_cm_event_type type);

}  // namespace vsock::rdma
