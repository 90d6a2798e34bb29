// The queue pair of an rdma_cm connection.
//
// The QP is the project's RcQueuePair, in the project's PD and CQs, and not
// one made by rdma_create_qp(): librdmacm opens its own verbs context for
// each device and rdma_create_qp() refuses a PD from any other context
// (EINVAL), while the library's Device (probe_device) has its own. So
// rdma_cm runs with a "user-managed" QP: it carries our QP number in its
// messages and computes the attributes (path, peer QP number, PSNs), and
// these functions apply them to our QP. That also lets the QP keep the
// project's tuning, where rdma_cm's defaults would hurt: its RTR attributes
// set min_rnr_timer 0, which means 655 ms before a receiver-not-ready retry,
// and on rxe its ACK timeout is 2.1 s.
#pragma once
#include <rdma/rdma_cma.h>

#include <cstdint>

#include "core/result.hpp"
#include "rdma/cm_id.hpp"
#include "rdma/completion_queue.hpp"
#include "rdma/device.hpp"
#include "rdma/protection_domain.hpp"
#include "rdma/rc_queue_pair.hpp"
#include "rdma/status.hpp"

namespace vsock::rdma {

// What a connection's QP is made of. The pointees must outlive the QP.
struct CmQpSetup {
  const Device* device = nullptr;
  const ProtectionDomain* pd = nullptr;
  const CompletionQueue* send_cq = nullptr;
  const CompletionQueue* recv_cq = nullptr;
  RcQpConfig config;
  // A QP that exists already (in RESET, made on device/pd/cqs above), e.g. a
  // StreamChannel's: rdma_cm then drives it through a borrowed handle and
  // the owner keeps it. Null: cm_create_qp creates one with `config`.
  const RcQueuePair* existing = nullptr;
};

// Creates the QP for `id` and moves it to INIT with rdma_cm's attributes;
// receives may be posted from then on. EXDEV if the id is bound to another
// device or port than setup.device's (the peer is reached through a device
// the library does not use: fall back); EINVAL for an incomplete setup.
core::Result<RcQueuePair> cm_create_qp(const CmId& id, const CmQpSetup& setup);

// INIT -> RTR -> RTS with the attributes rdma_cm has for `id` once it knows
// the peer (a received request, or the peer's accept), with the QP's own
// RNR timer, ACK timeout and retry counts laid over them.
Status cm_qp_ready(const CmId& id, RcQueuePair& qp);

// The parameters rdma_connect()/rdma_accept() take for `qp` (made by
// cm_create_qp, which capped its read depths at the device's). The private
// data pointer is only borrowed.
rdma_conn_param cm_conn_param(const RcQueuePair& qp, const void* private_data, uint8_t private_data_length);

}  // namespace vsock::rdma
