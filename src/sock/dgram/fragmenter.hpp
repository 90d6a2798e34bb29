// How a datagram is cut for UD (docs/protocol.md section 6): nothing longer
// than the path MTU is ever posted (rxe drops such a message silently), so
// a datagram whose payload does not fit in one message goes in several,
// each the 40-byte header plus at most `budget` payload bytes.
//
// The sender picks only the count, the fewest fragments the budget allows;
// where each fragment sits follows from (total, count, index) by the
// protocol's even split (wire/fragment_layout.hpp), which the receiver
// checks. Even pieces are never longer than the budget: count >= total /
// budget, so ceil(total / count) <= budget.
//
// Pure arithmetic: no buffers, no I/O.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"
#include "sock/wire/fragment_layout.hpp"

namespace vsock::sock::dgram {

struct FragmentPlan {
  uint32_t total = 0;  // the datagram's bytes
  uint32_t count = 1;  // its fragments (1 for an empty datagram)
};

// The payload budget of one message on a path of `path_mtu` bytes (the UD
// payload the port allows, the GRH not included): what is left after the
// datagram header; 0 if the header does not fit.
size_t payload_budget(size_t path_mtu);

// The fragments of a datagram of `datagram_len` bytes with `budget` payload
// bytes per message. EMSGSIZE for a datagram longer than
// wire::kMaxDatagramSize (as a kernel UDP socket says), or one that would
// need more than wire::kMaxDatagramFragments at this budget; EINVAL for a
// budget of 0, with which no byte could ever go.
core::Result<FragmentPlan> plan_fragments(size_t datagram_len, size_t budget);

// Where fragment `index` of `plan` sits in the datagram. EINVAL for an
// index >= plan.count or a plan plan_fragments would not have made.
core::Result<wire::FragmentSpan> fragment_at(const FragmentPlan& plan, uint32_t index);

}  // namespace vsock::sock::dgram
