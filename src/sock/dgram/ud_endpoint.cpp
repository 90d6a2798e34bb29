#include "sock/dgram/ud_endpoint.hpp"

#include "core/clock.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "sys/real_calls.hpp"
#include "sock/dgram/fragmenter.hpp"

#include <poll.h>

#include <cerrno>
#include <cstring>
#include <ctime>


namespace vsock::sock::dgram {
namespace {

size_t mtu_bytes_of(ibv_mtu mtu) { return size_t{128} << static_cast<int>(mtu); }

constexpr int kPollBatch = 16;
// The most fragments one datagram may have at the smallest budget we
// send with (a 1024-byte MTU: 984 bytes each, 67 for 65,507 bytes).
constexpr uint32_t kMaxChain = 128;

}  // namespace

core::Result<std::unique_ptr<UdEndpoint>> UdEndpoint::create(const rdma::Device& device,
                                                             const UdEndpointConfig& config) {
  using R = core::Result<std::unique_ptr<UdEndpoint>>;
  if (config.receive_depth == 0 || config.send_slots == 0 || config.repost_batch == 0 || config.signal_every == 0 ||
      config.signal_every > config.send_slots)
    return R::fail(EINVAL);
  std::unique_ptr<UdEndpoint> endpoint(new UdEndpoint());
  UdEndpoint& e = *endpoint;
  e.config_ = config;
  e.port_ = device.port();
  e.mtu_bytes_ = mtu_bytes_of(device.active_mtu());
  e.receive_stride_ = rdma::kGrhSize + e.mtu_bytes_;

  auto pd = rdma::ProtectionDomain::create(device);
  if (!pd) return R::fail(pd.error());
  e.pd_ = std::move(pd.value());
  auto send_cq = rdma::CompletionQueue::create(device, static_cast<int>(config.send_slots), false);
  if (!send_cq) return R::fail(send_cq.error());
  e.send_cq_ = std::move(send_cq.value());
  auto receive_cq = rdma::CompletionQueue::create(device, static_cast<int>(config.receive_depth), true);
  if (!receive_cq) return R::fail(receive_cq.error());
  e.receive_cq_ = std::move(receive_cq.value());

  rdma::UdQpConfig qp_config;
  qp_config.max_send_wr = config.send_slots;
  qp_config.max_recv_wr = config.receive_depth;
  auto qp = rdma::UdQueuePair::create(device, e.pd_, e.send_cq_, e.receive_cq_, qp_config);
  if (!qp) return R::fail(qp.error());
  e.qp_ = std::move(qp.value());

  // Local access only: nothing of a UD endpoint is remotely writable.
  auto receive_pool = rdma::MemoryRegion::allocate(e.pd_, e.receive_stride_ * config.receive_depth,
                                                   IBV_ACCESS_LOCAL_WRITE);
  if (!receive_pool) return R::fail(receive_pool.error());
  e.receive_pool_ = std::move(receive_pool.value());
  auto send_pool = rdma::MemoryRegion::allocate(e.pd_, e.mtu_bytes_ * config.send_slots, 0);
  if (!send_pool) return R::fail(send_pool.error());
  e.send_pool_ = std::move(send_pool.value());

  rdma::Status posted = e.post_all_receives();
  if (!posted) return R::fail(posted.error());
  e.repost_.reserve(config.repost_batch);
  return R::ok(std::move(endpoint));
}

UdEndpoint::~UdEndpoint() = default;

rdma::Status UdEndpoint::post_all_receives() {
  std::vector<uint32_t> all(config_.receive_depth);
  for (uint32_t i = 0; i < config_.receive_depth; ++i) all[i] = i;
  return post_receives(all.data(), all.size());
}

rdma::Status UdEndpoint::post_receives(const uint32_t* indexes, size_t count) {
  // One chain per call: one doorbell for the batch.
  ibv_sge sges[64];
  ibv_recv_wr wrs[64];
  while (count > 0) {
    size_t n = count < 64 ? count : 64;
    for (size_t i = 0; i < n; ++i) {
      sges[i] = ibv_sge{reinterpret_cast<uintptr_t>(receive_buffer(indexes[i])),
                        static_cast<uint32_t>(receive_stride_), receive_pool_.lkey()};
      wrs[i] = ibv_recv_wr{};
      wrs[i].wr_id = indexes[i];
      wrs[i].sg_list = &sges[i];
      wrs[i].num_sge = 1;
      wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
    }
    rdma::Status posted = qp_.post_recv(wrs);
    if (!posted) return posted;
    indexes += n;
    count -= n;
  }
  return rdma::ok_status();
}

void UdEndpoint::reap_sends() {
  ibv_wc wc[kPollBatch];
  core::Result<int> got = send_cq_.poll(wc, kPollBatch);
  if (!got) return;
  for (int i = 0; i < got.value(); ++i) {
    if (wc[i].status != IBV_WC_SUCCESS) {
      // A UD send that failed is a datagram lost on the wire (UDP's own
      // risk): counted, and said once.
      if (counters_.send_errors++ == 0)
        VSOCK_LOG(kInfo, "udp: a UD send completed with %s: that datagram is lost", ibv_wc_status_str(wc[i].status));
      core::stat_add(core::Stat::udp_send_errors);
      note_broken_locked(ibv_wc_status_str(wc[i].status));
    }
    // In order: this send's completion frees its slot and every one before.
    if (wc[i].wr_id + 1 > completed_sends_) completed_sends_ = wc[i].wr_id + 1;
  }
}

void UdEndpoint::fill_slot(const wire::DatagramHeader& header, const iovec* iov, int count, size_t offset,
                           size_t length, ibv_ah* ah, uint32_t qpn, ibv_send_wr* wr, ibv_sge* sge, bool signal_it) {
  const uint64_t number = posted_sends_++;
  uint8_t* slot = send_pool_.data() + (number % config_.send_slots) * mtu_bytes_;
  wire::encode(header, slot);
  // Gathers `length` bytes starting `offset` bytes into the iovecs.
  size_t skipped = 0, copied = 0;
  for (int i = 0; i < count && copied < length; ++i) {
    size_t piece = iov[i].iov_len;
    const uint8_t* base = static_cast<const uint8_t*>(iov[i].iov_base);
    if (skipped + piece <= offset) {
      skipped += piece;
      continue;
    }
    size_t start = offset > skipped ? offset - skipped : 0;
    size_t take = piece - start < length - copied ? piece - start : length - copied;
    std::memcpy(slot + wire::kDatagramHeaderSize + copied, base + start, take);
    copied += take;
    skipped += piece;
  }
  const uint32_t bytes = static_cast<uint32_t>(wire::kDatagramHeaderSize + length);
  *sge = ibv_sge{reinterpret_cast<uintptr_t>(slot), bytes, send_pool_.lkey()};
  *wr = ibv_send_wr{};
  wr->wr_id = number;
  wr->sg_list = sge;
  wr->num_sge = 1;
  wr->opcode = IBV_WR_SEND;
  // A completion every few sends frees the slots before it; the last slot
  // of the pool always asks, so a full pool always has one coming.
  const bool signal =
      signal_it || (number + 1) % config_.signal_every == 0 || (number + 1) % config_.send_slots == 0;
  if (signal) last_signaled_ = number + 1;
  wr->send_flags = (signal ? IBV_SEND_SIGNALED : 0) | (bytes <= qp_.max_inline_data() ? IBV_SEND_INLINE : 0);
  wr->wr.ud.ah = ah;
  wr->wr.ud.remote_qpn = qpn;
  wr->wr.ud.remote_qkey = qp_.qkey();
  ++counters_.sent;
}

rdma::Status UdEndpoint::send(ibv_ah* ah, uint32_t qpn, const wire::DatagramHeader& header, const iovec* iov,
                              int count) {
  const size_t payload = header.payload_length;
  if (payload > max_payload()) return rdma::Status::fail(EMSGSIZE);
  size_t available = 0;
  for (int i = 0; i < count; ++i) available += iov[i].iov_len;
  if (available < payload) return rdma::Status::fail(EMSGSIZE);
  std::lock_guard<std::mutex> lock(mu_);
  if (!usable_locked()) return rdma::Status::fail(ENETDOWN);
  if (posted_sends_ - completed_sends_ >= config_.send_slots) reap_sends();
  if (posted_sends_ - completed_sends_ >= config_.send_slots) {
    ++counters_.slots_exhausted;
    return rdma::Status::fail(EAGAIN);
  }
  ibv_send_wr wr;
  ibv_sge sge;
  const uint64_t first = posted_sends_;
  fill_slot(header, iov, count, 0, payload, ah, qpn, &wr, &sge);
  ibv_send_wr* bad = nullptr;
  rdma::Status sent = qp_.post_send(&wr, &bad);
  core::stat_add(core::Stat::udp_ud_posts);
  if (!sent) {
    release_unposted(first, bad);
    note_broken_locked("a post failed");
  }
  return sent;
}

rdma::Status UdEndpoint::send_datagram(ibv_ah* ah, uint32_t qpn, const wire::DatagramHeader& header,
                                       const iovec* iov, int count, size_t length) {
  UdOutgoing one;
  one.ah = ah;
  one.qpn = qpn;
  one.header = header;
  one.iov = iov;
  one.iov_count = count;
  one.length = length;
  size_t posted = 0;
  rdma::Status status = send_datagrams(&one, 1, &posted);
  return posted == 1 ? rdma::ok_status() : status;
}

rdma::Status UdEndpoint::send_datagrams(const UdOutgoing* datagrams, size_t count, size_t* posted, bool all_or_none) {
  *posted = 0;
  ibv_send_wr wrs[kMaxChain];
  ibv_sge sges[kMaxChain];
  // Where each datagram's requests end in wrs (its last one is end - 1).
  uint32_t ends[kMaxChain];
  std::lock_guard<std::mutex> lock(mu_);
  if (!usable_locked()) return rdma::Status::fail(ENETDOWN);
  const uint64_t first = posted_sends_;
  uint32_t used = 0;
  size_t taken = 0;
  rdma::Status why = rdma::ok_status();
  for (; taken < count; ++taken) {
    const UdOutgoing& d = datagrams[taken];
    core::Result<FragmentPlan> plan = plan_fragments(d.length, max_payload());
    if (!plan) {
      why = rdma::Status::fail(plan.error());
      break;
    }
    const uint32_t fragments = plan.value().count;
    if (fragments > config_.send_slots || fragments > kMaxChain) {
      why = rdma::Status::fail(EMSGSIZE);
      break;
    }
    if (used + fragments > kMaxChain) {
      why = rdma::Status::fail(EAGAIN);
      break;
    }
    if (posted_sends_ - completed_sends_ + fragments > config_.send_slots) reap_sends();
    if (posted_sends_ - completed_sends_ + fragments > config_.send_slots) {
      ++counters_.slots_exhausted;
      why = rdma::Status::fail(EAGAIN);
      break;
    }
    wire::DatagramHeader fragment = d.header;
    fragment.fragment_count = static_cast<uint16_t>(fragments);
    fragment.total_length = static_cast<uint16_t>(d.length);
    for (uint32_t i = 0; i < fragments; ++i, ++used) {
      wire::FragmentSpan span = fragment_at(plan.value(), i).value();
      fragment.fragment_index = static_cast<uint16_t>(i);
      fragment.payload_length = static_cast<uint16_t>(span.length);
      fill_slot(fragment, d.iov, d.iov_count, d.offset + span.offset, span.length, d.ah, d.qpn, &wrs[used],
                &sges[used]);
      if (used > 0) wrs[used - 1].next = &wrs[used];
    }
    ends[taken] = used;
  }
  if (used == 0) return why;
  if (all_or_none && taken < count) {
    release_unposted(first, nullptr);  // nothing was posted: the slots are free again
    return why;
  }
  wrs[used - 1].next = nullptr;
  ibv_send_wr* bad = nullptr;
  rdma::Status sent = qp_.post_send(wrs, &bad);
  core::stat_add(core::Stat::udp_ud_posts);
  if (!sent) {
    // Only datagrams whose every fragment the device took count as sent: a
    // part of one is never reassembled, so sending it again elsewhere (the
    // kernel) delivers it once.
    const uint64_t unposted = release_unposted(first, bad);
    note_broken_locked("a post failed");
    size_t whole = 0;
    while (whole < taken && first + ends[whole] <= unposted) ++whole;
    *posted = whole;
    return sent;
  }
  *posted = taken;
  return why;
}

bool UdEndpoint::finish_sends(ibv_ah* ah, uint32_t qpn, const wire::DatagramHeader& fence, int timeout_ms) {
  const int64_t deadline = core::monotonic_ms() + timeout_ms;
  bool fenced = false;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      reap_sends();
      if (completed_sends_ >= posted_sends_) return true;
      if (broken_.load(std::memory_order_relaxed)) return false;  // in flight when it failed: lost
      // A completion is coming for the last send only if it asked for one.
      if (!fenced && last_signaled_ < posted_sends_ && posted_sends_ - completed_sends_ < config_.send_slots) {
        ibv_send_wr wr;
        ibv_sge sge;
        const uint64_t first = posted_sends_;
        fill_slot(fence, nullptr, 0, 0, 0, ah, qpn, &wr, &sge, true);
        ibv_send_wr* bad = nullptr;
        if (qp_.post_send(&wr, &bad)) {
          --counters_.sent;  // not a datagram
          fenced = true;
        } else {
          release_unposted(first, bad);
        }
      }
      if (last_signaled_ >= posted_sends_) fenced = true;  // a completion is coming either way
    }
    if (core::monotonic_ms() >= deadline) return false;
    timespec pause{0, 100 * 1000};
    nanosleep(&pause, nullptr);
  }
}

