// StreamChannel: the data path of one upgraded TCP connection — a byte
// stream in each direction over an RC queue pair (DESIGN decision 4,
// docs/protocol.md §3). How the queue pair got connected (rdma_cm, or a
// socketpair in tests) is not its business.
//
// Sending: write() copies the application's bytes into a registered send
// buffer that mirrors the peer's receive ring offset for offset, and posts
// RDMA WRITE WITH IMMEDIATE (DATA, its length) at the ring's tail: one work
// request per piece, cut at the ring's end and at max_segment; pieces up to
// the inline size go inline. Because the buffer mirrors the ring, the bytes
// at a position are only overwritten once the peer has credited that
// position, i.e. consumed what the earlier write carried: no send-side
// bookkeeping of completed writes is needed, and nothing is ever posted
// from application memory. Completions are requested selectively
// (SendQueueTracker) and work requests posted in batches. send_message()
// posts the one two-sided SEND of a direction, the Switch (§2), in order
// with the DATA around it: inline, or copied into a send slot.
//
// Receiving: this side's ReceiveRing (the only memory the peer can write)
// takes the peer's writes; receives, re-posted in batches, take the
// immediates. Each receive points at its own kControlMessageMax-byte slot
// of a local-only region: a WRITE WITH IMMEDIATE leaves it untouched (its
// bytes went to the ring), a SEND lands there and is copied into a
// one-message inbox (take_message()). Messages are taken in from
// post_initial_receives() on, before start(): the server learns the
// client's ring from its Switch. The inbox holds kInboxDepth messages:
// a direction sends at most Bound or Switch, then a Revert (§5), and the
// second may arrive before the first was taken. Each immediate is parsed and checked
// against the ring before it counts; consumed bytes go back as CREDIT
// (CreditReturn). FIN ends the stream after the data before it; RESET, a
// transport error or any protocol violation fails the channel: ECONNRESET
// from then on (writes; reads once the bytes that had arrived are read, as
// the kernel keeps its receive queue across a TCP reset; a violation drops
// them) and the queue pair goes to the error state, so the peer can write
// nothing more.
//
// The receive ring starts at config.ring_initial and grows (x4, up to
// ring_size) while the peer's writes fill it past half: this side
// registers the larger ring and offers it (RingGrow); the writer copies
// what is not yet credited into a larger send buffer and answers, in order
// after the DATA it had posted, from which position on it writes there
// (RingMoved); this side then copies its unread bytes over and drops the
// old ring (docs/protocol.md §3.1). Idle connections stay small.
//
// Nothing here blocks or sleeps: write() and read() return EAGAIN, and the
// caller waits with wait_until() (stream_wait.hpp) or its own poll loop on
// completion_fd(). Not thread-safe: the socket layer serialises calls.
#pragma once
#include <infiniband/verbs.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/result.hpp"
#include "rdma/completion_queue.hpp"
#include "rdma/device.hpp"
#include "rdma/memory_budget.hpp"
#include "rdma/memory_region.hpp"
#include "rdma/protection_domain.hpp"
#include "rdma/rc_queue_pair.hpp"
#include "rdma/remote_ring.hpp"
#include "rdma/ring_buffer.hpp"
#include "rdma/status.hpp"
#include "sock/stream/stream_config.hpp"
#include "sock/stream/stream_credit.hpp"
#include "sock/stream/stream_send_queue.hpp"

