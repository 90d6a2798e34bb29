// CmEventChannel: an rdma_cm event channel whose fd a progress engine can
// poll.
//
// All rdma_cm ids of a process (listeners, connectors, accepted and
// connected ids) may share one channel, so that one fd wakes the wait
// engine for all of them; routing an event to its owner by CmEvent::id is
// the caller's job (each owner has an owns() test). The fd is non-blocking:
// next_event(0) never sleeps, and a bounded wait sleeps in the raw ppoll
// system call, never in the interposed poll().
//
// Destroy every id created on the channel before the channel itself.
#pragma once
#include <rdma/rdma_cma.h>

#include "core/result.hpp"
#include "rdma/cm_event.hpp"

namespace vsock::rdma {

class CmEventChannel {
 public:
  static core::Result<CmEventChannel> create();

  CmEventChannel() = default;
  ~CmEventChannel();
  CmEventChannel(CmEventChannel&& other) noexcept;
  CmEventChannel& operator=(CmEventChannel&& other) noexcept;
  CmEventChannel(const CmEventChannel&) = delete;
  CmEventChannel& operator=(const CmEventChannel&) = delete;

  bool valid() const { return channel_ != nullptr; }
  rdma_event_channel* get() const { return channel_; }
  // Readable when an event is queued.
  int fd() const { return channel_ ? channel_->fd : -1; }

  // The next event, copied and already acknowledged. Waits at most
  // timeout_ms (>= 0; 0: take only what is queued). EAGAIN: none came in
  // time (not logged); EINTR is passed up so that signals behave as in the
  // kernel; anything else is logged.
  core::Result<CmEvent> next_event(int timeout_ms);

 private:
  void reset();
  rdma_event_channel* channel_ = nullptr;
};

}  // namespace vsock::rdma
