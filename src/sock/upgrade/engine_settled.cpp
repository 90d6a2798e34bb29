// Settled streams: switched connections with nothing for the side-band
// thread to do. A server with thousands of open connections has nearly all
// of them settled; the thread's rounds used to take every one's lock three
// times and progress each whose ring may grow (about 10 ms a round under
// emulation with 1,000 connections, on the application's vCPU). Now the
// rounds pass settled streams by without their lock. What can still need
// the thread on a settled stream comes to it:
//   - held data (Nagle, autocork): the writer names its stream
//     (note_held_data → on_held_data), which the next round unsettles;
//   - an rdma_cm event (the queue pair's connection lost): dispatch()
//     unsettles it;
//   - the peer filling a small ring while the application reads nothing
//     (docs/protocol.md §3.1): nothing tells, so ring-growth looks visit
//     settled streams whose ring may grow, each at its own gap that grows
//     while its ring receives nothing, a batch per round at most; a look
//     at a stream the application has read from since the last one only
//     schedules the next (its reads take completions and offer growth).
// A look that finds the stream no longer settled (a Revert to resend, data
// held) hands it back to the rounds.
#include "sock/upgrade/engine.hpp"

namespace vsock::sock::side_band {

namespace {

// Bytes the peer has put into the stream's ring in all, and bytes the
// application took from it (0: no channel).
uint64_t received_of(StreamSocket* stream) {
  StreamChannel* channel = stream->channel();
  return channel == nullptr ? 0 : channel->ring_received();
}
uint64_t consumed_of(StreamSocket* stream) {
  StreamChannel* channel = stream->channel();
  return channel == nullptr ? 0 : channel->ring_consumed();
}

}  // namespace

bool Engine::settles(const Tracked& tracked) const {
  StreamSocket* stream = tracked.stream;
  return !stream->kernel_only() && stream->upgrade().phase() == UpgradePhase::kSwitched &&
         tracked.deadline_ms == 0 && tracked.attach_deadline_ms == 0 && tracked.first_write_deadline_ms == 0 &&
         !stream->awaiting_first_write() && !switch_in_progress(stream) && !stream->holds_data_locked();
}

void Engine::settle(Tracked& tracked, int64_t now) {
  tracked.settled = true;
  tracked.stream->rearm_held_note_locked();  // it holds nothing (settles())
  tracked.grow_gap_ms = kRingGrowPollMs;
  tracked.grow_look_ms = tracked.stream->ring_may_grow_locked() ? now + tracked.grow_gap_ms : 0;
  tracked.received_at_look = received_of(tracked.stream);
  tracked.consumed_at_look = consumed_of(tracked.stream);
}

bool Engine::look_at_settled(Tracked& tracked, int64_t now) {
  StreamSocket* stream = tracked.stream;
  if (stream->kernel_only()) return true;
  // An application that reads the stream takes its completions and offers
  // growth itself: the look only polls a ring nobody took from since the
  // last one (and does not take completions from under a busy reader).
  const uint64_t consumed = consumed_of(stream);
  const bool reading = consumed != tracked.consumed_at_look;
  tracked.consumed_at_look = consumed;
  if (!reading && stream->ring_may_grow_locked()) stream->progress_locked();
  if (!settles(tracked)) {
    tracked.settled = false;  // the rounds take it from here
    return stream->kernel_only();
  }
  const uint64_t received = received_of(stream);
  const bool busy = reading || received != tracked.received_at_look;
  tracked.grow_gap_ms = busy ? kRingGrowPollMs : std::min(2 * tracked.grow_gap_ms, kRingGrowIdleMs);
  tracked.received_at_look = received;
  tracked.grow_look_ms = stream->ring_may_grow_locked() ? now + tracked.grow_gap_ms : 0;
  return false;
}

int64_t Engine::next_settled_look_ms() const {
  int64_t soonest = INT64_MAX;
  for (const Tracked& tracked : tracked_)
    if (tracked.settled && tracked.grow_look_ms != 0) soonest = std::min(soonest, tracked.grow_look_ms);
  if (soonest == INT64_MAX) return soonest;
  return std::max(soonest, settled_look_ms_ + kRingGrowPollMs);
}

void Engine::on_held_data(StreamSocket* stream) {
  bool first;
  {
    std::lock_guard<std::mutex> held(held_mu_);
    first = held_inbox_.empty();
    stream->retain();
    held_inbox_.push_back(stream);
  }
  if (first) wake();  // (a later note finds the thread woken already)
}

void Engine::take_held_notes() {
  std::vector<StreamSocket*> notes;
  {
    std::lock_guard<std::mutex> held(held_mu_);
    if (held_inbox_.empty()) return;
    notes.swap(held_inbox_);
  }
  for (StreamSocket* stream : notes) {
    if (Tracked* tracked = tracked_entry(stream)) tracked->settled = false;
    stream->release();
  }
}

}  // namespace vsock::sock::side_band