namespace vsock::sock {

// What a channel has done, for tests, benchmarks and stats.
struct StreamCounters {
  uint64_t bytes_written = 0;     // accepted by write()
  uint64_t bytes_read = 0;        // consumed by read()
  uint64_t data_wrs = 0;          // DATA work requests posted
  uint64_t inline_wrs = 0;        // ... of which inline
  uint64_t ring_end_splits = 0;   // DATA pieces cut at the end of the peer's ring
  uint64_t signaled_wrs = 0;      // work requests posted signalled
  uint64_t post_calls = 0;        // ibv_post_send calls (each posts a batch)
  uint64_t credits_sent = 0;      // CREDIT work requests
  uint64_t credits_received = 0;  // CREDIT immediates
  uint64_t data_received = 0;     // DATA immediates
  uint64_t recv_posts = 0;        // ibv_post_recv calls (each re-posts a batch)
  uint64_t completions = 0;       // work completions taken from the CQ
  uint64_t write_eagain = 0;      // write() found no credit
  uint64_t sq_full = 0;           // a flush stopped at a full send queue
  uint64_t corked = 0;            // flushes held back by autocork
  uint64_t probes = 0;            // liveness probes posted
  uint64_t messages_sent = 0;      // SENDs posted by send_message()
  uint64_t messages_received = 0;  // SENDs taken into the inbox
  uint64_t ring_grows = 0;         // our receive ring grew (the peer moved to the larger one)
  uint64_t ring_grows_refused = 0; // a growth the budget, the device or the peer refused
  uint64_t peer_ring_moves = 0;    // we moved to the peer's larger ring
};

class StreamChannel {
 public:
  // The largest peer ring accepted: the largest ring_size the settings
  // allow. The send buffer mirrors the peer's ring, so without a bound a
  // peer would choose how much of our memory gets pinned.
  // 2^29: below the 2^30 positions an immediate tells apart (stream_immediate.hpp).
  static constexpr uint64_t kMaxPeerRing = uint64_t{1} << 29;
  // The largest two-sided message either way: the size of a receive slot.
  // The Switch (wire::kSwitchMessageSize, 40 bytes) fits.
  static constexpr size_t kControlMessageMax = 64;
  // Messages received and not yet taken, at most (a third is a violation).
  static constexpr size_t kInboxDepth = 2;

  // Creates the queue pair (in RESET), its CQ and completion channel, its
  // own protection domain (so no other connection's memory is reachable
  // through this queue pair) and the receive ring. `device` must outlive
  // the channel. EINVAL for a configuration that cannot work.
  static core::Result<StreamChannel> create(const rdma::Device& device, const StreamConfig& config);

  StreamChannel() = default;
  StreamChannel(StreamChannel&&) noexcept = default;
  // No move assignment: member-wise it would free the PD before the queue
  // pair that uses it. Move-construct instead.
  StreamChannel& operator=(StreamChannel&&) = delete;
  StreamChannel(const StreamChannel&) = delete;
  StreamChannel& operator=(const StreamChannel&) = delete;

  // --- connecting -------------------------------------------------------
  // What the peer needs: our queue pair and our ring.
  rdma::QpEndpoint local_endpoint(uint32_t psn) const { return qp_.local_endpoint(psn); }
  rdma::RingDescriptor local_ring() const { return ring_.descriptor(); }
  // All of it: INIT, receives posted, RTR, RTS, then start().
  rdma::Status connect(const rdma::QpEndpoint& peer, uint32_t local_psn, const rdma::RingDescriptor& peer_ring);
  // The same in steps, for a queue pair connected by someone else: move it
  // to INIT, post_initial_receives() (before the peer may write), connect
  // it, then start() with the peer's ring.
  rdma::RcQueuePair& queue_pair() { return qp_; }
  rdma::Status post_initial_receives();
  // EPROTO for a ring descriptor that is invalid or larger than kMaxPeerRing
  // or the config's max_peer_ring.
  rdma::Status start(const rdma::RingDescriptor& peer_ring);

  // --- the socket-shaped calls ------------------------------------------
  // Takes as many bytes as the peer's ring has room for (partial writes);
  // EAGAIN when it has none, EPIPE after shutdown_write(), the channel's
  // error once it has failed. Never blocks.
  core::Result<size_t> write(const iovec* iov, int count);
  core::Result<size_t> write(const void* data, size_t length);
  // Copies up to the iovecs' size from the ring; with peek, leaves the bytes
  // there. EAGAIN when empty, 0 at end of stream, the error once failed and
  // empty: bytes that arrived before a failure are still delivered first,
  // and a FIN that arrived before it still reads as the end of stream.
  core::Result<size_t> read(const iovec* iov, int count, bool peek);
  core::Result<size_t> read(void* data, size_t length, bool peek = false);

