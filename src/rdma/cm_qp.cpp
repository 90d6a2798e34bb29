#include "rdma/cm_qp.hpp"

#include <cerrno>
#include <string>
#include <utility>

#include "core/log.hpp"

namespace vsock::rdma {
namespace {

// rdma_init_qp_attr for the state in attr.qp_state; logs and returns errno.
// EINVAL: the connection's rdma_cm state is gone (seen on a worker of a
// pre-fork server when the client's request had already been given up):
// that upgrade falls back, nothing for the user to act on.
int cm_attributes(const CmId& id, ibv_qp_attr* attr, int* mask, const char* state) {
  if (rdma_init_qp_attr(id.get(), attr, mask) == 0) return 0;
  const int error = errno;
  if (error != EINVAL) return report_error(error, "rdma_init_qp_attr(%s)", state);
  VSOCK_LOG(kInfo, "rdma: rdma_init_qp_attr(%s): EINVAL: the connection's rdma_cm request is gone", state);
  return error;
}

}  // namespace

core::Result<RcQueuePair> cm_create_qp(const CmId& id, const CmQpSetup& setup) {
  using R = core::Result<RcQueuePair>;
  bool have_qp_parts = setup.existing != nullptr || (setup.pd != nullptr && setup.send_cq != nullptr &&
                                                      setup.recv_cq != nullptr);
  if (!id.valid() || setup.device == nullptr || !have_qp_parts)
    return R::fail(report_error(EINVAL, "cm_create_qp: no id, or an incomplete CmQpSetup"));
  // Our QP lives on our device and port; rdma_cm's attributes are for the
  // device and port it routed the peer through. They must be the same.
  std::string routed = id.device_name();
  if (routed != setup.device->name() || id.port() != setup.device->port())
    return R::fail(report_error(EXDEV, "rdma_cm reaches the peer through %s port %u, the library uses %s port %u",
                                routed.empty() ? "no device" : routed.c_str(), id.port(),
                                setup.device->name().c_str(), setup.device->port()));
  // rdma_connect()/rdma_accept() refuse read depths beyond the device's
  // (EINVAL): cap them here, once, so the QP's config is what is negotiated.
  RcQpConfig config = setup.config;
  const ibv_device_attr& limits = setup.device->attr();
  int most = limits.max_qp_rd_atom < limits.max_qp_init_rd_atom ? limits.max_qp_rd_atom : limits.max_qp_init_rd_atom;
  if (most >= 0 && config.max_rd_atomic > most) config.max_rd_atomic = static_cast<uint8_t>(most);
  RcQueuePair qp;
  if (setup.existing != nullptr) {
    qp = setup.existing->borrow();
  } else {
    R created = RcQueuePair::create(*setup.device, *setup.pd, *setup.send_cq, *setup.recv_cq, config);
    if (!created) return created;
    qp = std::move(created.value());
  }
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_INIT;
  int rc = cm_attributes(id, &attr, &mask, "INIT");
  if (rc != 0) return R::fail(rc);
  // Remote access is a security decision (DESIGN: only the receive ring is
  // remotely writable), not rdma_cm's: it would grant REMOTE_WRITE, and
  // READ/ATOMIC too when read depths are negotiated.
  attr.qp_access_flags = static_cast<unsigned>(qp.config().remote_access);
  mask |= IBV_QP_ACCESS_FLAGS;
  Status step = qp.modify(attr, mask, "to INIT (rdma_cm)");
  if (!step) return R::fail(step.error());
  return R::ok(std::move(qp));
}

Status cm_qp_ready(const CmId& id, RcQueuePair& qp) {
  if (!id.valid() || !qp.valid()) return Status::fail(report_error(EINVAL, "cm_qp_ready: no id or no QP"));
  const RcQpConfig& config = qp.config();
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_RTR;
  int rc = cm_attributes(id, &attr, &mask, "RTR");
  if (rc != 0) return Status::fail(rc);
  VSOCK_LOG(kDebug, "rdma_cm RTR for QP %u: min_rnr_timer %u -> %u, path_mtu %d", qp.qpn(), attr.min_rnr_timer,
            config.min_rnr_timer, static_cast<int>(attr.path_mtu));
  attr.min_rnr_timer = config.min_rnr_timer;  // rdma_cm says 0: 655 ms
  mask |= IBV_QP_MIN_RNR_TIMER;
  Status step = qp.modify(attr, mask, "to RTR (rdma_cm)");
  if (!step) return step;

  attr = ibv_qp_attr{};
  mask = 0;
  attr.qp_state = IBV_QPS_RTS;
  rc = cm_attributes(id, &attr, &mask, "RTS");
  if (rc != 0) return Status::fail(rc);
  // rdma_cm derives the ACK timeout from the path's packet lifetime: 19 on
  // rxe, 4.096 us * 2^19 = 2.1 s before a lost packet is resent. Keep the
  // verbs layer's tuning instead, so that a QP behaves the same however it
  // was connected.
  VSOCK_LOG(kDebug, "rdma_cm RTS for QP %u: timeout %u -> %u, retry_cnt %u -> %u, rnr_retry %u -> %u", qp.qpn(),
            attr.timeout, config.timeout, attr.retry_cnt, config.retry_cnt, attr.rnr_retry, config.rnr_retry);
  attr.timeout = config.timeout;
  attr.retry_cnt = config.retry_cnt;
  attr.rnr_retry = config.rnr_retry;
  mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;
  return qp.modify(attr, mask, "to RTS (rdma_cm)");
}

rdma_conn_param cm_conn_param(const RcQueuePair& qp, const void* private_data, uint8_t private_data_length) {
  const RcQpConfig& config = qp.config();
  rdma_conn_param param{};
  param.private_data = private_data;
  param.private_data_len = private_data_length;
  param.initiator_depth = config.max_rd_atomic;
  param.responder_resources = config.max_rd_atomic;
  param.retry_count = config.retry_cnt > 7 ? 7 : config.retry_cnt;  // 3-bit fields in the CM messages
  param.rnr_retry_count = config.rnr_retry > 7 ? 7 : config.rnr_retry;
  param.flow_control = 1;
  param.qp_num = qp.qpn();
  param.srq = 0;
  return param;
}

}  // namespace vsock::rdma
