// CompletionQueue: a CQ and, optionally, its own completion channel.
//
// The wait contract (DESIGN decision 6): poll(); when it finds nothing for
// the spin budget, arm(), poll() once more (a completion may have arrived
// before the arm), then sleep until channel_fd() is readable, drain_events()
// and poll again. The channel fd is non-blocking so that draining never
// blocks; the sleeping itself belongs to the wait engine (src/sock), and
// wait_event() is only a bounded helper for tests and simple callers.
#pragma once
#include <infiniband/verbs.h>

#include "core/result.hpp"
#include "rdma/device.hpp"
#include "rdma/status.hpp"

namespace vsock::rdma {

class CompletionQueue {
 public:
  // A CQ with room for at least `depth` completions; with_channel also
  // creates a completion channel for it.
  static core::Result<CompletionQueue> create(const Device& device, int depth, bool with_channel);

  CompletionQueue() = default;
  ~CompletionQueue();
  CompletionQueue(CompletionQueue&& other) noexcept;
  CompletionQueue& operator=(CompletionQueue&& other) noexcept;
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  bool valid() const { return cq_ != nullptr; }
  ibv_cq* get() const { return cq_; }
  int depth() const { return cq_ ? cq_->cqe : 0; }
  bool has_channel() const { return channel_ != nullptr; }
  // The fd that becomes readable after an armed CQ gets a completion; -1
  // without a channel.
  int channel_fd() const { return channel_ ? channel_->fd : -1; }

  // Takes up to `max` completions into `out`; returns how many (0: none).
  // Work-completion errors are in out[i].status, not in the Result.
  core::Result<int> poll(ibv_wc* out, int max);
  // Asks for one channel event at the next completion (solicited_only: at
  // the next solicited or error completion). No system call while the last
  // request still stands: the CQ is then either still armed or its event is
  // waiting on the channel, and either way a sleeper on channel_fd() wakes
  // (at once, for a waiting event). So at most one event is ever pending.
  Status arm(bool solicited_only = false);
  // Consumes and acknowledges the channel events already pending, without
  // blocking; returns how many (0: none). Each event disarms the CQ. Without
  // an arm() since the last drain that found the channel empty, no event
  // can be pending and no system call is made (waits look often).
  core::Result<int> drain_events();
  // The same when the caller's poll said channel_fd() is readable: one
  // read (arm() leaves at most one event pending), none that is bound to
  // fail with EAGAIN. 0 if another thread took the event first.
  core::Result<int> take_event();
  // Completion moderation (ibv_modify_cq): one event per `count` completions
  // or `period_us`, whichever first. 0 / 0 leaves the CQ as created. ENOTSUP
  // when the device has no moderation (rxe, siw): the caller goes on
  // without it.
  Status moderate(uint32_t count, uint32_t period_us);
  // Waits at most timeout_ms (>= 0) for the channel fd (raw ppoll system call,
  // never the interposed poll), then drains. Returns the number of events,
  // 0 on timeout; EINTR is passed up so signals behave as in the kernel.
  core::Result<int> wait_event(int timeout_ms);
  // Whether an event may be pending (arm() called since the channel was
  // last found empty).
  bool maybe_event() const { return maybe_event_; }

 private:
  void reset();
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  // arm() called since the channel was last found empty: an event may be
  // (or become) pending. Callers hold the owner's lock, as for poll().
  bool maybe_event_ = false;
  // A request for an event stands: arm() went through and its event has
  // not been read yet (the CQ is armed, or the event waits on the channel).
  bool armed_ = false;
  bool armed_solicited_ = false;
};

}  // namespace vsock::rdma
