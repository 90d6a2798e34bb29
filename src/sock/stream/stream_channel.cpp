#include "sock/stream/stream_channel.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/clock.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "sock/stream/stream_immediate.hpp"
#include "sock/stream/stream_iov.hpp"
#include "sock/stream/stream_post_batch.hpp"
#include "sock/stream/stream_segment.hpp"
#include "sock/wire/byte_order.hpp"
#include "sock/wire/protocol.hpp"
#include "sock/wire/ring_resize.hpp"

namespace vsock::sock {
namespace {

using rdma::Status;

// wr_id of a receive: the tag | its slot; sends carry their sequence
// number (< 2^63).
constexpr uint64_t kReceiveTag = uint64_t{1} << 63;
// Send queue slots DATA leaves free, so a CREDIT, FIN, RESET or probe can
// always go out even while data fills the queue: a reader's credit must
// not wait behind its own writes.
constexpr uint32_t kControlReserve = 2;
constexpr int kPollBatch = 32;
// progress() takes at most this many CQ batches: bounded work per call,
// the rest waits for the next call.
constexpr int kMaxPollRounds = 4;
constexpr uint32_t kRecvPostMax = 64;  // receives linked into one ibv_post_recv
// One completion per posted send and receive at most, so sq + rq is enough;
// one more keeps a CQ of the profiles' 2^k - 1 depths at 2^(k+1) - 1
// entries, which a provider that keeps one slot empty (rxe) does not round
// up to twice that.
constexpr uint32_t kCqSlack = 1;
// What a channel's receive ring starts at.
uint64_t initial_ring(const StreamConfig& config) {
  return config.ring_initial != 0 && config.ring_initial < config.ring_size ? config.ring_initial : config.ring_size;
}

core::Result<rdma::RcQueuePair> create_queue_pair(const rdma::Device& device, const rdma::ProtectionDomain& pd,
                                                  const rdma::CompletionQueue& cq, const StreamConfig& config) {
  rdma::RcQpConfig qp_config;
  qp_config.max_send_wr = config.sq_depth;
  qp_config.max_recv_wr = config.rq_depth;
  qp_config.max_send_sge = 1;
  qp_config.max_recv_sge = 1;
  // The queue pair only ever reaches this channel's own PD, whose one
  // remotely writable region is the ring.
  qp_config.remote_access = IBV_ACCESS_REMOTE_WRITE;
  // retry_cnt keeps RcQpConfig's finite default: a dead peer must show up
  // as a failed request (7 tries of the 67 ms ACK timeout).
  // Providers cap inline data differently (rxe: 512 bytes) and say so only
  // by refusing the queue pair: halve until one is granted.
  uint32_t inline_size = config.inline_size;
  for (;;) {
    qp_config.max_inline_data = inline_size;
    core::Result<rdma::RcQueuePair> qp = rdma::RcQueuePair::create(device, pd, cq, cq, qp_config);
    if (qp || inline_size == 0) return qp;
    inline_size /= 2;
  }
}

}  // namespace

// The profile's completion moderation, where the device has it. Without it
// (rxe, siw) the channel works the same, only with an event per completion
// while armed; said once per process, at info level.
static void apply_moderation(const rdma::Device& device, rdma::CompletionQueue& cq, const StreamConfig& config) {
  rdma::Status moderated = cq.moderate(config.cq_mod_count, config.cq_mod_us);
  if (moderated || moderated.error() != ENOTSUP) return;  // other errors: logged by moderate()
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    VSOCK_LOG(kInfo, "completion moderation (cq_mod_count %u, cq_mod_us %u) not supported by %s: ignored",
              config.cq_mod_count, config.cq_mod_us, device.name().c_str());
}

core::Result<StreamChannel> StreamChannel::create(const rdma::Device& device, const StreamConfig& config) {
  using R = core::Result<StreamChannel>;
  if (!device.valid() || config.sq_depth < kControlReserve + 2 || config.rq_depth == 0 || config.signal_every == 0 ||
      config.max_segment == 0)
    return R::fail(rdma::report_error(EINVAL, "StreamChannel: bad configuration (sq %u rq %u signal_every %u)",
                                      config.sq_depth, config.rq_depth, config.signal_every));
  // Room for every completion that can be pending at once: one per send
  // (only if each were signalled, or all flushed by an error) and one per
  // posted receive. So the CQ can never overflow.
  uint64_t cq_depth = uint64_t{config.sq_depth} + config.rq_depth + kCqSlack;
  if (cq_depth > static_cast<uint64_t>(device.attr().max_cqe))
    return R::fail(rdma::report_error(EINVAL, "StreamChannel: sq %u + rq %u exceed the CQ limit %d", config.sq_depth,
                                      config.rq_depth, device.attr().max_cqe));
  // Reserved before anything is registered: the ring, the message slots
  // and a send buffer as large as our own ring (start() adds the rest if
  // the peer's ring is larger).
  const uint64_t messages_bytes = rdma::page_rounded((uint64_t{config.rq_depth} + kSendSlots) * kControlMessageMax);
  const uint64_t ring_bytes = rdma::page_rounded(initial_ring(config));
  auto reservation = rdma::BudgetReservation::take(2 * ring_bytes + messages_bytes, config.memory_budget);
  if (!reservation) return R::fail(reservation.error());
  StreamChannel channel;
  channel.config_ = config;
  channel.reservation_ = std::move(reservation.value());
  auto pd = rdma::ProtectionDomain::create(device);
  if (!pd) return R::fail(pd.error());
  channel.pd_ = std::move(pd.value());
  auto cq = rdma::CompletionQueue::create(device, static_cast<int>(cq_depth), true);
  if (!cq) return R::fail(cq.error());
  channel.cq_ = std::move(cq.value());
  apply_moderation(device, channel.cq_, config);
  auto ring = rdma::ReceiveRing::create(channel.pd_, initial_ring(config));
  if (!ring) return R::fail(ring.error());
  channel.ring_ = std::move(ring.value());
  // One slot per receive, the ones to send from. The device writes the
  // receive slots (a SEND's payload), nobody else: local write only.
  auto messages = rdma::MemoryRegion::allocate(
      channel.pd_, (size_t{config.rq_depth} + kSendSlots) * kControlMessageMax, IBV_ACCESS_LOCAL_WRITE);
  if (!messages) return R::fail(messages.error());
  channel.message_buffer_ = std::move(messages.value());
  auto qp = create_queue_pair(device, channel.pd_, channel.cq_, config);
  if (!qp) return R::fail(qp.error());
  channel.qp_ = std::move(qp.value());

  channel.inline_limit_ = config.inline_size < channel.qp_.max_inline_data() ? config.inline_size
                                                                               : channel.qp_.max_inline_data();
  channel.max_segment_ = config.max_segment < kImmediateValueMax ? config.max_segment : kImmediateValueMax;
  channel.sq_ = SendQueueTracker(config.sq_depth, config.signal_every, config.autocork, kControlReserve);
  channel.coalescing_ = config.autocork;
  channel.credit_ = CreditReturn(channel.ring_.capacity());
  channel.recv_batch_ = config.rq_depth / 8 > 0 ? config.rq_depth / 8 : 1;
  channel.free_slots_.reserve(config.rq_depth);
  for (uint32_t slot = config.rq_depth; slot > 0; --slot) channel.free_slots_.push_back(slot - 1);
  return R::ok(std::move(channel));
}

// ------------------------------------------------------------ connecting --

Status StreamChannel::connect(const rdma::QpEndpoint& peer, uint32_t local_psn, const rdma::RingDescriptor& peer_ring) {
  Status step = qp_.to_init();
  if (step) step = post_initial_receives();
  if (step) step = qp_.to_rtr(peer);
  if (step) step = qp_.to_rts(local_psn);
  if (step) step = start(peer_ring);
  return step;
}

Status StreamChannel::post_initial_receives() {
  if (!qp_.valid() || receives_posted_) return Status::fail(EINVAL);
  Status posted = post_free_receives();
  if (posted) receives_posted_ = true;
  return posted;
}

Status StreamChannel::start(const rdma::RingDescriptor& peer_ring) {
  if (!receives_posted_ || started_) return Status::fail(EINVAL);
  if (peer_ring.capacity > kMaxPeerRing || peer_ring.capacity > config_.max_peer_ring) return Status::fail(EPROTO);
  core::Result<rdma::RemoteRing> remote = rdma::RemoteRing::create(peer_ring);
  if (!remote) return Status::fail(remote.error());
  // Local read access only: the device reads it for RDMA WRITE, nobody else
  // touches it.
  // A reused channel (reuse()) keeps its send buffer if the peer's ring is
  // as large as it was: no registration on that connection's path.
  if (!send_buffer_.valid() || send_buffer_.size() != peer_ring.capacity) {
    const uint64_t mirror_bytes = rdma::page_rounded(peer_ring.capacity);
    const uint64_t reserved_mirror = rdma::page_rounded(initial_ring(config_));
    // The reservation holds a mirror of our own ring's size already, and
    // what a larger one (of a reused channel's last peer) took beyond it.
    const uint64_t held_mirror = send_buffer_.valid() ? rdma::page_rounded(send_buffer_.size()) : reserved_mirror;
    const uint64_t held_extra = held_mirror > reserved_mirror ? held_mirror - reserved_mirror : 0;
    const uint64_t extra = mirror_bytes > reserved_mirror ? mirror_bytes - reserved_mirror : 0;
    core::Result<rdma::MemoryRegion> buffer = rdma::MemoryRegion::allocate(pd_, peer_ring.capacity, 0);
    if (!buffer) return Status::fail(buffer.error());
    if (extra > held_extra) reservation_.grow(extra - held_extra);
    if (extra < held_extra) reservation_.shrink(held_extra - extra);
    send_buffer_ = std::move(buffer.value());
  }
  remote_ = remote.value();
  peer_ring_ = peer_ring;
  uint64_t quarter = remote_.capacity() / 4 > 0 ? remote_.capacity() / 4 : 1;
  cork_bytes_ = config_.cork_bytes != 0 ? config_.cork_bytes : (quarter < max_segment_ ? quarter : max_segment_);
  started_ = true;
  return rdma::ok_status();
}

// ------------------------------------------------------------------ write --

uint64_t StreamChannel::write_space() const {
  if (!started_ || error_ != 0) return 0;
  return remote_.space() - staged_;
}

bool StreamChannel::can_post_without_progress() const {
  return started_ && error_ == 0 && !write_shut_ && !sending_stopped_ && write_space() > 0 && sq_.room() >= 2;
}

core::Result<size_t> StreamChannel::write(const iovec* iov, int count) {
  using R = core::Result<size_t>;
  if (error_ != 0) return R::fail(error_);
  if (!started_) return R::fail(ENOTCONN);
  if (write_shut_ || sending_stopped_) return R::fail(EPIPE);
  size_t total = iov_total(iov, count);
  if (total == 0) return R::ok(0);
  // Coalescing holds a small write while a signalled request is out. One
  // that completed long ago, unpolled since (this side only wrote), would
  // hold it until the side band's next look: the kernel's Nagle sends at
  // once when all it sent was acknowledged, so look first.
  if (coalescing_ && sq_.signaled_outstanding() > 0 &&
      core::monotonic_us() - last_data_post_us_ >= config_.cork_window_us) {
    core::Result<int> progressed = progress();
    if (!progressed) return R::fail(progressed.error());
    if (error_ != 0) return R::fail(error_);
  }
  if (write_space() == 0) {
    // The credit that frees room may be waiting in the CQ.
    core::Result<int> progressed = progress();
    if (!progressed) return R::fail(progressed.error());
    if (error_ != 0) return R::fail(error_);
    if (write_space() == 0) {
      ++counters_.write_eagain;
      return R::fail(EAGAIN);
    }
  }
  IovCursor cursor(iov, count);
  const uint64_t capacity = remote_.capacity();
  size_t accepted = 0;
  // Copy a segment's worth, then post it, so that a large write is on the
  // wire while the rest is still being copied.
  while (accepted < total && write_space() > 0 && error_ == 0) {
    uint64_t want = total - accepted;
    uint64_t chunk = want < write_space() ? want : write_space();
    if (chunk > max_segment_) chunk = max_segment_;
    uint64_t copied = 0;
    while (copied < chunk) {
      uint64_t position = stage_position();
      uint64_t offset = position & (capacity - 1);
      uint64_t to_end = capacity - offset;
      uint64_t piece = chunk - copied < to_end ? chunk - copied : to_end;
      size_t got = cursor.gather(send_buffer_.data() + offset, static_cast<size_t>(piece));
      staged_ += got;
      copied += got;
      if (got < piece) break;  // the iovecs ended early (cannot happen: total counted them)
    }
    accepted += static_cast<size_t>(copied);
    if (copied < chunk) break;
    pump_sends(false);
  }
  counters_.bytes_written += accepted;
  return R::ok(accepted);
}

core::Result<size_t> StreamChannel::write(const void* data, size_t length) {
  iovec iov{const_cast<void*>(data), length};
  return write(&iov, 1);
}

Status StreamChannel::flush() {
  if (error_ != 0) return Status::fail(error_);
  pump_sends(true);
  return error_ != 0 ? Status::fail(error_) : rdma::ok_status();
}

void StreamChannel::set_coalescing(bool on) {
  if (coalescing_ == on) return;
  coalescing_ = on;
  sq_.set_keep_one_signaled(on);
  if (!on) pump_sends(true);
}

Status StreamChannel::shutdown_write() {
  if (error_ != 0) return Status::fail(error_);
  if (!started_) return Status::fail(ENOTCONN);
  if (write_shut_) return rdma::ok_status();
  write_shut_ = true;
  fin_pending_ = true;
  pump_sends(true);
  return error_ != 0 ? Status::fail(error_) : rdma::ok_status();
}

Status StreamChannel::close_write() {
  if (error_ != 0) return Status::fail(error_);
  if (!started_) return Status::fail(ENOTCONN);
  // Once: a second CLOSED is the peer's reason to reset.
  if (close_requested_) return rdma::ok_status();
  close_requested_ = true;
  closed_pending_ = true;
  if (!write_shut_) return shutdown_write();  // the FIN, and CLOSED behind it (queue_closed)
  pump_sends(true);
  return error_ != 0 ? Status::fail(error_) : rdma::ok_status();
}

Status StreamChannel::abort() {
  aborted_ = true;  // whatever fails from now on, we ended it
  if (error_ != 0) return rdma::ok_status();
  if (sending_stopped_) {  // the connection went back to TCP: the kernel's close says it
    fail(ECONNRESET, "aborted locally");
    return rdma::ok_status();
  }
  if (!started_ || sq_.room() == 0) {
    fail(ECONNRESET, "aborted locally");
    return rdma::ok_status();
  }
  // RESET goes after what is already posted; held data is dropped. The
  // queue pair goes to the error state once the RESET has completed (or
  // failed), not before: that would flush it unsent.
  PostBatch batch(*this);
  ibv_send_wr& wr = add_send(batch, true);
  fill_control(wr, control_immediate(ControlCode::kReset).value());
  uint64_t sequence = wr.wr_id;
  batch.post();
  if (error_ != 0) return rdma::ok_status();
  reset_outstanding_ = true;
  reset_sequence_ = sequence;
  error_ = ECONNRESET;
  failure_ = "aborted locally";
  staged_ = 0;
  fin_pending_ = false;
  return rdma::ok_status();
}

bool StreamChannel::all_sent() const {
  if (!started_ || staged_ != 0 || fin_pending_ || closed_pending_) return false;
  // After a FIN, credits for the peer's data still go out (unsignalled):
  // what matters is that the FIN, and so everything before it, completed.
  if (fin_posted_) return sq_.completed() > fin_sequence_;
  return sq_.outstanding() == 0;
}

// ------------------------------------------------------- back to TCP (§5) --

core::Result<size_t> StreamChannel::stop_writing(uint64_t peer_consumed, std::vector<uint8_t>* unsent) {
  using R = core::Result<size_t>;
  if (!started_) return peer_consumed == 0 ? R::ok(0) : R::fail(EPROTO);
  const rdma::RingIndex& index = remote_.index();
  // Unsigned distances from the credited head: right across counter wrap.
  if (peer_consumed - index.head() > index.used()) return R::fail(EPROTO);
  const uint64_t capacity = remote_.capacity();
  const uint64_t end = index.tail() + staged_;
  const uint64_t length = end - peer_consumed;  // <= capacity: staged bytes had credit
  const size_t before = unsent->size();
  unsent->resize(before + static_cast<size_t>(length));
  uint8_t* out = unsent->data() + before;
  for (uint64_t position = peer_consumed; position != end;) {
    const uint64_t offset = position & (capacity - 1);
    const uint64_t to_end = capacity - offset;
    const uint64_t piece = end - position < to_end ? end - position : to_end;
    std::memcpy(out, send_buffer_.data() + offset, static_cast<size_t>(piece));
    out += piece;
    position += piece;
  }
  staged_ = 0;
  fin_pending_ = false;
  sending_stopped_ = true;
  return R::ok(static_cast<size_t>(length));
}

// ------------------------------------------------------------------- read --

// Bytes that arrived before a failure stay readable, as the kernel keeps a
// TCP receive queue across a reset: the ring is ours until the channel goes.
size_t StreamChannel::readable_bytes() const { return static_cast<size_t>(ring_.available()); }

bool StreamChannel::readable() const { return error_ != 0 || peer_fin_ || ring_.available() > 0; }

bool StreamChannel::writable() const { return error_ != 0 || write_shut_ || write_space() > 0; }

core::Result<size_t> StreamChannel::read(const iovec* iov, int count, bool peek) {
  using R = core::Result<size_t>;
  if (!started_) return R::fail(error_ != 0 ? error_ : ENOTCONN);
  size_t total = iov_total(iov, count);
  if (total == 0) return R::ok(0);
  if (ring_.available() == 0 && error_ == 0) {
    core::Result<int> progressed = progress();
    if (!progressed) return R::fail(progressed.error());
  }
  // The kernel's order: data first, then the end of stream (a FIN, even if
  // the connection failed after it), then the error.
  if (ring_.available() == 0) {
    if (peer_fin_) return R::ok(0);
    return R::fail(error_ != 0 ? error_ : EAGAIN);
  }
  uint64_t length = ring_.available() < total ? ring_.available() : total;
  // length <= available: the spans lie inside the ring by construction.
  rdma::RingSpans spans = ring_.index().readable(length).value();
  IovCursor cursor(iov, count);
  cursor.scatter(ring_.data() + spans.first.offset, static_cast<size_t>(spans.first.length));
  cursor.scatter(ring_.data() + spans.second.offset, static_cast<size_t>(spans.second.length));
  if (!peek) {
    ring_.consume(length);
    credit_.on_consumed(length);
    counters_.bytes_read += length;
    pump_sends(false);  // the credit may be due now
  }
  return R::ok(static_cast<size_t>(length));
}

core::Result<size_t> StreamChannel::read(void* data, size_t length, bool peek) {
  iovec iov{data, length};
  return read(&iov, 1, peek);
}

// ---------------------------------------------------------------- sending --

void StreamChannel::pump_sends(bool force_flush) {
  if (!started_ || error_ != 0 || sending_stopped_ || !sends_pending()) return;
  PostBatch batch(*this);
  queue_credit(batch);
  queue_ring_messages(batch);
  queue_data(batch, force_flush || fin_pending_);
  queue_fin(batch);
  queue_closed(batch);
  batch.post();
}

// What the queue_* steps below each look for first.
bool StreamChannel::sends_pending() const {
  return staged_ > 0 || credit_.due() != 0 || fin_pending_ || closed_pending_ || (grow_offered_ && !grow_sent_) ||
         peer_offer_pending_;
}

ibv_send_wr& StreamChannel::add_send(PostBatch& batch, bool force_signal) {
  bool signaled = sq_.next_signaled(force_signal);
  return batch.add(sq_.on_posted(signaled), signaled);
}

// A zero-length WRITE WITH IMMEDIATE: no payload, but it needs a valid
// remote address and rkey on some devices, so it names the peer's ring.
void StreamChannel::fill_control(ibv_send_wr& wr, uint32_t word) const {
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.num_sge = 0;
  wr.imm_data = immediate_to_wire(word);
  wr.wr.rdma.remote_addr = peer_ring_.address;
  wr.wr.rdma.rkey = peer_ring_.rkey;
}

void StreamChannel::queue_credit(PostBatch& batch) {
  for (uint64_t due = credit_.due(); due != 0 && sq_.room() > 0 && error_ == 0; due = credit_.due()) {
    // The position the writer's head moves to (a CREDIT carries it, not
    // the count: docs/protocol.md §3).
    fill_control(add_send(batch, false), credit_immediate(credit_.returned() + due).value());
    credit_.on_returned(due);
    ++counters_.credits_sent;
  }
}

void StreamChannel::queue_data(PostBatch& batch, bool force_flush) {
  const uint64_t capacity = remote_.capacity();
  while (staged_ > 0 && error_ == 0) {
    if (sq_.room() <= kControlReserve) {
      ++counters_.sq_full;  // a signalled request is outstanding (the tracker's reserve rule): it brings us back
      return;
    }
    // Coalescing (Nagle, autocork): hold a small amount while a completion
    // is on its way (progress() finds it and posts what has gathered by
    // then), or while the last DATA went out less than cork_window_us ago:
    // on devices whose completions come back inside ibv_post_send (rxe),
    // a stream of small writes would otherwise never gather. What is held
    // goes when the writer next writes after the window, when anyone waits
    // on the socket (flush()), or by the side-band thread.
    if (!force_flush && coalescing_ && staged_ < cork_bytes_ &&
        (sq_.signaled_outstanding() > 0 || core::monotonic_us() - last_data_post_us_ < config_.cork_window_us)) {
      ++counters_.corked;
      return;
    }
    uint64_t position = remote_.index().tail();
    uint64_t length = next_segment(position, staged_, capacity, max_segment_);
    core::Result<rdma::RemoteWrite> plan = remote_.plan(length);
    if (!plan) {  // staged bytes always have credit: a bug, not the peer
      fail(EIO, "internal: staged bytes without credit", false);
      return;
    }
    uint64_t offset = position & (capacity - 1);
    ibv_send_wr& wr = add_send(batch, false);
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.num_sge = 1;
    wr.sg_list->addr = send_buffer_.address() + offset;
    wr.sg_list->length = static_cast<uint32_t>(length);
    wr.sg_list->lkey = send_buffer_.lkey();
    // The provider copies inline data into the work request at post time.
    if (length <= inline_limit_) {
      wr.send_flags |= IBV_SEND_INLINE;
      ++counters_.inline_wrs;
    }
    // Where the write ends: the peer takes its length from where it stands.
    wr.imm_data = immediate_to_wire(data_immediate(position + length).value());
    wr.wr.rdma.remote_addr = plan.value().first.address;
    wr.wr.rdma.rkey = remote_.rkey();
    remote_.commit(length);
    staged_ -= length;
    if (coalescing_) last_data_post_us_ = core::monotonic_us();  // only the window reads it
    ++counters_.data_wrs;
    core::stat_add(core::Stat::rdma_writes);
    if (offset + length == capacity && staged_ > 0) ++counters_.ring_end_splits;
  }
}

void StreamChannel::queue_fin(PostBatch& batch) {
  if (!fin_pending_ || staged_ > 0 || sq_.room() == 0 || error_ != 0) return;
  // Signalled, so that all_sent() can tell when it has been delivered.
  ibv_send_wr& wr = add_send(batch, true);
  fill_control(wr, control_immediate(ControlCode::kFin).value());
  fin_sequence_ = wr.wr_id;
  fin_pending_ = false;
  fin_posted_ = true;
}

void StreamChannel::queue_closed(PostBatch& batch) {
  if (!closed_pending_ || !fin_posted_ || sq_.room() == 0 || error_ != 0) return;
  // Signalled, and all_sent() waits for it in place of the FIN (RC keeps
  // order: CLOSED acknowledged means the FIN and the data were too).
  ibv_send_wr& wr = add_send(batch, true);
  fill_control(wr, control_immediate(ControlCode::kClosed).value());
  fin_sequence_ = wr.wr_id;
  closed_pending_ = false;
}

Status StreamChannel::probe() {
  if (!started_ || error_ != 0 || sq_.signaled_outstanding() > 0 || sq_.room() == 0) return rdma::ok_status();
  PostBatch batch(*this);
  ibv_send_wr& wr = add_send(batch, true);
  // Plain RDMA WRITE of nothing: acknowledged by the peer's device, never
  // seen by its software, consumes no receive.
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.num_sge = 0;
  wr.wr.rdma.remote_addr = peer_ring_.address;
  wr.wr.rdma.rkey = peer_ring_.rkey;
  probe_sequence_ = wr.wr_id;
  probe_outstanding_ = true;
  ++counters_.probes;
  batch.post();
  return error_ != 0 ? Status::fail(error_) : rdma::ok_status();
}

bool StreamChannel::note_idle(int ms) {
  idle_ms_ += ms > 0 ? ms : 0;
  if (idle_ms_ < kProbeIdleMs) return false;
  idle_ms_ = 0;
  probe();
  return true;
}

bool StreamChannel::note_sleep(int64_t now_ms) {
  if (idle_since_ms_ == 0) {
    idle_since_ms_ = now_ms;
    return false;
  }
  if (now_ms - idle_since_ms_ < kProbeIdleMs) return false;
  idle_since_ms_ = now_ms;
  probe();
  return true;
}

// ---------------------------------------------------------------- message --

Status StreamChannel::send_message(const void* data, size_t length) {
  if (error_ != 0) return Status::fail(error_);
  if (data == nullptr || length == 0 || length > kControlMessageMax) return Status::fail(EINVAL);
  // Posting to a queue pair in RESET or INIT fails and would fail the
  // channel; the caller may have connected it itself (queue_pair()).
  if (!qp_ready_) {
    core::Result<ibv_qp_state> state = qp_.valid() ? qp_.state() : core::Result<ibv_qp_state>::fail(ENOTCONN);
    if (!state) return Status::fail(state.error());
    if (state.value() != IBV_QPS_RTS) return Status::fail(ENOTCONN);
    qp_ready_ = true;
  }
  if (started_) {
    // Everything written so far goes before the message, held data too.
    pump_sends(true);
    if (error_ != 0) return Status::fail(error_);
    if (staged_ > 0) return Status::fail(EAGAIN);
  }
  if (sq_.room() == 0) return Status::fail(EAGAIN);
  const bool inline_send = length <= inline_limit_;
  // The device reads the send slot until the SEND completes (it is
  // signalled, so we learn when).
  if (!inline_send && message_slot_used_ && sq_.completed() <= message_sequence_) return Status::fail(EAGAIN);
  PostBatch batch(*this);
  ibv_send_wr& wr = add_send(batch, true);
  wr.opcode = IBV_WR_SEND;
  wr.num_sge = 1;
  wr.sg_list->length = static_cast<uint32_t>(length);
  if (inline_send) {
    // Copied into the work request at post time: no lkey needed.
    wr.send_flags |= IBV_SEND_INLINE;
    wr.sg_list->addr = reinterpret_cast<uintptr_t>(data);
  } else {
    uint8_t* slot = message_slot(config_.rq_depth);
    std::memcpy(slot, data, length);
    wr.sg_list->addr = reinterpret_cast<uintptr_t>(slot);
    wr.sg_list->lkey = message_buffer_.lkey();
    message_sequence_ = wr.wr_id;
    message_slot_used_ = true;
  }
  const uint64_t sequence = wr.wr_id;
  batch.post();
  if (error_ != 0) return Status::fail(error_);
  ++counters_.messages_sent;
  ++messages_posted_;
  last_message_sequence_ = sequence;
  return rdma::ok_status();
}

core::Result<size_t> StreamChannel::take_message(void* out, size_t capacity) {
  using R = core::Result<size_t>;
  // A message that arrived before a failure is still taken, like the data
  // after it: the peer's Switch, its data and FIN can all be in the queue
  // when its process exits, ahead of the flushed receives.
  if (error_ != 0 && inbox_count_ == 0) return R::fail(error_);
  if (inbox_count_ == 0) {
    core::Result<int> progressed = progress();
    if (!progressed) return R::fail(progressed.error());
    if (error_ != 0 && inbox_count_ == 0) return R::fail(error_);
    if (inbox_count_ == 0) return R::fail(EAGAIN);
  }
  if (capacity < inbox_length_[0]) return R::fail(EMSGSIZE);
  size_t length = inbox_length_[0];
  std::memcpy(out, inbox_[0], length);
  for (size_t i = 1; i < inbox_count_; ++i) {
    std::memcpy(inbox_[i - 1], inbox_[i], inbox_length_[i]);
    inbox_length_[i - 1] = inbox_length_[i];
  }
  --inbox_count_;
  return R::ok(length);
}

// -------------------------------------------------------------- receiving --

Status StreamChannel::post_free_receives() {
  ibv_recv_wr wrs[kRecvPostMax];
  ibv_sge sges[kRecvPostMax];
  while (!free_slots_.empty()) {
    size_t n = free_slots_.size() < kRecvPostMax ? free_slots_.size() : kRecvPostMax;
    // Posts the last n free slots; they leave the list once posted.
    const uint32_t* slots = free_slots_.data() + (free_slots_.size() - n);
    for (size_t i = 0; i < n; ++i) {
      // WRITE WITH IMMEDIATE ignores the scatter entry (its payload goes
      // where the writer said); only a SEND's payload lands in the slot.
      sges[i] = ibv_sge{};
      sges[i].addr = reinterpret_cast<uintptr_t>(message_slot(slots[i]));
      sges[i].length = kControlMessageMax;
      sges[i].lkey = message_buffer_.lkey();
      wrs[i] = ibv_recv_wr{};
      wrs[i].wr_id = kReceiveTag | slots[i];
      wrs[i].sg_list = &sges[i];
      wrs[i].num_sge = 1;
      wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
    }
    Status posted = qp_.post_recv(&wrs[0]);
    if (!posted) return posted;
    ++counters_.recv_posts;
    free_slots_.resize(free_slots_.size() - n);
  }
  return rdma::ok_status();
}

void StreamChannel::replenish_receives() {
  if (error_ != 0 || !receives_posted_ || free_slots_.size() < recv_batch_) return;
  if (!post_free_receives()) fail(ECONNRESET, "ibv_post_recv failed");
}

void StreamChannel::handle_receive(const ibv_wc& wc, const uint8_t* slot) {
  if (error_ != 0) return;  // flushed receives, or anything after a failure
  if (wc.status != IBV_WC_SUCCESS) {
    // A receive that the peer's own request failed is its violation: a
    // write outside the ring or with another rkey, which the device
    // refused (remote access error), or a SEND larger than a slot (a
    // local length error; rxe says local QP operation error). Anything
    // else is the transport's: a flush after a failure, or an invalid
    // request, which rxe reports when a link that went down and up cut a
    // multi-packet write (its first packets came, the rest never will).
    switch (wc.status) {
      case IBV_WC_REM_ACCESS_ERR:
      case IBV_WC_LOC_LEN_ERR:
      case IBV_WC_LOC_QP_OP_ERR:
        return violation(ibv_wc_status_str(wc.status));
      default:
        fail(ECONNRESET, ibv_wc_status_str(wc.status));
        return;
    }
  }
  if (wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_WITH_IMM) == 0) {
    receive_message(slot, wc.byte_len);
    return;
  }
  // Otherwise only WRITE WITH IMMEDIATE belongs on this queue pair (a SEND
  // WITH IMMEDIATE is neither).
  if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || (wc.wc_flags & IBV_WC_WITH_IMM) == 0) {
    violation("a receive that is neither a message nor a write with immediate");
    return;
  }
  core::Result<Immediate> parsed = parse_immediate(immediate_from_wire(wc.imm_data));
  if (!parsed) {
    violation("malformed immediate");
    return;
  }
  const Immediate immediate = parsed.value();
  switch (immediate.type) {
    case ImmediateType::kData: {
      if (peer_fin_) return violation("data after FIN");
      // Our socket closed before this write came: the peer wrote as we
      // closed, and a channel waiting to be parked has revoked its ring
      // (revoke_ring), so neither its position nor its credit holds. The
      // kernel resets a connection whose closed socket gets data, and so
      // do we (below, too, while the ring is still there).
      if (close_requested_ && !ring_.valid()) {
        abort();
        return;
      }
      // The write's length is the distance from our tail to where it ends.
      // The device reports how many bytes it carried; a length that differs
      // (or none: a DATA delivered twice ends where we stand) would make us
      // hand out bytes the peer never wrote.
      const uint64_t length = distance_to(ring_.index().tail(), immediate.value);
      if (length == 0 || wc.byte_len != length) return position_fault("DATA length differs from the bytes written");
      if (!credit_.accepts_write(ring_.available(), length) || !ring_.on_peer_write(length))
        return violation("DATA beyond the credit the writer had");
      credit_.on_peer_wrote(ring_.available());
      ++counters_.data_received;
      // Our socket is closed: nobody will read it. The kernel answers data
      // for a closed socket with a reset, and so does this side (a channel
      // waiting to be parked, protocol.md §1.2, still takes the write).
      if (close_requested_) abort();
      return;
    }
    case ImmediateType::kCredit: {
      if (wc.byte_len != 0) return violation("CREDIT with a payload");
      // From our head to the position the reader has consumed to: nothing
      // (a CREDIT delivered twice) or more than is in flight is refused.
      const uint64_t returned = distance_to(remote_.index().head(), immediate.value);
      if (!started_) return violation("CREDIT before the stream started");
      if (returned == 0 || !remote_.on_credit(returned)) return position_fault("CREDIT for more than is in flight");
      ++counters_.credits_received;
      return;
    }
    case ImmediateType::kControl:
      if (wc.byte_len != 0) return violation("CONTROL with a payload");
      if (immediate.value == static_cast<uint32_t>(ControlCode::kReset)) {
        peer_reset_ = error_ == 0;
        fail(ECONNRESET, "reset by the peer", false);
        return;
      }
      if (immediate.value == static_cast<uint32_t>(ControlCode::kClosed)) {
        if (!peer_fin_ || peer_closed_) return violation("CLOSED without a FIN before it, or a second one");
        peer_closed_ = true;
        return;
      }
      if (peer_fin_) return violation("second FIN");
      peer_fin_ = true;
      return;
  }
}

