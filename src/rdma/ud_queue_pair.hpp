// UdQueuePair: an unreliable-datagram queue pair, ready to send and receive
// as soon as it is created (DESIGN decision 5: one per process and device,
// serving every datagram socket).
//
// A UD QP has no peer: each send names its destination (an AddressHandle,
// the remote QPN and the remote qkey in wr.wr.ud), and each receive buffer
// must keep kGrhSize (40) bytes in front of the payload for the GRH slot
// (src/rdma/grh.hpp). A datagram is at most the path MTU; rxe drops a
// larger one silently, so the caller never posts one.
#pragma once
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstdint>

#include "core/result.hpp"
#include "rdma/completion_queue.hpp"
#include "rdma/device.hpp"
#include "rdma/protection_domain.hpp"
#include "rdma/status.hpp"

namespace vsock::rdma {

// The qkey of every UD QP of the library. It is rdma_cm's RDMA_UDP_QKEY
// (0x01234567): the qkey rdma_cm reports in a SIDR reply for RDMA_PS_UDP
// ids (for AF_INET/AF_INET6 ids the kernel ignores whatever qkey the
// accepting side asks for and sends this one: ucma_copy_conn_param passes
// a qkey only for AF_IB, and cma_set_qkey falls back to RDMA_UDP_QKEY) and
// the qkey it gives RoCE multicast groups. So a peer that resolved us
// through SIDR, or a group joined through rdma_cm, reaches our QP.
inline constexpr uint32_t kUdQkey = RDMA_UDP_QKEY;

struct UdQpConfig {
  uint32_t max_send_wr = 256;
  uint32_t max_recv_wr = 512;
  uint32_t max_send_sge = 2;
  uint32_t max_recv_sge = 1;
  // Asked for; a device that refuses it gets a second try with 0.
  uint32_t max_inline_data = 256;
  uint32_t qkey = kUdQkey;
};

class UdQueuePair {
 public:
  // Creates the QP (no signal on every send: the caller flags the WRs it
  // wants completions for) and moves it RESET -> INIT (pkey index 0, the
  // device's port, config.qkey) -> RTR -> RTS (sq_psn 0). If the device
  // refuses config.max_inline_data, tries again without inline data
  // (RcQueuePair does not retry: its default asks for none).
  static core::Result<UdQueuePair> create(const Device& device, const ProtectionDomain& pd,
                                          const CompletionQueue& send_cq, const CompletionQueue& recv_cq,
                                          const UdQpConfig& config);

  UdQueuePair() = default;
  ~UdQueuePair();
  UdQueuePair(UdQueuePair&& other) noexcept;
  UdQueuePair& operator=(UdQueuePair&& other) noexcept;
  UdQueuePair(const UdQueuePair&) = delete;
  UdQueuePair& operator=(const UdQueuePair&) = delete;

  bool valid() const { return qp_ != nullptr; }
  ibv_qp* get() const { return qp_; }
  uint32_t qpn() const { return qp_ ? qp_->qp_num : 0; }
  uint32_t qkey() const { return qkey_; }
  // The inline size the device granted (0 after the retry; may exceed what
  // was asked).
  uint32_t max_inline_data() const { return max_inline_; }
  uint8_t port() const { return port_; }

  // Posts a chain of work requests. A failure names the first WR refused
  // (its wr_id) in the log; those before it are posted.
  Status post_send(ibv_send_wr* wr);
  // The same; on failure *bad names the first request not posted (those
  // before it were), or is null when the device did not say.
  Status post_send(ibv_send_wr* wr, ibv_send_wr** bad);
  Status post_recv(ibv_recv_wr* wr);

  // Receives what is sent to the multicast group `gid` (on RoCE the
  // IPv4-mapped group address; `lid` 0) / stops doing so.
  Status attach_multicast(const ibv_gid& gid, uint16_t lid);
  Status detach_multicast(const ibv_gid& gid, uint16_t lid);

  // After a send error (the QP left RTS: a UD send that fails puts it in
  // SQE or ERR, e.g. when its port went down): RESET -> INIT -> RTR -> RTS
  // again, keeping its number, so peers that know it reach it. Every
  // posted request is gone (no completion comes for it): the caller posts
  // its receives again. An error while the port is still down.
  Status restart();
  // Whether the QP is out of RTS (SQE or ERR; asked of the device: a
  // system call). False when the device does not answer.
  bool failed() const;

 private:
  void reset();
  Status bring_up();
  ibv_qp* qp_ = nullptr;
  uint32_t qkey_ = 0;
  uint32_t max_inline_ = 0;
  uint8_t port_ = 0;
};

}  // namespace vsock::rdma
