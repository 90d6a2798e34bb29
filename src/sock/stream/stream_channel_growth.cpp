// StreamChannel: a receive ring that grows with its traffic (docs/protocol.md
// §3.1). A connection starts with a small ring (config.ring_initial), so
// that thousands of idle ones register little; one whose peer's writes
// fill it past half gets a ring kGrowFactor times larger, up to ring_size.
//
// The receiver registers the larger ring and offers it (RingGrow). The
// writer copies every byte it has not had credited (posted or still
// staged) into a larger send buffer at the same stream positions, posts
// RingMoved with its ring tail, and from then on writes into the new ring
// at position mod its capacity. RC keeps order, so the receiver takes
// RingMoved after the last DATA into the old ring: it copies its unread
// bytes to their positions in the new ring and drops the old one. The old
// send buffer stays registered until RingMoved has completed (nothing
// posted before it reads that memory then). Either side may refuse (the
// memory budget, the device): the ring then keeps its size.
#include <cstring>
#include <utility>

#include "core/log.hpp"
#include "core/stats.hpp"
#include "sock/stream/stream_channel.hpp"
#include "sock/stream/stream_post_batch.hpp"
#include "sock/wire/ring_resize.hpp"

namespace vsock::sock {

using rdma::Status;

// ------------------------------------------------------- the receiver's --

void StreamChannel::maybe_offer_growth() {
  const uint64_t capacity = ring_.capacity();
  // Nothing grows once our socket is closed (its ring may be revoked, to
  // be parked: stream_channel_reuse.cpp).
  if (grow_offered_ || grow_refused_ || capacity >= config_.ring_size || !started_ || sending_stopped_ ||
      peer_fin_ || error_ != 0 || close_requested_ || revoked_capacity_ != 0)
    return;
  if (ring_.available() < capacity / kGrowFill) return;
  const uint64_t bigger = capacity * kGrowFactor < config_.ring_size ? capacity * kGrowFactor : config_.ring_size;
  const uint64_t bytes = rdma::page_rounded(bigger);
  if (!reservation_.try_grow(bytes, config_.memory_budget)) {
    grow_refused_ = true;
    ++counters_.ring_grows_refused;
    VSOCK_LOG(kDebug, "stream: QP %u: ring stays at %llu bytes: the memory budget is reached", qp_.qpn(),
              static_cast<unsigned long long>(capacity));
    return;
  }
  core::Result<rdma::ReceiveRing> ring = rdma::ReceiveRing::create(pd_, bigger);
  if (!ring) {
    reservation_.shrink(bytes);
    grow_refused_ = true;
    ++counters_.ring_grows_refused;
    return;
  }
  offered_ring_ = std::move(ring.value());
  grow_offered_ = true;
  grow_sent_ = false;  // queue_ring_messages() posts the offer
}

void StreamChannel::on_ring_moved(const uint8_t* slot, uint32_t length) {
  core::Result<wire::RingMovedMessage> parsed = wire::parse_ring_moved(slot, length);
  if (!parsed) return violation("malformed RingMoved");
  if (!grow_offered_ || !grow_sent_) return violation("RingMoved without a RingGrow");
  const uint64_t offered_bytes = rdma::page_rounded(offered_ring_.capacity());
  grow_offered_ = false;
  if (!parsed.value().accepted) {
    offered_ring_ = rdma::ReceiveRing();
    reservation_.shrink(offered_bytes);
    grow_refused_ = true;
    ++counters_.ring_grows_refused;
    return;
  }
  // Every DATA into the old ring came before RingMoved: its position is
  // where what this side received ends.
  if (parsed.value().position != ring_.index().tail()) return violation("RingMoved at another position than the ring's tail");
  if (!offered_ring_.take_unread_from(ring_)) return violation("RingMoved with more unread than the new ring holds");
  const uint64_t old_bytes = rdma::page_rounded(ring_.capacity());
  ring_ = std::move(offered_ring_);  // the old ring is deregistered: the peer writes nothing more there
  reservation_.shrink(old_bytes);
  credit_.grow_to(ring_.capacity());
  ++counters_.ring_grows;
  core::stat_add(core::Stat::ring_grows);
  VSOCK_LOG(kDebug, "stream: QP %u: receive ring grew to %llu bytes", qp_.qpn(),
            static_cast<unsigned long long>(ring_.capacity()));
}

// --------------------------------------------------------- the writer's --

void StreamChannel::on_ring_grow(const uint8_t* slot, uint32_t length) {
  core::Result<wire::RingGrowMessage> parsed = wire::parse_ring_grow(slot, length);
  if (!parsed) return violation("malformed RingGrow");
  if (!started_) return violation("RingGrow before the stream started");
  if (peer_offer_pending_) return violation("a second RingGrow before the first was answered");
  const rdma::RingDescriptor& ring = parsed.value().ring;
  // The same bounds as the ring the peer declared first: the send buffer
  // that mirrors it is registered here.
  if (ring.capacity <= remote_.capacity() || ring.capacity > kMaxPeerRing || ring.capacity > config_.max_peer_ring)
    return violation("RingGrow with a ring that is not larger, or larger than allowed");
  peer_offer_ = ring;
  peer_offer_pending_ = true;  // queue_ring_messages() answers
}

void StreamChannel::answer_ring_grow(PostBatch& batch) {
  peer_offer_pending_ = false;
  if (move_to_offered_ring(batch)) return;
  // Refused: the writer stays on the ring it has.
  wire::RingMovedMessage refusal;
  uint8_t bytes[wire::kRingMovedMessageSize];
  wire::encode(refusal, bytes);
  add_own_message(batch, kMovedSlot, bytes, sizeof bytes);
}

bool StreamChannel::move_to_offered_ring(PostBatch& batch) {
  // After a FIN nothing more is written: no need for a larger ring.
  if (write_shut_) return false;
  core::Result<rdma::RemoteRing> moved = remote_.moved_to(peer_offer_);
  if (!moved) return false;  // checked on arrival: cannot happen
  const uint64_t bytes = rdma::page_rounded(peer_offer_.capacity);
  if (!reservation_.try_grow(bytes, config_.memory_budget)) return false;
  core::Result<rdma::MemoryRegion> buffer = rdma::MemoryRegion::allocate(pd_, peer_offer_.capacity, 0);
  if (!buffer) {
    reservation_.shrink(bytes);
    return false;
  }
  // Every byte not yet credited (posted or staged) to its position in the
  // new buffer: the posted ones for a Revert's resend (stop_writing), the
  // staged ones to post from there.
  const uint64_t old_capacity = remote_.capacity();
  const uint64_t end = remote_.index().tail() + staged_;
  for (uint64_t position = remote_.index().head(); position != end;) {
    const uint64_t in = position & (old_capacity - 1);
    const uint64_t out = position & (peer_offer_.capacity - 1);
    uint64_t piece = end - position;
    if (piece > old_capacity - in) piece = old_capacity - in;
    if (piece > peer_offer_.capacity - out) piece = peer_offer_.capacity - out;
    std::memcpy(buffer.value().data() + out, send_buffer_.data() + in, piece);
    position += piece;
  }
  wire::RingMovedMessage message;
  message.accepted = true;
  message.position = remote_.index().tail();
  uint8_t encoded[wire::kRingMovedMessageSize];
  wire::encode(message, encoded);
  const uint64_t sequence = add_own_message(batch, kMovedSlot, encoded, sizeof encoded);
  // The DATA posted before RingMoved reads the old buffer until it is sent
  // and acknowledged: it goes once RingMoved has completed.
  retired_mirrors_.push_back(RetiredMirror{std::move(send_buffer_), sequence});
  send_buffer_ = std::move(buffer.value());
  remote_ = moved.value();
  peer_ring_ = peer_offer_;
  const uint64_t quarter = remote_.capacity() / 4 > 0 ? remote_.capacity() / 4 : 1;
  if (config_.cork_bytes == 0) cork_bytes_ = quarter < max_segment_ ? quarter : max_segment_;
  ++counters_.peer_ring_moves;
  return true;
}

void StreamChannel::release_retired_mirrors() {
  // Oldest first; completions come in order.
  while (!retired_mirrors_.empty() && sq_.completed() > retired_mirrors_.front().moved_sequence) {
    reservation_.shrink(rdma::page_rounded(retired_mirrors_.front().memory.size()));
    retired_mirrors_.erase(retired_mirrors_.begin());
  }
}

// ------------------------------------------------------------- posting --

void StreamChannel::queue_ring_messages(PostBatch& batch) {
  if (grow_offered_ && !grow_sent_ && sq_.room() > 0 && error_ == 0) {
    wire::RingGrowMessage offer;
    offer.ring = offered_ring_.descriptor();
    uint8_t bytes[wire::kRingGrowMessageSize];
    wire::encode(offer, bytes);
    add_own_message(batch, kGrowSlot, bytes, sizeof bytes);
    grow_sent_ = true;
  }
  if (peer_offer_pending_ && sq_.room() > 0 && error_ == 0) answer_ring_grow(batch);
}

uint64_t StreamChannel::add_own_message(PostBatch& batch, uint32_t slot, const uint8_t* data, size_t length) {
  // From the slot, not the caller's stack: the batch may be posted later.
  uint8_t* buffer = message_slot(config_.rq_depth + slot);
  std::memcpy(buffer, data, length);
  ibv_send_wr& wr = add_send(batch, true);
  wr.opcode = IBV_WR_SEND;
  wr.num_sge = 1;
  wr.sg_list->addr = reinterpret_cast<uintptr_t>(buffer);
  wr.sg_list->length = static_cast<uint32_t>(length);
  wr.sg_list->lkey = message_buffer_.lkey();
  if (length <= inline_limit_) wr.send_flags |= IBV_SEND_INLINE;
  ++counters_.messages_sent;
  return wr.wr_id;
}

}  // namespace vsock::sock