void StreamChannel::receive_message(const uint8_t* slot, uint32_t length) {
  // A longer SEND cannot complete (it overflows the slot: a local length
  // error); checked anyway, the copy must not trust the device either.
  if (length == 0 || length > kControlMessageMax) return violation("a message of a bad length");
  if (wire::is_ring_resize_message(slot, length)) {
    if (wire::load_be32(slot) == wire::kRingGrowMagic) return on_ring_grow(slot, length);
    return on_ring_moved(slot, length);
  }
  // After the peer's CLOSED its stream has ended: a message now is for
  // the next connection on this queue pair (a parked channel's Park,
  // protocol.md §1.2), kept apart from the stream's.
  if (peer_closed_) {
    if (after_close_length_ != 0) return violation("a second message after CLOSED");
    std::memcpy(after_close_, slot, length);
    after_close_length_ = length;
    ++counters_.messages_received;
    return;
  }
  // A direction sends at most two messages (Bound or Switch, then a
  // Revert), so a third one while those have not been taken is the
  // peer's fault.
  if (inbox_count_ == kInboxDepth) return violation("a message more than the inbox holds");
  std::memcpy(inbox_[inbox_count_], slot, length);
  inbox_length_[inbox_count_] = length;
  ++inbox_count_;
  ++counters_.messages_received;
}

