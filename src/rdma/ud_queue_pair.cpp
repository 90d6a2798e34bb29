#include "rdma/ud_queue_pair.hpp"

#include <cerrno>
#include <utility>

#include "core/log.hpp"

namespace vsock::rdma {

core::Result<UdQueuePair> UdQueuePair::create(const Device& device, const ProtectionDomain& pd,
                                              const CompletionQueue& send_cq, const CompletionQueue& recv_cq,
                                              const UdQpConfig& config) {
  using R = core::Result<UdQueuePair>;
  if (!device.valid() || !pd.valid() || !send_cq.valid() || !recv_cq.valid())
    return R::fail(report_error(EINVAL, "UdQueuePair::create: invalid device, PD or CQ"));
  if (config.qkey & 0x80000000u)
    // A qkey with the high bit set is controlled (only privileged QPs may
    // send with it); a send WR's qkey like that would use the QP's instead.
    return R::fail(report_error(EINVAL, "UdQueuePair::create: qkey 0x%x is a controlled qkey", config.qkey));
  ibv_qp_init_attr init{};
  init.send_cq = send_cq.get();
  init.recv_cq = recv_cq.get();
  init.qp_type = IBV_QPT_UD;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = config.max_send_wr;
  init.cap.max_recv_wr = config.max_recv_wr;
  init.cap.max_send_sge = config.max_send_sge;
  init.cap.max_recv_sge = config.max_recv_sge;
  init.cap.max_inline_data = config.max_inline_data;

  UdQueuePair pair;
  pair.qp_ = ibv_create_qp(pd.get(), &init);
  if (pair.qp_ == nullptr && config.max_inline_data > 0) {
    VSOCK_LOG(kDebug, "rdma: ibv_create_qp(UD, inline %u) refused (errno %d); again without inline data",
              config.max_inline_data, errno);
    init.cap.max_inline_data = 0;
    pair.qp_ = ibv_create_qp(pd.get(), &init);
  }
  if (pair.qp_ == nullptr)
    return R::fail(report_error(errno, "ibv_create_qp(UD, send %u recv %u sge %u/%u)", config.max_send_wr,
                                config.max_recv_wr, config.max_send_sge, config.max_recv_sge));
  pair.qkey_ = config.qkey;
  pair.max_inline_ = init.cap.max_inline_data;  // what the provider granted
  pair.port_ = device.port();
  Status up = pair.bring_up();
  if (!up) return R::fail(up.error());
  return R::ok(std::move(pair));
}

Status UdQueuePair::bring_up() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = port_;
  attr.qkey = qkey_;
  int rc = ibv_modify_qp(qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
  if (rc != 0) return Status::fail(report_error(rc, "UD QP %u to INIT", qpn()));
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTR;
  rc = ibv_modify_qp(qp_, &attr, IBV_QP_STATE);
  if (rc != 0) return Status::fail(report_error(rc, "UD QP %u to RTR", qpn()));
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = 0;
  rc = ibv_modify_qp(qp_, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
  if (rc != 0) return Status::fail(report_error(rc, "UD QP %u to RTS", qpn()));
  return ok_status();
}

Status UdQueuePair::restart() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RESET;
  int rc = ibv_modify_qp(qp_, &attr, IBV_QP_STATE);
  if (rc != 0) return Status::fail(report_error(rc, "UD QP %u to RESET", qpn()));
  return bring_up();
}

bool UdQueuePair::failed() const {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (qp_ == nullptr || ibv_query_qp(qp_, &attr, IBV_QP_STATE, &init) != 0) return false;
  return attr.qp_state == IBV_QPS_SQE || attr.qp_state == IBV_QPS_ERR;
}

UdQueuePair::~UdQueuePair() { reset(); }

void UdQueuePair::reset() {
  if (qp_ != nullptr) {
    int rc = ibv_destroy_qp(qp_);
    if (rc != 0) report_error(rc, "ibv_destroy_qp(UD)");
  }
  qp_ = nullptr;
}

UdQueuePair::UdQueuePair(UdQueuePair&& other) noexcept
    : qp_(std::exchange(other.qp_, nullptr)),
      qkey_(other.qkey_),
      max_inline_(other.max_inline_),
      port_(other.port_) {}

UdQueuePair& UdQueuePair::operator=(UdQueuePair&& other) noexcept {
  if (this != &other) {
    reset();
    qp_ = std::exchange(other.qp_, nullptr);
    qkey_ = other.qkey_;
    max_inline_ = other.max_inline_;
    port_ = other.port_;
  }
  return *this;
}

Status UdQueuePair::post_send(ibv_send_wr* wr) {
  ibv_send_wr* bad = nullptr;
  return post_send(wr, &bad);
}

Status UdQueuePair::post_send(ibv_send_wr* wr, ibv_send_wr** bad) {
  *bad = nullptr;
  int rc = ibv_post_send(qp_, wr, bad);
  if (rc != 0)
    return Status::fail(report_error(rc, "ibv_post_send(UD QP %u, wr_id %llu)", qpn(),
                                     *bad ? static_cast<unsigned long long>((*bad)->wr_id) : 0ULL));
  return ok_status();
}

Status UdQueuePair::post_recv(ibv_recv_wr* wr) {
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(qp_, wr, &bad);
  if (rc != 0)
    return Status::fail(report_error(rc, "ibv_post_recv(UD QP %u, wr_id %llu)", qpn(),
                                     bad ? static_cast<unsigned long long>(bad->wr_id) : 0ULL));
  return ok_status();
}

Status UdQueuePair::attach_multicast(const ibv_gid& gid, uint16_t lid) {
  int rc = ibv_attach_mcast(qp_, &gid, lid);
  if (rc != 0) return Status::fail(report_error(rc, "ibv_attach_mcast(UD QP %u)", qpn()));
  return ok_status();
}

Status UdQueuePair::detach_multicast(const ibv_gid& gid, uint16_t lid) {
  int rc = ibv_detach_mcast(qp_, &gid, lid);
  if (rc != 0) return Status::fail(report_error(rc, "ibv_detach_mcast(UD QP %u)", qpn()));
  return ok_status();
}

}  // namespace vsock::rdma