  size_t readable_bytes() const;  // FIONREAD
  // read() would not return EAGAIN: data, end of stream, or an error.
  bool readable() const;
  // write() would not return EAGAIN: room, or an error or EPIPE to report.
  bool writable() const;
  // Bytes write() would take now.
  uint64_t write_space() const;
  // write() can take bytes and post them without a progress() first:
  // started, not failed or shut, credit, and room in the send queue for a
  // DATA and a CREDIT work request.
  bool can_post_without_progress() const;
  // Sends a FIN after everything written so far; write() then fails with EPIPE.
  rdma::Status shutdown_write();
  // The socket's last close: the FIN (if shutdown_write() did not send it
  // already), then CLOSED, which tells the peer that nothing it sends will
  // be read; all_sent() then waits for CLOSED.
  rdma::Status close_write();
  // Posts what autocork holds back (TCP_CORK off, MSG_MORE ended).
  rdma::Status flush();
  // Whether small writes are held while a completion is pending (starts as
  // config.autocork). Turning it off posts what is held, as setting
  // TCP_NODELAY makes the kernel send what Nagle held.
  void set_coalescing(bool on);
  // Bytes written but held back, not yet posted.
  uint64_t held_bytes() const { return staged_; }
  // Abortive close: RESET to the peer (best effort), ECONNRESET here.
  rdma::Status abort();

  // --- the two-sided message (the Switch) --------------------------------
  // Posts `length` bytes (1 .. kControlMessageMax, else EINVAL) as one
  // signalled SEND. Needs the queue pair in RTS (ENOTCONN before; asked of
  // the device, a system call: this is once per direction), started or
  // not. Ordered with the stream: bytes write() took before it are
  // posted before it (EAGAIN while the send queue has no room for all of
  // them), bytes written after it go after it. EAGAIN also when the send
  // queue is full, or while an earlier message too large for inline is
  // still in flight (its slot is busy). A failed post fails the channel.
  rdma::Status send_message(const void* data, size_t length);
  // A received message waits in the inbox until taken; progress() fills
  // it, also before start().
  bool has_message() const { return inbox_count_ != 0; }
  // Whether the last message send_message() posted has completed (the
  // peer's device acknowledged it: it is in the peer's completion queue).
  bool message_delivered() const { return messages_posted_ != 0 && sq_.completed() > last_message_sequence_; }
  // Copies the oldest message into `out` and takes it out of the inbox; its length.
  // EAGAIN when none has arrived, EMSGSIZE (inbox kept) when capacity is
  // smaller than the message, the channel's error once it has failed and
  // the inbox is empty (a message that came before a transport failure is
  // still taken, as data is; a protocol violation drops it).
  core::Result<size_t> take_message(void* out, size_t capacity);

  // --- progress and waiting ---------------------------------------------
  // Polls the CQ and applies what it finds: credits, data, FIN, RESET,
  // messages, finished sends, errors. Then re-posts receives, returns
  // credit and posts held data and FIN as the queues allow. Returns the
  // number of completions taken. Bounded: at most a few CQ batches per
  // call. Before start() it takes completions and re-posts receives only
  // (a message, or DATA the peer wrote right after its Switch).
  core::Result<int> progress();
  // progress()'s first part: takes and applies what the CQ has, nothing
  // more. The number taken; -errno if the poll failed (the channel failed).
  int take_completions();
  // Readable after arm() once a completion arrives; then drain_events().
  int completion_fd() const { return cq_.channel_fd(); }
  rdma::Status arm();
  core::Result<int> drain_events();
  // Whether drain_events() may find an event (armed since last found empty).
  bool event_may_wait() const { return cq_.maybe_event(); }
  // Whether progress() may have anything to post (false: it would post
  // nothing; most looks at a quiet channel find it so).
  bool sends_pending() const;
  // After a poll that said completion_fd() is readable: one read.
  core::Result<int> take_event() { return cq_.take_event(); }
  // Posts a zero-length RDMA WRITE (invisible to the peer) unless a
  // signalled request is outstanding anyway: a dead peer then shows up as
  // a failed completion instead of silence.
  rdma::Status probe();
  // A waiter slept `ms` without any event. Once kProbeIdleMs of such sleep
  // has added up with no completion in between (over any number of waits:
  // callers often wait in short slices), probes, and says so (true).
  // wait_until() calls it.
  bool note_idle(int ms);
  // The same for a poll/epoll waiter, which sleeps on many sockets and does
  // not know which woke it: it is about to sleep at now_ms. Once nothing
  // has arrived for kProbeIdleMs since its first such sleep, probes (so a
  // peer whose RDMA failed on its own side is noticed, docs/protocol.md
  // §5.1, even when this side only waits), and says so (true).
  bool note_sleep(int64_t now_ms);
  static constexpr int kProbeIdleMs = 1000;