void StreamChannel::handle_completion(const ibv_wc& wc) {
  if ((wc.wr_id & kReceiveTag) != 0) {
    uint64_t slot = wc.wr_id & ~kReceiveTag;
    if (slot >= config_.rq_depth) {
      fail(EIO, "internal: completion for a receive never posted", false);
      return;
    }
    handle_receive(wc, message_slot(static_cast<uint32_t>(slot)));
    // Handled (the message copied out): the slot may be posted again.
    free_slots_.push_back(static_cast<uint32_t>(slot));
    return;
  }
  if (wc.status != IBV_WC_SUCCESS) {
    // Retry exceeded (peer gone), remote access error, or flushed after an
    // earlier failure (then this is a no-op). Unsignalled requests report
    // errors too, so this is how a dead peer shows up.
    if (wc.status == IBV_WC_REM_ACCESS_ERR && peer_closed_ && error_ == 0) {
      // The peer closed its socket and took its ring away (a channel
      // waiting to be parked, protocol.md §1.2): our data found a closed
      // socket, which the kernel answers with a reset.
      peer_reset_ = true;
      fail(ECONNRESET, "written to a closed socket", false);
      return;
    }
    fail(ECONNRESET, ibv_wc_status_str(wc.status));
    return;
  }
  uint64_t sequence = wc.wr_id;
  if (!sq_.on_completed(sequence)) {
    fail(EIO, "internal: completion for a work request never posted", false);
    return;
  }
  if (probe_outstanding_ && sequence >= probe_sequence_) probe_outstanding_ = false;
  if (!retired_mirrors_.empty()) release_retired_mirrors();
  if (reset_outstanding_ && sequence >= reset_sequence_) {
    reset_outstanding_ = false;
    qp_.to_error();
  }
}

