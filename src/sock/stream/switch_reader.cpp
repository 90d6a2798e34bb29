#include "sock/stream/switch_reader.hpp"

#include <cerrno>
#include <cstdint>

namespace vsock::sock {

uint64_t SwitchReader::tcp_remaining() const { return switch_known_ ? switch_count_ - tcp_read_ : UINT64_MAX; }

ReadPlan SwitchReader::plan(size_t length, int flags) const {
  ReadPlan plan;
  plan.consume = (flags & MSG_PEEK) == 0;
  plan.tcp_bounded = switch_known_ || reverted_;
  if (tcp_again()) {
    // TCP to the end: the peer went back to it for good.
    plan.tcp_length = length;
    plan.tcp_flags = flags;
    return plan;
  }
  if (!switch_known_) {
    // Everything from TCP for now, but never wait in the kernel for all of
    // it: part of it may arrive in the ring instead.
    plan.tcp_length = length;
    plan.tcp_flags = flags & ~MSG_WAITALL;
    return plan;
  }
  const uint64_t remaining = switch_count_ - tcp_read_;
  plan.tcp_length = remaining < length ? static_cast<size_t>(remaining) : length;
  plan.tcp_flags = flags;
  // The ring only after the token: the caller takes it first (token_due()).
  if (token_pending_) {
    if (plan.tcp_length < length) plan.tcp_flags &= ~MSG_WAITALL;
    return plan;
  }
  plan.ring_length = length - plan.tcp_length;
  if (plan.ring_length > ring_left()) plan.ring_length = static_cast<size_t>(ring_left());
  return plan;
}

core::Result<bool> SwitchReader::on_tcp_read(uint64_t bytes) {
  // After the ring part TCP runs to the end; tcp_read_ stays the Switch's
  // count (the TCP part), so nothing after needs counting.
  if (switch_known_ && tcp_again()) return core::Result<bool>::ok(true);
  if (switch_known_ && bytes > switch_count_ - tcp_read_) return core::Result<bool>::fail(EPROTO);
  // Before the Switch the count only grows with what the kernel delivered,
  // which cannot exceed 2^64 in any real connection; saturate all the same
  // so a bad caller cannot make it wrap into a small number.
  tcp_read_ = bytes > UINT64_MAX - tcp_read_ ? UINT64_MAX : tcp_read_ + bytes;
  return core::Result<bool>::ok(true);
}

core::Result<bool> SwitchReader::on_switch(uint64_t count, bool token_follows) {
  if (switch_known_ || count < tcp_read_) return core::Result<bool>::fail(EPROTO);
  if (tcp_eof_ && count != tcp_read_) return core::Result<bool>::fail(ECONNRESET);
  switch_known_ = true;
  switch_count_ = count;
  token_pending_ = token_follows;
  return core::Result<bool>::ok(true);
}

core::Result<bool> SwitchReader::on_token() {
  if (!token_due()) return core::Result<bool>::fail(EPROTO);
  token_pending_ = false;
  return core::Result<bool>::ok(true);
}

core::Result<bool> SwitchReader::forget_switch() {
  if (!token_pending_ || ring_read_ != 0 || reverted_) return core::Result<bool>::fail(EPROTO);
  switch_known_ = false;
  switch_count_ = 0;
  token_pending_ = false;
  return core::Result<bool>::ok(true);
}

core::Result<bool> SwitchReader::on_ring_read(uint64_t bytes) {
  if (reverted_ && bytes > ring_total_ - ring_read_) return core::Result<bool>::fail(EPROTO);
  ring_read_ = bytes > UINT64_MAX - ring_read_ ? UINT64_MAX : ring_read_ + bytes;
  return core::Result<bool>::ok(true);
}

core::Result<bool> SwitchReader::on_revert(uint64_t ring_total) {
  if (reverted_ || ring_total < ring_read_ || (!switch_known_ && ring_total != 0))
    return core::Result<bool>::fail(EPROTO);
  reverted_ = true;
  ring_total_ = ring_total;
  return core::Result<bool>::ok(true);
}

core::Result<TcpEnd> SwitchReader::on_tcp_eof() {
  // The end where the token should be: the caller decides (a forged
  // Switch, forget_switch()); not an end after the Switch.
  if (switch_known_ && (tcp_read_ < switch_count_ || token_pending_)) return core::Result<TcpEnd>::fail(ECONNRESET);
  tcp_eof_ = true;
  if (tcp_again()) return core::Result<TcpEnd>::ok(TcpEnd::kEndOfStream);
  return core::Result<TcpEnd>::ok(switch_known_ ? TcpEnd::kAfterSwitch : TcpEnd::kEndOfStream);
}

core::Result<uint64_t> SwitchReader::readable_bytes(uint64_t kernel_available, uint64_t ring_available) const {
  if (!switch_known_ || tcp_again()) return core::Result<uint64_t>::ok(kernel_available);
  const uint64_t remaining = switch_count_ - tcp_read_;
  if (kernel_available < remaining) return core::Result<uint64_t>::ok(kernel_available);
  // The kernel's bytes past the count are the token, then the ring's.
  if (token_pending_) return core::Result<uint64_t>::ok(remaining);
  if (reverted_) {
    // TCP part, ring part, and once that is whole, TCP again.
    const uint64_t left = ring_left();
    const uint64_t ring = ring_available < left ? ring_available : left;
    uint64_t total = remaining + ring;
    if (total < remaining) return core::Result<uint64_t>::ok(UINT64_MAX);
    const uint64_t after = ring == left ? kernel_available - remaining : 0;
    return core::Result<uint64_t>::ok(total + after < total ? UINT64_MAX : total + after);
  }
  // More than the count: bytes the peer wrote on TCP after a Revert that
  // has not arrived yet. They come after the ring's, which are not all
  // known: not counted.
  // The TCP part is all there: the ring's bytes follow it without a gap.
  const uint64_t total = remaining + ring_available;
  return core::Result<uint64_t>::ok(total < remaining ? UINT64_MAX : total);
}

}  // namespace vsock::sock