uint64_t UdEndpoint::release_unposted(uint64_t first, const ibv_send_wr* bad) {
  const uint64_t unposted = bad != nullptr ? bad->wr_id : first;
  // The requests from `unposted` on were never posted: their slots (and
  // numbers) are free again, and no completion will come for them.
  counters_.sent -= posted_sends_ - unposted;
  posted_sends_ = unposted;
  // The last one that asked for a completion may be among them: the
  // regular one before (a lower bound: at worst finish_sends() fences).
  if (last_signaled_ > unposted) last_signaled_ = unposted - unposted % config_.signal_every;
  return unposted;
}

int UdEndpoint::poll(ArrivalHandler handler, void* context, int max) {
  std::lock_guard<std::mutex> lock(mu_);
  // A process that only receives restarts a failed queue pair here (a QP
  // whose send queue alone failed still receives meanwhile).
  if (broken_.load(std::memory_order_relaxed)) usable_locked();
  int taken = 0;
  while (taken < max) {
    ibv_wc wc[kPollBatch];
    int want = max - taken < kPollBatch ? max - taken : kPollBatch;
    core::Result<int> got = receive_cq_.poll(wc, want);
    if (!got || got.value() == 0) break;
    for (int i = 0; i < got.value(); ++i) {
      const uint32_t index = static_cast<uint32_t>(wc[i].wr_id);
      if (index >= config_.receive_depth) continue;  // not ours: never happens
      if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
        // Its receives come back unused: the QP failed — or failed before
        // a restart, whose flushes may still be arriving (the buffer is
        // posted again already): asked of the device.
        if (!broken_.load(std::memory_order_relaxed) && qp_.failed()) note_broken_locked("receives flushed");
        continue;
      }
      repost_.push_back(index);
      if (wc[i].status != IBV_WC_SUCCESS) {
        ++counters_.receive_errors;
        continue;
      }
      const uint8_t* buffer = receive_buffer(index);
      UdArrival arrival;
      core::Result<rdma::GrhInfo> grh = rdma::parse_grh(buffer, rdma::kGrhSize);
      core::Result<wire::DatagramHeader> header =
          wc[i].byte_len >= rdma::kGrhSize && wc[i].byte_len <= receive_stride_
              ? wire::parse_datagram_header(buffer + rdma::kGrhSize, wc[i].byte_len - rdma::kGrhSize)
              : core::Result<wire::DatagramHeader>::fail(EPROTO);
      if (!grh || !header || !(wc[i].wc_flags & IBV_WC_GRH)) {
        ++counters_.malformed;
        core::stat_add(core::Stat::udp_drops_malformed);
        continue;
      }
      arrival.header = header.value();
      arrival.payload = buffer + rdma::kGrhSize + wire::kDatagramHeaderSize;
      arrival.grh = grh.value();
      arrival.source_qpn = wc[i].src_qp;
      arrival.completion = &wc[i];
      arrival.grh_slot = reinterpret_cast<const ibv_grh*>(buffer);
      ++counters_.received;
      handler(context, arrival);
    }
    taken += got.value();
    if (repost_.size() >= config_.repost_batch) {
      if (post_receives(repost_.data(), repost_.size())) repost_.clear();
    }
  }
  // Nothing more came: what was handled goes back now, so that a quiet
  // endpoint never sits with buffers off the queue.
  if (!repost_.empty() && post_receives(repost_.data(), repost_.size())) repost_.clear();
  if (taken > 0) productive_polls_.store(productive_polls_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return taken;
}

