#include "sock/dgram/fragmenter.hpp"

#include <cerrno>

#include "sock/wire/datagram_header.hpp"

namespace vsock::sock::dgram {

size_t payload_budget(size_t path_mtu) {
  return path_mtu > wire::kDatagramHeaderSize ? path_mtu - wire::kDatagramHeaderSize : 0;
}

core::Result<FragmentPlan> plan_fragments(size_t datagram_len, size_t budget) {
  using R = core::Result<FragmentPlan>;
  if (budget == 0) return R::fail(EINVAL);
  if (datagram_len > wire::kMaxDatagramSize) return R::fail(EMSGSIZE);
  // Rounded up without len + budget - 1, which a huge budget would wrap.
  size_t count = datagram_len / budget + (datagram_len % budget != 0 ? 1 : 0);
  if (count == 0) count = 1;  // the empty datagram is one empty fragment
  if (count > wire::kMaxDatagramFragments) return R::fail(EMSGSIZE);
  FragmentPlan plan;
  plan.total = static_cast<uint32_t>(datagram_len);
  plan.count = static_cast<uint32_t>(count);
  return R::ok(plan);
}

core::Result<wire::FragmentSpan> fragment_at(const FragmentPlan& plan, uint32_t index) {
  core::Result<wire::FragmentSpan> span = wire::fragment_span(plan.total, plan.count, index);
  if (!span) return core::Result<wire::FragmentSpan>::fail(EINVAL);
  return span;
}

}  // namespace vsock::sock::dgram
