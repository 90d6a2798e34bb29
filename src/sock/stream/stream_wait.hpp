// wait_until(): blocks a caller on a StreamChannel the way DESIGN decision 6
// says — poll, arm, poll again, sleep — for the socket layer's blocking
// send/recv and for tests. The channel itself never blocks.
//
//   1. progress() and check `ready` for up to spin_us (busy polling: the
//      cheapest wake-up when the answer is microseconds away);
//   2. arm the CQ, then progress() once more: a completion that arrived
//      between the last poll and the arm raises no event and would
//      otherwise be slept through;
//   3. sleep in ppoll (the raw system call, never the interposed one) on
//      the completion fd, at most kWaitSliceMs at a time, drain the events
//      (which disarms the CQ) and go back to 2.
// Sleep that ends without an event is reported to the channel
// (note_idle), which probes the peer after StreamChannel::kProbeIdleMs of
// it, so a peer that died while we only read is found (its queue pair stops
// acknowledging) instead of waited for forever.
#pragma once
#include <cstdint>

#include "core/result.hpp"
#include "sock/stream/stream_channel.hpp"

namespace vsock::sock {

inline constexpr int kWaitSliceMs = 100;

using WaitPredicate = bool (*)(const StreamChannel& channel, void* context);

// ok(true): `ready` holds, or the channel has failed (the next call on it
// reports the error). ok(false): timeout_ms passed (-1: no limit; the sleep
// is still sliced and probing). EINTR when a signal interrupted the sleep,
// as the kernel's blocking calls do; another errno if arming or polling
// failed.
core::Result<bool> wait_until(StreamChannel& channel, WaitPredicate ready, void* context, int timeout_ms,
                              uint32_t spin_us);

// The same with any callable `bool(const StreamChannel&)`.
template <class Ready>
core::Result<bool> wait_until(StreamChannel& channel, Ready ready, int timeout_ms, uint32_t spin_us) {
  WaitPredicate call = [](const StreamChannel& c, void* context) { return (*static_cast<Ready*>(context))(c); };
  return wait_until(channel, call, &ready, timeout_ms, spin_us);
}

// The two predicates sockets need.
inline bool is_readable(const StreamChannel& channel) { return channel.readable(); }
inline bool is_writable(const StreamChannel& channel) { return channel.writable(); }

}  // namespace vsock::sock