void UdEndpoint::note_broken_locked(const char* why) {
  if (broken_.load(std::memory_order_relaxed)) return;
  broken_.store(true, std::memory_order_relaxed);
  restart_at_ms_ = core::monotonic_ms() + kRestartEveryMs;
  VSOCK_LOG(kInfo, "udp: UD QP %u failed (%s): datagrams go through the kernel until it restarts", qp_.qpn(), why);
}

bool UdEndpoint::usable_locked() {
  if (!broken_.load(std::memory_order_relaxed)) return true;
  const int64_t now = core::monotonic_ms();
  if (now < restart_at_ms_) return false;
  restart_at_ms_ = now + kRestartEveryMs;
  // Not while the port is down: a restart then fails again at once.
  ibv_port_attr port{};
  if (ibv_query_port(qp_.get()->context, port_, &port) != 0 || port.state != IBV_PORT_ACTIVE) return false;
  if (!qp_.restart()) return false;
  // Through RESET the queue pair forgot every posted request; what the
  // queues still report is from before (nothing posted since): dropped,
  // so that no buffer is posted twice (a datagram received then is lost,
  // as UDP allows).
  ibv_wc wc[kPollBatch];
  for (int round = 0; round < 1024; ++round) {
    core::Result<int> sends = send_cq_.poll(wc, kPollBatch);
    core::Result<int> receives = receive_cq_.poll(wc, kPollBatch);
    if ((!sends || sends.value() == 0) && (!receives || receives.value() == 0)) break;
  }
  completed_sends_ = posted_sends_;  // nothing is in flight any more
  last_signaled_ = posted_sends_;
  repost_.clear();
  if (!post_all_receives()) return false;
  broken_.store(false, std::memory_order_relaxed);
  core::stat_add(core::Stat::udp_ud_restarts);
  VSOCK_LOG(kInfo, "udp: UD QP %u restarted: datagrams go over UD again", qp_.qpn());
  return true;
}