  // --- state -------------------------------------------------------------
  bool started() const { return started_; }
  int error() const { return error_; }        // 0, or what every call now returns
  // The channel failed under the connection, not by anyone's choice: the
  // transport (retry exceeded, a flushed queue, a failed post or poll, the
  // device gone), not the peer's RESET, a violation or our own abort(). The
  // connection may go on over TCP then (docs/protocol.md §5.1).
  bool failed_resumably() const { return error_ != 0 && resumable_; }
  // Marks an rdma_cm disconnect or failure as such a failure (no-op once
  // the channel failed): the queue pair goes to the error state.
  void fail_transport(const char* why) { fail(ECONNRESET, why); }
  const char* failure() const { return failure_; }  // why (static text), or ""
  bool peer_finished() const { return peer_fin_; }
  // The peer's CLOSED came (after its FIN): its socket is closed.
  bool peer_closed() const { return peer_closed_; }
  // The channel failed by the peer's RESET (its abortive close, or its
  // answer to data for a socket it had closed), or by a write into the
  // ring a closed peer took away (revoke_ring): the kernel's RST.
  bool peer_reset() const { return peer_reset_; }
  bool write_shut() const { return write_shut_; }
  // Every accepted byte has been posted and acknowledged, and the FIN too
  // after shutdown_write() (CLOSED after close_write()). (Without a FIN, an unsignalled tail is only
  // known to be done after a later signalled request, e.g. a probe().)
  bool all_sent() const;
  uint32_t inline_limit() const { return inline_limit_; }
  const StreamConfig& config() const { return config_; }
  const StreamCounters& counters() const { return counters_; }
  uint64_t peer_ring_capacity() const { return remote_.capacity(); }
  uint64_t ring_capacity() const { return ring_.capacity(); }  // ours, as it has grown
  // Our ring is below ring_size and may still grow: not refused, the
  // stream neither failed nor ended.
  bool ring_may_grow() const {
    return ring_.capacity() < config_.ring_size && !grow_refused_ && error_ == 0 && !peer_fin_ && !sending_stopped_ &&
           !close_requested_;
  }
  const SendQueueTracker& send_queue() const { return sq_; }
  uint64_t peer_in_flight() const { return remote_.in_flight(); }  // written, not yet credited
  // Bytes posted into the peer's ring in all (the ring's tail), and bytes
  // write() took that are not posted yet.
  uint64_t ring_written() const { return remote_.index().tail(); }
  uint64_t unposted_bytes() const { return staged_; }
  bool aborted() const { return aborted_; }
  bool close_requested() const { return close_requested_; }
  // Bytes of our own ring the application consumed in all.
  uint64_t ring_consumed() const { return ring_.index().head(); }
  // Bytes the peer's DATA put into our ring in all (consumed or not).
  uint64_t ring_received() const { return ring_.index().head() + ring_.available(); }
  // Bytes of this direction the peer credited (consumed) in all: the
  // oldest position the send buffer still holds.
  uint64_t ring_credited() const { return remote_.index().head(); }

  // --- parking (docs/protocol.md §1.2) -----------------------------------
  // The stream ended cleanly both ways: both CLOSED came (ours is
  // acknowledged), nothing is unread, unsent or held, no ring change is
  // under way, and the channel never failed. Only such a channel may carry
  // another connection: nothing of the old stream can still arrive.
  bool reusable() const;
  // The channel for the next connection on `old`'s queue pair, CQ, PD,
  // ring, message slots and send buffer (stream_channel_reuse.cpp): its
  // streams start over at position 0, not started, its receives still
  // posted, its send queue's sequence numbers going on (a completion of the
  // old stream's may still come). A revoked ring is registered anew (a new
  // rkey; ENOMEM and the like if that fails, and `old` is left as it was).
  // `old` must be reusable().
  static core::Result<StreamChannel> reuse(StreamChannel&& old);
  // Our socket is closed and the channel waits for the peer's CLOSED before
  // it may be parked: the ring is deregistered meanwhile, so its rkey is
  // dead (a write into a closed socket's ring fails at the writer's
  // device, and its queue pair with it, as before parking existed). Not
  // while a ring change is under way (nothing happens; ask again).
  void revoke_ring();
  bool ring_revoked() const { return revoked_capacity_ != 0; }
  // The one message that came after the peer's CLOSED (the server's Park),
  // copied into `out` (kControlMessageMax bytes) and taken; its length, 0
  // if none came.
  size_t take_message_after_close(uint8_t* out);