int StreamChannel::take_completions() {
  if (!cq_.valid()) return -ENOTCONN;
  int taken = 0;
  for (int round = 0; round < kMaxPollRounds; ++round) {
    ibv_wc wcs[kPollBatch];
    core::Result<int> polled = cq_.poll(wcs, kPollBatch);
    if (!polled) {
      fail(polled.error(), "ibv_poll_cq failed");
      return -polled.error();
    }
    for (int i = 0; i < polled.value(); ++i) handle_completion(wcs[i]);
    taken += polled.value();
    if (polled.value() < kPollBatch) break;
  }
  counters_.completions += static_cast<uint64_t>(taken);
  if (taken > 0) {
    idle_ms_ = 0;
    idle_since_ms_ = 0;
  }
  return taken;
}

core::Result<int> StreamChannel::progress() {
  using R = core::Result<int>;
  const int taken = take_completions();  // -ENOTCONN without a CQ
  if (taken < 0) return R::fail(-taken);
  replenish_receives();
  // After the completions, not at each DATA: DATA may fill the ring before
  // start(), and the writer then sends nothing more until it has room.
  maybe_offer_growth();
  pump_sends(false);
  return R::ok(taken);
}

Status StreamChannel::arm() { return cq_.arm(false); }

core::Result<int> StreamChannel::drain_events() { return cq_.drain_events(); }

