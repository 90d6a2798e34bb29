// CreditReturn: when the receiver of a stream tells the writer that ring
// space is free again (docs/protocol.md §3). Pure arithmetic, unit-tested.
//
// Every CREDIT costs the writer's peer a receive and both sides a work
// request, so credit is batched: it goes back once the bytes consumed but
// not yet reported reach a quarter of the ring. That alone could deadlock: a
// writer that has used up its credit waits while the reader, having consumed
// less than a quarter, waits for a threshold that never comes. So once the
// writer may be stalled, whatever has been consumed goes back at once.
//
// "May be stalled" is not "the ring was full": the writer's credit is the
// ring minus what it has written and not been credited for, i.e. minus the
// bytes in the ring *and* the bytes consumed but not yet reported. It runs
// out as soon as those two fill the ring, which can happen while the ring
// itself is far from full (the randomised unit test found that case).
#pragma once
#include <cstdint>

namespace vsock::sock {

class CreditReturn {
 public:
  CreditReturn() = default;
  explicit CreditReturn(uint64_t ring_capacity);
  // The ring grew (docs/protocol.md §3.1): the writer's credit is the new
  // capacity less what it has in flight; what is unreported stays so.
  void grow_to(uint64_t ring_capacity);

  // Whether the peer may write `length` more bytes while `ring_used` are in
  // the ring: at most the credit it could have, the ring minus what is in
  // it minus what was consumed but not yet reported. (Free ring space is
  // not enough: consumed, unreported bytes are free space the writer does
  // not know about. Credit posted but not yet received only makes this
  // more lenient, never wrong for a correct writer.)
  bool accepts_write(uint64_t ring_used, uint64_t length) const {
    return ring_used <= capacity_ && unreported_ <= capacity_ - ring_used &&
           length <= capacity_ - ring_used - unreported_;
  }

  // The peer wrote; `ring_used` bytes are now in the ring, unread. Notes
  // whether that used up the writer's credit.
  void on_peer_wrote(uint64_t ring_used) {
    if (ring_used + unreported_ >= capacity_) writer_may_be_stalled_ = true;
  }
  // The application consumed `bytes` from the ring.
  void on_consumed(uint64_t bytes) { unreported_ += bytes; }

  // How many bytes to return now (0: not yet). At most what one immediate
  // carries; call again after on_returned() for the rest.
  uint64_t due() const;
  // A CREDIT for `bytes` (<= unreported()) has been posted.
  void on_returned(uint64_t bytes);
  // Every byte returned so far: the position the writer's head stands at
  // once it has the CREDITs posted (they carry it, docs/protocol.md §3).
  uint64_t returned() const { return returned_; }

  uint64_t unreported() const { return unreported_; }
  uint64_t threshold() const { return threshold_; }
  bool writer_may_be_stalled() const { return writer_may_be_stalled_; }

 private:
  uint64_t capacity_ = 0;
  uint64_t threshold_ = 1;
  uint64_t unreported_ = 0;
  uint64_t returned_ = 0;
  bool writer_may_be_stalled_ = false;
};

}  // namespace vsock::sock
