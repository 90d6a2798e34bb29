#include "rdma/rc_queue_pair.hpp"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace vsock::rdma {
namespace {

constexpr uint32_t kPsnMask = 0xffffff;

bool is_zero(const ibv_gid& gid) { return gid.global.subnet_prefix == 0 && gid.global.interface_id == 0; }

}  // namespace

uint32_t random_psn() {
  uint32_t value = 0;
  // getrandom without flags cannot block once the pool is initialised, which
  // it is long before any socket exists; fall back to the clock otherwise.
  if (::syscall(SYS_getrandom, &value, sizeof value, 0x1 /* GRND_NONBLOCK */) != sizeof value) {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    value = static_cast<uint32_t>(now.tv_nsec) ^ static_cast<uint32_t>(::syscall(SYS_getpid) << 8);
  }
  return value & kPsnMask;
}

core::Result<RcQueuePair> RcQueuePair::create(const Device& device, const ProtectionDomain& pd,
                                              const CompletionQueue& send_cq, const CompletionQueue& recv_cq,
                                              const RcQpConfig& config) {
  using R = core::Result<RcQueuePair>;
  if (!device.valid() || !pd.valid() || !send_cq.valid() || !recv_cq.valid())
    return R::fail(report_error(EINVAL, "RcQueuePair::create: invalid device, PD or CQ"));
  ibv_qp_init_attr init{};
  init.send_cq = send_cq.get();
  init.recv_cq = recv_cq.get();
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;  // selective signalling: the caller flags the WRs it wants completions for
  init.cap.max_send_wr = config.max_send_wr;
  init.cap.max_recv_wr = config.max_recv_wr;
  init.cap.max_send_sge = config.max_send_sge;
  init.cap.max_recv_sge = config.max_recv_sge;
  init.cap.max_inline_data = config.max_inline_data;

  RcQueuePair pair;
  pair.qp_ = ibv_create_qp(pd.get(), &init);
  if (pair.qp_ == nullptr)
    return R::fail(report_error(errno, "ibv_create_qp(RC, send %u recv %u inline %u)", config.max_send_wr,
                                config.max_recv_wr, config.max_inline_data));
  pair.config_ = config;
  pair.max_inline_ = init.cap.max_inline_data;  // updated by the provider to what it grants
  pair.port_ = device.port();
  pair.gid_index_ = device.gid_index();
  pair.gid_ = device.gid();
  pair.lid_ = device.lid();
  pair.mtu_ = device.active_mtu();
  pair.ethernet_ = device.is_ethernet();
  return R::ok(std::move(pair));
}

RcQueuePair::~RcQueuePair() { reset(); }

RcQueuePair RcQueuePair::borrow() const {
  RcQueuePair view;
  view.qp_ = qp_;
  view.owned_ = false;
  view.config_ = config_;
  view.max_inline_ = max_inline_;
  view.port_ = port_;
  view.gid_index_ = gid_index_;
  view.gid_ = gid_;
  view.lid_ = lid_;
  view.mtu_ = mtu_;
  view.ethernet_ = ethernet_;
  return view;
}

void RcQueuePair::reset() {
  if (qp_ != nullptr && owned_) {
    int rc = ibv_destroy_qp(qp_);
    if (rc != 0) report_error(rc, "ibv_destroy_qp");
  }
  qp_ = nullptr;
}

RcQueuePair::RcQueuePair(RcQueuePair&& other) noexcept
    : qp_(std::exchange(other.qp_, nullptr)),
      owned_(other.owned_),
      config_(other.config_),
      max_inline_(other.max_inline_),
      port_(other.port_),
      gid_index_(other.gid_index_),
      gid_(other.gid_),
      lid_(other.lid_),
      mtu_(other.mtu_),
      ethernet_(other.ethernet_) {}

RcQueuePair& RcQueuePair::operator=(RcQueuePair&& other) noexcept {
  if (this != &other) {
    reset();
    qp_ = std::exchange(other.qp_, nullptr);
    owned_ = other.owned_;
    config_ = other.config_;
    max_inline_ = other.max_inline_;
    port_ = other.port_;
    gid_index_ = other.gid_index_;
    gid_ = other.gid_;
    lid_ = other.lid_;
    mtu_ = other.mtu_;
    ethernet_ = other.ethernet_;
  }
  return *this;
}