// ------------------------------------------------------------------ errors --

void StreamChannel::fail(int error, const char* why, bool resumable) {
  if (error_ != 0) return;
  error_ = error;
  failure_ = why;
  resumable_ = resumable && !aborted_;
  // Bytes write() took and did not post stay in the send buffer (nothing
  // posts them now): a peer that went back to TCP gets them there
  // (stop_writing()).
  fin_pending_ = false;
  // After both ends said they were done (or we ended it), the queue pair's
  // teardown flushes what is still posted: expected, nothing to act on.
  const bool expected = aborted_ || close_requested_ || (peer_fin_ && write_shut_);
  if (expected)
    VSOCK_LOG(kDebug, "stream: QP %u failed after the close: %s", qp_.qpn(), why);
  else
    VSOCK_LOG(kInfo, "stream: QP %u failed: %s", qp_.qpn(), why);
  // Both ends log where their positions stand when a queue pair fails
  // (each direction's bytes since the switch): what one side's device took
  // must not pass what the other's posted (a device that delivered a CREDIT
  // with another's value shows here, on the side that took it).
  const core::LogLevel level = expected ? core::LogLevel::kDebug : core::LogLevel::kInfo;
  if (core::log_enabled(level))
    core::log_message(level,
                      "stream: QP %u: DATA posted to %llu, taken to %llu in %llu; CREDIT posted to %llu in %llu, "
                      "taken to %llu in %llu",
                      qp_.qpn(), static_cast<unsigned long long>(remote_.index().tail()),
                      static_cast<unsigned long long>(ring_.index().tail()),
                      static_cast<unsigned long long>(counters_.data_received),
                      static_cast<unsigned long long>(credit_.returned()),
                      static_cast<unsigned long long>(counters_.credits_sent),
                      static_cast<unsigned long long>(remote_.index().head()),
                      static_cast<unsigned long long>(counters_.credits_received));
  // In the error state the peer can write nothing more into the ring, and
  // every outstanding request completes (flushed), so nothing is left
  // pending on the device when the channel is destroyed.
  if (qp_.valid()) qp_.to_error();
}

void StreamChannel::position_fault(const char* why) {
  if (error_ == 0) core::stat_add(core::Stat::stream_violations);  // once per connection
  VSOCK_LOG(kWarn, "stream: QP %u: %s (a broken peer, or a device fault): RDMA is dropped", qp_.qpn(), why);
  fail(ECONNRESET, why);
}

void StreamChannel::violation(const char* why) {
  if (error_ == 0) core::stat_add(core::Stat::stream_violations);  // once per connection
  VSOCK_LOG(kWarn, "stream: QP %u: protocol violation by the peer: %s; connection reset", qp_.qpn(), why);
  fail(ECONNRESET, why, false);
  // Nothing from a broken peer is taken any more: its message, the bytes
  // it wrote and its FIN are dropped (a transport failure or RESET keeps
  // them): the stream ends in ECONNRESET.
  inbox_count_ = 0;
  ring_.consume(ring_.available());
  peer_fin_ = false;
}

}  // namespace vsock::sock