  // --- going back to TCP (docs/protocol.md §5) ---------------------------
  // The peer's application consumed `peer_consumed` bytes of this
  // direction and gave its ring up: stops writing for good (no data, FIN
  // or credit is posted any more; write() says EPIPE) and appends to
  // `unsent` every byte write() took beyond that point — posted or not —
  // for the caller to send on TCP. They are all still in the send buffer:
  // it mirrors the peer's ring, and a position is overwritten only after
  // the peer credited it, and it credits only what it consumed. EPROTO
  // (nothing changes) if `peer_consumed` is below what it credited or
  // beyond what was posted. Works on a failed channel too.
  core::Result<size_t> stop_writing(uint64_t peer_consumed, std::vector<uint8_t>* unsent);
  // We give the connection up ourselves (our Revert is posted): no data,
  // FIN or credit is posted any more (send_message() still posts);
  // completions are still taken.
  void stop_sending() { sending_stopped_ = true; }
  bool sending_stopped() const { return sending_stopped_; }

 private:
  class PostBatch;
  // The message slots past rq_depth: the socket's send_message(), then the
  // channel's own RingGrow and RingMoved (§3.1). One of each is in flight
  // at most: a second RingGrow follows the peer's RingMoved, which it sent
  // after taking ours (so ours had left its slot), and the same the other
  // way round.
  static constexpr uint32_t kGrowSlot = 1;
  static constexpr uint32_t kMovedSlot = 2;
  static constexpr uint32_t kSendSlots = 3;
  // A ring that fills past 1/kGrowFill of itself grows kGrowFactor times.
  static constexpr uint64_t kGrowFill = 2;
  static constexpr uint64_t kGrowFactor = 4;

  void fail(int error, const char* why, bool resumable = true);
  void violation(const char* why);
  // An immediate whose position makes no sense here: a DATA whose length
  // differs from its bytes, a CREDIT of nothing or for more than is in
  // flight. A broken peer, or a device that delivered one twice or with
  // another's value (stream_immediate.hpp): nothing it says is taken, and
  // the connection goes on over TCP (§5.1), where what each side really
  // received decides what is resent. Counted as a violation.
  void position_fault(const char* why);
  void handle_completion(const ibv_wc& wc);
  void handle_receive(const ibv_wc& wc, const uint8_t* slot);
  void receive_message(const uint8_t* slot, uint32_t length);
  // Ring growth (§3.1). The receiver's side:
  void maybe_offer_growth();
  void on_ring_moved(const uint8_t* slot, uint32_t length);
  // The writer's side:
  void on_ring_grow(const uint8_t* slot, uint32_t length);
  void answer_ring_grow(PostBatch& batch);
  bool move_to_offered_ring(PostBatch& batch);
  // Posts RingGrow and RingMoved as they fall due.
  void queue_ring_messages(PostBatch& batch);
  // A SEND of the channel's own (RingGrow, RingMoved) from its slot.
  uint64_t add_own_message(PostBatch& batch, uint32_t slot, const uint8_t* data, size_t length);
  // Deregisters the retired send buffers whose RingMoved has completed.
  void release_retired_mirrors();
  // Posts, in this order and as room allows: credit, held data, FIN.
  void pump_sends(bool force_flush);
  ibv_send_wr& add_send(PostBatch& batch, bool force_signal);
  void fill_control(ibv_send_wr& wr, uint32_t word) const;
  void queue_credit(PostBatch& batch);
  void queue_data(PostBatch& batch, bool force_flush);
  void queue_fin(PostBatch& batch);
  void queue_closed(PostBatch& batch);
  rdma::Status post_free_receives();
  uint8_t* message_slot(uint32_t slot) const { return message_buffer_.data() + size_t{slot} * kControlMessageMax; }
  void replenish_receives();
  uint64_t stage_position() const { return remote_.index().tail() + staged_; }

