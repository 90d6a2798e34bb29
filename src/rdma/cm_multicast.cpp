#include "rdma/cm_multicast.hpp"

#include <cerrno>

#include "core/clock.hpp"
#include "core/log.hpp"

namespace vsock::rdma {
namespace {

sockaddr_in group_address(in_addr group) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr = group;
  return address;
}

}  // namespace

core::Result<CmMulticast> CmMulticast::create(const sockaddr_in& device_address) {
  using R = core::Result<CmMulticast>;
  CmMulticast multicast;
  core::Result<CmEventChannel> channel = CmEventChannel::create();
  if (!channel) return R::fail(channel.error());
  multicast.channel_ = std::move(channel.value());
  core::Result<CmId> id = CmId::create_udp(multicast.channel_);
  if (!id) return R::fail(id.error());
  multicast.id_ = std::move(id.value());
  sockaddr_in local = device_address;
  local.sin_port = 0;
  // Binding to the device's address ties the id to that device and port:
  // a join needs it.
  if (rdma_bind_addr(multicast.id_.get(), reinterpret_cast<sockaddr*>(&local)) != 0)
    return R::fail(report_error(errno, "rdma_bind_addr (multicast id)"));
  return R::ok(std::move(multicast));
}

CmMulticast::~CmMulticast() {
  if (!id_.valid()) return;
  for (auto& [group, context] : joined_) {
    sockaddr_in address = group_address(in_addr{group});
    rdma_leave_multicast(id_.get(), reinterpret_cast<sockaddr*>(&address));
  }
}

core::Result<MulticastPath> CmMulticast::join(in_addr group, bool send_only, int timeout_ms) {
  using R = core::Result<MulticastPath>;
  if (!id_.valid()) return R::fail(EBADF);
  if (joined(group)) return R::fail(EALREADY);
  sockaddr_in address = group_address(group);
  const uintptr_t context = next_context_++;
  rdma_cm_join_mc_attr_ex attr{};
  attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  attr.join_flags = send_only ? RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER : RDMA_MC_JOIN_FLAG_FULLMEMBER;
  attr.addr = reinterpret_cast<sockaddr*>(&address);
  if (rdma_join_multicast_ex(id_.get(), &attr, reinterpret_cast<void*>(context)) != 0)
    return R::fail(report_error(errno, "rdma_join_multicast_ex(%s)", send_only ? "send-only" : "full"));
  // From here the kernel holds a membership: leave() undoes it whatever
  // the outcome.
  joined_[group.s_addr] = context;
  const int64_t deadline = core::monotonic_ms() + timeout_ms;
  for (;;) {
    int64_t left = deadline - core::monotonic_ms();
    if (left < 0) left = 0;
    core::Result<CmEvent> event = channel_.next_event(static_cast<int>(left));
    if (!event) {
      if (event.error() == EINTR) continue;  // the bound still holds
      leave(group);
      return R::fail(event.error() == EAGAIN ? ETIMEDOUT : event.error());
    }
    const CmEvent& e = event.value();
    // Events of an earlier join that gave up waiting: not this one.
    if (e.join_context != reinterpret_cast<const void*>(context)) continue;
    if (e.type == RDMA_CM_EVENT_MULTICAST_JOIN && e.ud.has) {
      MulticastPath path;
      path.ah_attr = e.ud.ah_attr;
      path.qpn = e.ud.qpn;
      path.qkey = e.ud.qkey;
      return R::ok(path);
    }
    leave(group);
    VSOCK_LOG(kInfo, "multicast join: %s (status %d)", cm_event_name(e.type), e.status);
    return R::fail(e.status < 0 ? -e.status : EPROTO);
  }
}

void CmMulticast::leave(in_addr group) {
  auto it = joined_.find(group.s_addr);
  if (it == joined_.end()) return;
  joined_.erase(it);
  sockaddr_in address = group_address(group);
  if (rdma_leave_multicast(id_.get(), reinterpret_cast<sockaddr*>(&address)) != 0)
    report_error(errno, "rdma_leave_multicast");
}

}  // namespace vsock::rdma
