#include "sock/wire/fragment_layout.hpp"

#include <cerrno>

namespace vsock::sock::wire {

bool fragment_layout_valid(uint32_t total, uint32_t count) {
  if (total > kMaxDatagramSize || count == 0 || count > kMaxDatagramFragments) return false;
  // An empty datagram is one empty fragment; otherwise none may be empty.
  return count <= (total == 0 ? 1 : total);
}

core::Result<FragmentSpan> fragment_span(uint32_t total, uint32_t count, uint32_t index) {
  using R = core::Result<FragmentSpan>;
  if (!fragment_layout_valid(total, count) || index >= count) return R::fail(EPROTO);
  const uint32_t base = total / count;
  const uint32_t longer = total % count;  // the first `longer` fragments hold base + 1
  FragmentSpan span;
  span.offset = index * base + (index < longer ? index : longer);
  span.length = base + (index < longer ? 1 : 0);
  return R::ok(span);
}

}  // namespace vsock::sock::wire
