// RcQueuePair: a reliable-connected queue pair and its state transitions.
//
// The two sides exchange a QpEndpoint out of band (the upgrade protocol, or
// a socketpair in tests), then each calls connect() with the other's.
#pragma once
#include <infiniband/verbs.h>

#include <cstdint>

#include "core/result.hpp"
#include "rdma/completion_queue.hpp"
#include "rdma/device.hpp"
#include "rdma/protection_domain.hpp"
#include "rdma/status.hpp"

namespace vsock::rdma {

// What a peer needs to know to connect its RC QP to ours.
struct QpEndpoint {
  uint32_t qpn = 0;
  uint32_t psn = 0;  // first packet sequence number we send (24 bits)
  ibv_gid gid{};     // routes RoCE; all zero on InfiniBand without GRH
  uint16_t lid = 0;  // addresses InfiniBand ports; 0 on RoCE
  ibv_mtu mtu = IBV_MTU_1024;  // the sender's active MTU; the path uses the smaller
};

struct RcQpConfig {
  uint32_t max_send_wr = 128;
  uint32_t max_recv_wr = 128;
  uint32_t max_send_sge = 1;
  uint32_t max_recv_sge = 1;
  uint32_t max_inline_data = 0;
  // What the peer may do to our memory through this QP (set in INIT).
  int remote_access = 0;
  uint8_t max_rd_atomic = 1;       // outstanding RDMA READs we issue / accept
  uint8_t min_rnr_timer = 12;      // 0.64 ms before the peer retries a send we had no receive for
  // ACK timeout: 4.096 us * 2^16 = 268 ms. Shorter (2^14 = 67 ms) retried
  // in vain whenever an ACK lagged: between two Soft-RoCE guests a run
  // retransmitted 4,400-10,500 packets per host and a queue pair failed
  // ("remote invalid request", rxe's retransmission) in 4 runs of 5; at
  // 2^16, 690-2,060 and none in the 2 runs measured. Dead peers are
  // noticed within (retry_cnt + 1) x 268 ms = 1.9 s of traffic.
  uint8_t timeout = 16;
  // Transport retries before a request fails with IBV_WC_RETRY_EXC_ERR: how a
  // dead peer is noticed. Not 7: Soft-RoCE (rxe) reads 7 as "retry forever",
  // as it does for rnr_retry. 6 tries of `timeout` is finite everywhere.
  uint8_t retry_cnt = 6;
  uint8_t rnr_retry = 7;           // 7 = retry forever; flow control, not this, bounds waits
  uint8_t hop_limit = 64;
};

// A random 24-bit starting PSN, so that a stale packet of an earlier
// connection between the same QP numbers is not accepted.
uint32_t random_psn();

class RcQueuePair {
 public:
  static core::Result<RcQueuePair> create(const Device& device, const ProtectionDomain& pd,
                                          const CompletionQueue& send_cq, const CompletionQueue& recv_cq,
                                          const RcQpConfig& config);

  RcQueuePair() = default;
  ~RcQueuePair();
  RcQueuePair(RcQueuePair&& other) noexcept;
  RcQueuePair& operator=(RcQueuePair&& other) noexcept;
  RcQueuePair(const RcQueuePair&) = delete;
  RcQueuePair& operator=(const RcQueuePair&) = delete;

  // A second handle on this QP that does not own it (its destructor leaves
  // the QP alone): for rdma_cm, which drives the state of a QP that a
  // StreamChannel owns (src/rdma/cm_qp.hpp). The owner must outlive it.
  RcQueuePair borrow() const;
  bool owns_qp() const { return owned_; }

  bool valid() const { return qp_ != nullptr; }
  ibv_qp* get() const { return qp_; }
  uint32_t qpn() const { return qp_ ? qp_->qp_num : 0; }
  // The inline size the device granted (may exceed what was asked).
  uint32_t max_inline_data() const { return max_inline_; }
  const RcQpConfig& config() const { return config_; }
  // The device port the QP was created for.
  uint8_t port() const { return port_; }
  // This side's endpoint, to be sent to the peer; `psn` as given to connect().
  QpEndpoint local_endpoint(uint32_t psn) const;

  // RESET -> INIT -> RTR -> RTS, each step usable alone.
  Status to_init();
  Status to_rtr(const QpEndpoint& remote);
  Status to_rts(uint32_t local_psn);
  Status connect(const QpEndpoint& remote, uint32_t local_psn);
  // ERROR: outstanding work requests complete with IBV_WC_WR_FLUSH_ERR, which
  // is how a connection is torn down without waiting for the peer.
  Status to_error();
  // The state the device reports (ibv_query_qp: a system call), for a
  // caller that must not post before someone else has connected the pair.
  core::Result<ibv_qp_state> state() const;
  // Applies attributes computed elsewhere: rdma_cm's rdma_init_qp_attr()
  // knows the path, the peer's QP number and both PSNs (src/rdma/cm_qp.cpp).
  // `what` names the step in the error report.
  Status modify(ibv_qp_attr& attr, int mask, const char* what);

  Status post_send(ibv_send_wr* wr);
  Status post_recv(ibv_recv_wr* wr);

 private:
  void reset();
  ibv_qp* qp_ = nullptr;
  bool owned_ = true;
  RcQpConfig config_{};
  uint32_t max_inline_ = 0;
  // Copied from the Device so that the QP does not point at it.
  uint8_t port_ = 0;
  int gid_index_ = 0;
  ibv_gid gid_{};
  uint16_t lid_ = 0;
  ibv_mtu mtu_ = IBV_MTU_1024;
  bool ethernet_ = false;
};

}  // namespace vsock::rdma