QpEndpoint RcQueuePair::local_endpoint(uint32_t psn) const {
  QpEndpoint endpoint;
  endpoint.qpn = qpn();
  endpoint.psn = psn & kPsnMask;
  endpoint.gid = gid_;
  endpoint.lid = lid_;
  endpoint.mtu = mtu_;
  return endpoint;
}

Status RcQueuePair::to_init() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = port_;
  attr.qp_access_flags = static_cast<unsigned>(config_.remote_access);
  int rc = ibv_modify_qp(qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) return Status::fail(report_error(rc, "QP %u to INIT", qpn()));
  return ok_status();
}

Status RcQueuePair::to_rtr(const QpEndpoint& remote) {
  // The peer's values come from the network: keep them in range.
  if (remote.qpn == 0 || remote.qpn > kPsnMask || remote.mtu < IBV_MTU_256 || remote.mtu > IBV_MTU_4096)
    return Status::fail(report_error(EPROTO, "QP %u to RTR: bad remote endpoint (qpn %u, mtu %d)", qpn(), remote.qpn,
                                     static_cast<int>(remote.mtu)));
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = remote.mtu < mtu_ ? remote.mtu : mtu_;
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn & kPsnMask;
  attr.max_dest_rd_atomic = config_.max_rd_atomic;
  attr.min_rnr_timer = config_.min_rnr_timer;
  attr.ah_attr.port_num = port_;
  attr.ah_attr.dlid = remote.lid;
  attr.ah_attr.sl = 0;
  // RoCE has no LIDs: every packet carries a GRH addressed by GID.
  if (ethernet_ || !is_zero(remote.gid)) {
    attr.ah_attr.is_global = 1;
    attr.ah_attr.grh.dgid = remote.gid;
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index_);
    attr.ah_attr.grh.hop_limit = config_.hop_limit;
  }
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  int rc = ibv_modify_qp(qp_, &attr, mask);
  if (rc != 0) return Status::fail(report_error(rc, "QP %u to RTR (remote qpn %u)", qpn(), remote.qpn));
  return ok_status();
}

Status RcQueuePair::to_rts(uint32_t local_psn) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = local_psn & kPsnMask;
  attr.timeout = config_.timeout;
  attr.retry_cnt = config_.retry_cnt;
  attr.rnr_retry = config_.rnr_retry;
  attr.max_rd_atomic = config_.max_rd_atomic;
  int mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
             IBV_QP_MAX_QP_RD_ATOMIC;
  int rc = ibv_modify_qp(qp_, &attr, mask);
  if (rc != 0) return Status::fail(report_error(rc, "QP %u to RTS", qpn()));
  return ok_status();
}

Status RcQueuePair::connect(const QpEndpoint& remote, uint32_t local_psn) {
  Status step = to_init();
  if (step) step = to_rtr(remote);
  if (step) step = to_rts(local_psn);
  return step;
}

Status RcQueuePair::to_error() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  int rc = ibv_modify_qp(qp_, &attr, IBV_QP_STATE);
  if (rc != 0) return Status::fail(report_error(rc, "QP %u to ERROR", qpn()));
  return ok_status();
}

core::Result<ibv_qp_state> RcQueuePair::state() const {
  using R = core::Result<ibv_qp_state>;
  if (qp_ == nullptr) return R::fail(EINVAL);
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  int rc = ibv_query_qp(qp_, &attr, IBV_QP_STATE, &init);
  if (rc != 0) return R::fail(report_error(rc, "ibv_query_qp(QP %u)", qpn()));
  return R::ok(attr.qp_state);
}

Status RcQueuePair::modify(ibv_qp_attr& attr, int mask, const char* what) {
  int rc = ibv_modify_qp(qp_, &attr, mask);
  if (rc != 0) return Status::fail(report_error(rc, "QP %u %s", qpn(), what));
  return ok_status();
}

Status RcQueuePair::post_send(ibv_send_wr* wr) {
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp_, wr, &bad);
  if (rc != 0) return Status::fail(report_error(rc, "ibv_post_send(QP %u)", qpn()));
  return ok_status();
}

Status RcQueuePair::post_recv(ibv_recv_wr* wr) {
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(qp_, wr, &bad);
  if (rc != 0) return Status::fail(report_error(rc, "ibv_post_recv(QP %u)", qpn()));
  return ok_status();
}

}  // namespace vsock::rdma
