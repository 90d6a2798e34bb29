// SendQueueTracker: how full a send queue is when most work requests are
// posted unsignalled (DESIGN decision 4: signal selectively). Pure
// bookkeeping, unit-tested; StreamChannel owns one per queue pair.
//
// Every work request gets the next sequence number, which the channel uses
// as its wr_id. Completions on an RC queue pair come in posting order, so a
// signalled completion for sequence s retires every request up to s, the
// unsignalled ones included. A request is signalled when
//   - signal_every requests have gone unsignalled (completions are cheap in
//     batches, and the queue must drain even under a steady stream),
//   - it is posted into the last `reserve` + 1 slots: the caller keeps
//     `reserve` slots for control requests and stops other requests at
//     that line, so the request that reaches it, and every one after it, is
//     signalled. Then, whenever the queue is that full, the newest request
//     in it is signalled and a completion is on its way (otherwise a queue
//     of unsignalled requests would never report having room);
//   - the caller forces it (FIN, a liveness probe: the caller waits for it),
//   - with keep_one_signaled (autocork), none that is outstanding is: a
//     corked writer relies on a completion coming to flush what it holds.
#pragma once
#include <cstdint>

#include "core/result.hpp"

namespace vsock::sock {

class SendQueueTracker {
 public:
  SendQueueTracker() = default;
  // depth >= 1, signal_every >= 1 (clamped), reserve < depth (clamped).
  SendQueueTracker(uint32_t depth, uint32_t signal_every, bool keep_one_signaled, uint32_t reserve = 0);

  uint32_t depth() const { return depth_; }
  uint32_t outstanding() const { return static_cast<uint32_t>(posted_ - completed_); }
  uint32_t room() const { return depth_ - outstanding(); }
  uint32_t signaled_outstanding() const { return signaled_outstanding_; }
  uint64_t posted() const { return posted_; }
  // Requests known to have finished: every sequence number below this.
  uint64_t completed() const { return completed_; }

  // Autocork turned on or off on a live queue.
  void set_keep_one_signaled(bool on) { keep_one_signaled_ = on; }
  // Whether the next request (if posted) must be signalled.
  bool next_signaled(bool force) const;
  // Records a posted request (room() must be > 0); returns its sequence
  // number, the wr_id to post it with.
  uint64_t on_posted(bool signaled);
  // The signalled request `sequence` completed successfully. EINVAL if it was
  // never posted or is already retired (a wr_id we did not hand out).
  core::Result<bool> on_completed(uint64_t sequence);

 private:
  uint32_t depth_ = 1;
  uint32_t signal_every_ = 1;
  uint32_t reserve_ = 0;
  bool keep_one_signaled_ = false;
  uint64_t posted_ = 0;     // requests posted; the next one's sequence number
  uint64_t completed_ = 0;  // requests known to be finished (a prefix)
  uint32_t signaled_outstanding_ = 0;
  uint32_t unsignaled_run_ = 0;  // unsignalled requests since the last signalled one
};

}  // namespace vsock::sock