rdma::Status UdEndpoint::arm() {
  last_arm_ms_.store(core::monotonic_ms(), std::memory_order_relaxed);
  return arm_for_watcher();
}

rdma::Status UdEndpoint::arm_for_watcher() {
  std::lock_guard<std::mutex> lock(mu_);
  rdma::Status armed = receive_cq_.arm();
  maybe_event_.store(receive_cq_.maybe_event(), std::memory_order_release);
  return armed;
}

int UdEndpoint::drain_events() {
  // A stale false only leaves an event for the next sleeper, which arms
  // first and so wakes at once and drains it (completion_queue.hpp).
  if (!maybe_event_.load(std::memory_order_acquire)) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  core::Result<int> drained = receive_cq_.drain_events();
  maybe_event_.store(receive_cq_.maybe_event(), std::memory_order_release);
  return drained ? drained.value() : 0;
}

int UdEndpoint::take_event() {
  std::lock_guard<std::mutex> lock(mu_);
  core::Result<int> taken = receive_cq_.take_event();
  maybe_event_.store(receive_cq_.maybe_event(), std::memory_order_release);
  return taken ? taken.value() : 0;
}

bool UdEndpoint::channel_readable() const {
  pollfd channel{receive_cq_.channel_fd(), POLLIN, 0};
  return sys::real().poll(&channel, 1, 0) > 0;
}

UdEndpointCounters UdEndpoint::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

}  // namespace vsock::sock::dgram