  // Declaration order is teardown order reversed: the queue pair goes
  // first, so nothing can reach the buffers while they are deregistered.
  // Declared first: given back after everything below is deregistered.
  rdma::BudgetReservation reservation_;
  rdma::ProtectionDomain pd_;
  rdma::CompletionQueue cq_;
  rdma::ReceiveRing ring_;
  rdma::MemoryRegion send_buffer_;  // mirrors the peer's ring; local access only
  // Ring growth (§3.1): the larger ring offered to the peer, until it
  // answers; the send buffers that mirrored the peer's smaller rings, each
  // until the RingMoved posted after its last DATA has completed (a
  // retransmission may read it until then).
  struct RetiredMirror {
    rdma::MemoryRegion memory;
    uint64_t moved_sequence = 0;
  };
  rdma::ReceiveRing offered_ring_;
  std::vector<RetiredMirror> retired_mirrors_;
  // rq_depth receive slots, then the send slot (index rq_depth) of a
  // message too large for inline, then the slots of RingGrow and
  // RingMoved (kGrowSlot, kMovedSlot past rq_depth); local write only.
  rdma::MemoryRegion message_buffer_;
  rdma::RcQueuePair qp_;
  // send_message() saw the queue pair in RTS: it asks the device no more
  // (a system call per control message). It leaves RTS only for ERROR,
  // which the posts' completions report.
  bool qp_ready_ = false;

  StreamConfig config_{};
  bool coalescing_ = false;  // set_coalescing(); starts as config_.autocork
  int64_t last_data_post_us_ = 0;  // when DATA was last posted (coalescing's window)
  rdma::RingDescriptor peer_ring_{};
  rdma::RemoteRing remote_;  // tail: bytes posted; head: bytes the peer credited
  SendQueueTracker sq_;
  CreditReturn credit_;
  StreamCounters counters_{};
  uint32_t inline_limit_ = 0;
  uint64_t max_segment_ = 0;
  uint64_t cork_bytes_ = 0;
  uint64_t staged_ = 0;  // bytes copied after the remote tail, not yet posted
  // Receive slots not posted: each receive's wr_id is kReceiveTag | slot,
  // and its slot comes back here once its completion has been handled.
  std::vector<uint32_t> free_slots_;
  uint32_t recv_batch_ = 1;
  uint8_t inbox_[kInboxDepth][kControlMessageMax] = {};
  size_t inbox_length_[kInboxDepth] = {};  // oldest first; an empty message is refused
  size_t inbox_count_ = 0;
  uint8_t after_close_[kControlMessageMax] = {};
  size_t after_close_length_ = 0;  // take_message_after_close()
  uint64_t revoked_capacity_ = 0;  // revoke_ring(): the ring's size, to register again
  uint64_t messages_posted_ = 0;
  uint64_t last_message_sequence_ = 0;
  bool sending_stopped_ = false;
  // Ring growth, the receiver's side: offered_ring_ is made, RingGrow is
  // posted, no more growth (refused once, by the budget or the peer).
  bool grow_offered_ = false;
  bool grow_sent_ = false;
  bool grow_refused_ = false;
  // The writer's side: the peer's RingGrow waits for its answer.
  bool peer_offer_pending_ = false;
  rdma::RingDescriptor peer_offer_{};
  uint64_t message_sequence_ = 0;  // the last message sent through the send slot
  bool message_slot_used_ = false;
  int idle_ms_ = 0;  // slept without a completion since the last one
  int64_t idle_since_ms_ = 0;  // note_sleep(): first sleep since the last completion (0: none)
  uint64_t probe_sequence_ = 0;
  uint64_t reset_sequence_ = 0;
  uint64_t fin_sequence_ = 0;
  bool receives_posted_ = false;
  bool started_ = false;
  bool probe_outstanding_ = false;
  bool reset_outstanding_ = false;
  bool write_shut_ = false;
  bool fin_pending_ = false;
  bool fin_posted_ = false;
  bool peer_fin_ = false;
  bool peer_closed_ = false;  // peer_closed()
  bool peer_reset_ = false;   // peer_reset()
  bool close_requested_ = false;  // close_write() was called (CLOSED goes once)
  bool closed_pending_ = false;   // CLOSED is due after the FIN, not posted yet
  int error_ = 0;
  bool resumable_ = false;  // failed_resumably()
  bool aborted_ = false;    // abort() was called
  const char* failure_ = "";
};

}  // namespace vsock::sock
