// StreamChannel: a channel whose stream ended cleanly carries the next
// connection between the same two processes (docs/protocol.md §1.2).
#include "sock/stream/stream_channel.hpp"

#include <cstring>

namespace vsock::sock {

bool StreamChannel::reusable() const {
  return started_ && error_ == 0 && !aborted_ && !sending_stopped_ && close_requested_ && !closed_pending_ &&
         peer_closed_ && all_sent() && staged_ == 0 && ring_.available() == 0 && inbox_count_ == 0 &&
         after_close_length_ == 0 &&
         !grow_offered_ && !peer_offer_pending_ && retired_mirrors_.empty() && !offered_ring_.valid() &&
         !reset_outstanding_;
}

size_t StreamChannel::take_message_after_close(uint8_t* out) {
  const size_t length = after_close_length_;
  std::memcpy(out, after_close_, length);
  after_close_length_ = 0;
  return length;
}

void StreamChannel::revoke_ring() {
  // Not while a ring change is under way: its RingMoved names positions
  // of this ring (the caller asks again later).
  if (revoked_capacity_ != 0 || !ring_.valid() || ring_.available() != 0 || grow_offered_ || peer_offer_pending_)
    return;
  revoked_capacity_ = ring_.capacity();
  ring_ = rdma::ReceiveRing();  // deregistered and freed; the budget keeps its share
}

core::Result<StreamChannel> StreamChannel::reuse(StreamChannel&& old) {
  // The one step that can fail comes first: `old` is untouched then.
  if (old.revoked_capacity_ != 0) {
    core::Result<rdma::ReceiveRing> ring = rdma::ReceiveRing::create(old.pd_, old.revoked_capacity_);
    if (!ring) return core::Result<StreamChannel>::fail(ring.error());
    old.ring_ = std::move(ring.value());
    old.revoked_capacity_ = 0;
  }
  StreamChannel fresh;
  // What the device holds: the queue pair (connected, its receives
  // posted), the CQ, the PD and the memory registered in it.
  fresh.reservation_ = std::move(old.reservation_);
  fresh.pd_ = std::move(old.pd_);
  fresh.cq_ = std::move(old.cq_);
  fresh.ring_ = std::move(old.ring_);
  fresh.ring_.restart();
  fresh.send_buffer_ = std::move(old.send_buffer_);
  fresh.message_buffer_ = std::move(old.message_buffer_);
  fresh.qp_ = std::move(old.qp_);
  fresh.qp_ready_ = old.qp_ready_;
  fresh.config_ = old.config_;
  fresh.inline_limit_ = old.inline_limit_;
  fresh.max_segment_ = old.max_segment_;
  fresh.recv_batch_ = old.recv_batch_;
  fresh.free_slots_ = std::move(old.free_slots_);
  fresh.receives_posted_ = old.receives_posted_;
  // Work requests of the old stream may still complete (a probe, the last
  // unsignalled credits): their sequence numbers stay meaningful.
  fresh.sq_ = old.sq_;
  fresh.messages_posted_ = old.messages_posted_;
  fresh.last_message_sequence_ = old.last_message_sequence_;
  fresh.message_sequence_ = old.message_sequence_;
  fresh.message_slot_used_ = old.message_slot_used_;
  fresh.probe_sequence_ = old.probe_sequence_;
  fresh.probe_outstanding_ = old.probe_outstanding_;
  fresh.fin_sequence_ = old.fin_sequence_;
  // The stream starts over: everything else keeps its initial value.
  fresh.coalescing_ = fresh.config_.autocork;
  fresh.sq_.set_keep_one_signaled(fresh.coalescing_);
  fresh.credit_ = CreditReturn(fresh.ring_.capacity());
  return core::Result<StreamChannel>::ok(std::move(fresh));
}

}  // namespace vsock::sock
