// rdma_ring_wrap: a stream written with RDMA WRITE WITH IMMEDIATE into the
// peer's ReceiveRing, the way the library's stream path works: the writer
// plans each message with RemoteRing (two writes when it wraps the ring's
// end, the immediate on the last one carrying the length), the receiver
// accepts it with on_peer_write(), checks every byte in stream order and
// returns credits with SEND WITH IMMEDIATE. The ring is small (16 KiB), so
// the writer wraps it hundreds of times and often waits for credit; the
// receiver sleeps on the completion channel between bursts.
//
// Usage: rdma_ring_wrap [MESSAGES]  (default 3000)
#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <deque>

#include "rdma/completion_queue.hpp"
#include "rdma/device.hpp"
#include "rdma/memory_region.hpp"
#include "rdma/protection_domain.hpp"
#include "rdma/rc_queue_pair.hpp"
#include "rdma/remote_ring.hpp"
#include "rdma/ring_buffer.hpp"
#include "test_support.hpp"

namespace vsock::test {
namespace {

constexpr const char* kProgram = "rdma_ring_wrap";
constexpr uint64_t kRingSize = 16 * 1024;
constexpr int kRecvDepth = 256;           // receives the receiver keeps posted
constexpr size_t kMaxMessagesInFlight = 128;  // < kRecvDepth: no receiver-not-ready
constexpr int kCreditRecvDepth = 64;
constexpr int kMaxSignaledInFlight = 32;
constexpr int kSetupTimeoutMs = 20000;
constexpr double kRunTimeoutS = 120.0;
constexpr uint64_t kStreamSeed = 0x5752;

struct Hello {
  rdma::QpEndpoint endpoint;
  rdma::RingDescriptor ring;  // the receiver's; zero from the writer
};

// The same message sizes on both sides: 1 .. 8 KiB, and now and then a
// message as large as the whole ring (which needs the ring empty).
uint32_t message_size(uint32_t index) {
  if (index % 97 == 96) return static_cast<uint32_t>(kRingSize);
  uint32_t x = index * 2654435761u;
  x ^= x >> 15;
  return 1 + x % 8192;
}

uint64_t stream_length(uint32_t messages) {
  uint64_t total = 0;
  for (uint32_t i = 0; i < messages; ++i) total += message_size(i);
  return total;
}

struct Side {
  rdma::Device device;
  rdma::ProtectionDomain pd;
  rdma::CompletionQueue cq;
  rdma::MemoryRegion staging;  // writer: a mirror of the peer's ring
  rdma::ReceiveRing ring;      // receiver
  rdma::RcQueuePair qp;
  Hello peer{};
  int signaled_in_flight = 0;
};

int set_up(Side& side, int fd, bool receiver) {
  int exit_code = 0;
  core::Result<rdma::Device> device = open_test_device(kProgram, &exit_code);
  if (!device) return exit_code;
  side.device = std::move(device.value());
  auto pd = rdma::ProtectionDomain::create(side.device);
  if (!pd) return 1;
  side.pd = std::move(pd.value());
  auto cq = rdma::CompletionQueue::create(side.device, 1024, receiver);
  if (!cq) return 1;
  side.cq = std::move(cq.value());
  Hello mine{};
  if (receiver) {
    auto ring = rdma::ReceiveRing::create(side.pd, kRingSize);
    if (!ring) return 1;
    side.ring = std::move(ring.value());
    mine.ring = side.ring.descriptor();
  } else {
    auto staging = rdma::MemoryRegion::allocate(side.pd, kRingSize, IBV_ACCESS_LOCAL_WRITE);
    if (!staging) return 1;
    side.staging = std::move(staging.value());
  }
  rdma::RcQpConfig config;
  config.max_send_wr = 256;
  config.max_recv_wr = kRecvDepth;
  config.remote_access = receiver ? IBV_ACCESS_REMOTE_WRITE : 0;  // only the ring is writable
  auto qp = rdma::RcQueuePair::create(side.device, side.pd, side.cq, side.cq, config);
  if (!qp) return 1;
  side.qp = std::move(qp.value());
  uint32_t psn = rdma::random_psn();
  mine.endpoint = side.qp.local_endpoint(psn);
  if (!send_all(fd, &mine, sizeof mine, kSetupTimeoutMs) || !recv_all(fd, &side.peer, sizeof side.peer, kSetupTimeoutMs))
    return 1;
  if (!side.qp.connect(side.peer.endpoint, psn)) return 1;
  return 0;
}

// A receive without buffers: WRITE WITH IMMEDIATE and zero-length SEND WITH
// IMMEDIATE only need a work request to complete into.
bool post_empty_recv(Side& side) {
  ibv_recv_wr wr{};
  wr.wr_id = 1;
  return side.qp.post_recv(&wr).has_value();
}

// ---------------------------------------------------------------- writer --
struct Writer {
  Side& side;
  rdma::RemoteRing remote;
  std::deque<uint64_t> message_ends;  // stream position where each unconsumed message ends
  uint64_t wraps = 0, credit_waits = 0;
};

// Handles one completion on the writer: a credit or a finished write.
bool writer_take(Writer& w, const Deadline& deadline) {
  ibv_wc wc{};
  if (!wait_completion(w.side.cq, &wc, deadline, "a credit")) return false;
  if (!(wc.opcode & IBV_WC_RECV)) {
    --w.side.signaled_in_flight;
    return true;
  }
  if (wc.opcode != IBV_WC_RECV || !(wc.wc_flags & IBV_WC_WITH_IMM)) return false;
  if (!w.remote.on_credit(ntohl(wc.imm_data))) {
    fprintf(stderr, "%s: credit %u exceeds what is in flight (%llu)\n", kProgram, ntohl(wc.imm_data),
            static_cast<unsigned long long>(w.remote.in_flight()));
    return false;
  }
  while (!w.message_ends.empty() && w.message_ends.front() <= w.remote.index().head()) w.message_ends.pop_front();
  return post_empty_recv(w.side);
}

bool post_write(Writer& w, const rdma::RemoteSpan& span, uint64_t local_offset, bool last, uint32_t length) {
  ibv_sge sge{w.side.staging.address() + local_offset, static_cast<uint32_t>(span.length), w.side.staging.lkey()};
  ibv_send_wr wr{};
  wr.wr_id = last ? 2 : 3;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  // Selective signalling: the first half of a wrapped message completes with
  // the (signalled) second half that follows it on the same QP.
  wr.send_flags = last ? IBV_SEND_SIGNALED : 0;
  wr.imm_data = htonl(length);
  wr.wr.rdma.remote_addr = span.address;
  wr.wr.rdma.rkey = w.remote.rkey();
  if (!w.side.qp.post_send(&wr)) return false;
  if (last) ++w.side.signaled_in_flight;
  return true;
}

int run_writer(int fd, uint32_t messages) {
  Side side;
  int rc = set_up(side, fd, false);
  if (rc != 0) return rc;
  auto remote = rdma::RemoteRing::create(side.peer.ring);
  if (!remote) {
    fprintf(stderr, "%s: the receiver's ring descriptor is invalid\n", kProgram);
    return 1;
  }
  Writer w{side, remote.value(), {}, 0, 0};
  for (int i = 0; i < kCreditRecvDepth; ++i)
    if (!post_empty_recv(side)) return 1;
  if (!barrier(fd, kSetupTimeoutMs)) return 1;

  Deadline deadline(kRunTimeoutS);
  double start = now_seconds();
  uint64_t position = 0;
  for (uint32_t m = 0; m < messages; ++m) {
    uint32_t length = message_size(m);
    core::Result<rdma::RemoteWrite> plan = w.remote.plan(length);
    // Wait for room (credit), for a free receive on the peer and SQ slots.
    for (int waits = 0; !plan || w.message_ends.size() >= kMaxMessagesInFlight ||
                        side.signaled_in_flight >= kMaxSignaledInFlight;
         ++waits) {
      if (!plan && plan.error() != EAGAIN) return 1;
      if (waits == 0 && !plan) ++w.credit_waits;
      if (!writer_take(w, deadline)) return 1;
      plan = w.remote.plan(length);
    }
    const rdma::RemoteWrite& write = plan.value();
    // The staging buffer mirrors the ring: the same offsets, so bytes still
    // in flight are never overwritten before the peer has credited them.
    uint64_t first_offset = write.first.address - side.peer.ring.address;
    fill_pattern(side.staging.data() + first_offset, write.first.length, kStreamSeed, position);
    fill_pattern(side.staging.data(), write.second.length, kStreamSeed, position + write.first.length);
    bool wrapped = write.second.length != 0;
    if (!post_write(w, write.first, first_offset, !wrapped, length)) return 1;
    if (wrapped && !post_write(w, write.second, 0, true, length)) return 1;
    w.wraps += wrapped;
    if (!w.remote.commit(length)) return 1;
    position += length;
    w.message_ends.push_back(position);
  }
  for (int waits = 0; w.remote.in_flight() != 0 || side.signaled_in_flight != 0; ++waits)
    if (!writer_take(w, deadline)) return 1;
  double elapsed = now_seconds() - start;
  if (!barrier(fd, kSetupTimeoutMs)) return 1;
  printf("%s: wrote %u messages, %llu bytes through a %llu B ring in %.2f s (%.1f MB/s, %.1f us per message);"
         " %llu wrapped the ring's end, %llu waited for credit\n",
         kProgram, messages, static_cast<unsigned long long>(position), static_cast<unsigned long long>(kRingSize),
         elapsed, position / elapsed / 1e6, elapsed * 1e6 / messages, static_cast<unsigned long long>(w.wraps),
         static_cast<unsigned long long>(w.credit_waits));
  if (w.wraps == 0) {
    fprintf(stderr, "%s: no message wrapped the ring: the test did not test wrapping\n", kProgram);
    return 1;
  }
  return 0;
}

// -------------------------------------------------------------- receiver --
bool send_credit(Side& side, uint32_t bytes) {
  ibv_send_wr wr{};
  wr.wr_id = 4;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(bytes);
  if (!side.qp.post_send(&wr)) return false;
  ++side.signaled_in_flight;
  return true;
}

int run_receiver(int fd, uint32_t messages) {
  Side side;
  int rc = set_up(side, fd, true);
  if (rc != 0) return rc;
  for (int i = 0; i < kRecvDepth; ++i)
    if (!post_empty_recv(side)) return 1;
  if (!barrier(fd, kSetupTimeoutMs)) return 1;

  const uint64_t total = stream_length(messages);
  uint64_t position = 0, received_messages = 0, events = 0, sleeps = 0;
  static uint8_t chunk[kRingSize];
  Deadline deadline(kRunTimeoutS);
  bool armed = false;
  uint64_t credit = 0;  // consumed bytes not yet returned to the writer
  while (position < total || credit != 0 || side.signaled_in_flight != 0) {
    if (deadline.expired()) {
      fprintf(stderr, "%s: receiver timed out at byte %llu of %llu\n", kProgram,
              static_cast<unsigned long long>(position), static_cast<unsigned long long>(total));
      return 1;
    }
    ibv_wc wcs[32];
    core::Result<int> n = side.cq.poll(wcs, 32);
    if (!n) return 1;
    if (n.value() == 0) {
      // Poll, arm, poll again, then sleep: a completion that arrived before
      // the arm is found by the second poll instead of being slept through.
      if (!armed) {
        if (!side.cq.arm()) return 1;
        armed = true;
        continue;
      }
      core::Result<int> woke = side.cq.wait_event(1000);
      if (!woke) return 1;
      ++sleeps;
      events += static_cast<uint64_t>(woke.value());
      if (woke.value() > 0) armed = false;  // an event disarms the CQ
      continue;
    }
    for (int i = 0; i < n.value(); ++i) {
      const ibv_wc& wc = wcs[i];
      if (wc.status != IBV_WC_SUCCESS) {
        fprintf(stderr, "%s: receiver completion error: %s\n", kProgram, ibv_wc_status_str(wc.status));
        return 1;
      }
      if (!(wc.opcode & IBV_WC_RECV)) {
        --side.signaled_in_flight;
        continue;
      }
      if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !side.ring.on_peer_write(ntohl(wc.imm_data))) {
        fprintf(stderr, "%s: bad write announcement (opcode %d, length %u, ring space %llu)\n", kProgram, wc.opcode,
                ntohl(wc.imm_data), static_cast<unsigned long long>(side.ring.index().space()));
        return 1;
      }
      ++received_messages;
      if (!post_empty_recv(side)) return 1;
    }
    // Deliver everything readable, in stream order, checking every byte.
    for (int reads = 0; side.ring.available() != 0 && reads < 4; ++reads) {
      size_t got = side.ring.read(chunk, sizeof chunk);
      size_t bad = find_mismatch(chunk, got, kStreamSeed, position);
      if (bad != got) {
        fprintf(stderr, "%s: stream byte %llu is wrong\n", kProgram, static_cast<unsigned long long>(position + bad));
        return 1;
      }
      position += got;
      credit += got;
    }
    // One credit per batch; held back while too many are unacknowledged, so
    // the send queue cannot overflow when the writer is slow to re-post.
    if (credit != 0 && side.signaled_in_flight < kMaxSignaledInFlight) {
      if (!send_credit(side, static_cast<uint32_t>(credit))) return 1;
      credit = 0;
    }
  }
  if (position != total || received_messages != messages) {
    fprintf(stderr, "%s: received %llu messages / %llu bytes, expected %u / %llu\n", kProgram,
            static_cast<unsigned long long>(received_messages), static_cast<unsigned long long>(position), messages,
            static_cast<unsigned long long>(total));
    return 1;
  }
  if (!barrier(fd, kSetupTimeoutMs)) return 1;
  printf("%s: receiver verified %llu bytes in %llu messages; slept %llu times on the completion channel, %llu events\n",
         kProgram, static_cast<unsigned long long>(position), static_cast<unsigned long long>(received_messages),
         static_cast<unsigned long long>(sleeps), static_cast<unsigned long long>(events));
  return 0;
}

}  // namespace
}  // namespace vsock::test

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  long messages = argc > 1 ? atol(argv[1]) : 3000;
  if (messages < 100 || messages > 10000000) {
    fprintf(stderr, "usage: %s [MESSAGES (100..10000000)]\n", argv[0]);
    return 2;
  }
  auto count = static_cast<uint32_t>(messages);
  // The receiver is the child, so the writer's summary prints last.
  return vsock::test::run_pair([&](int fd) { return vsock::test::run_writer(fd, count); },
                               [&](int fd) { return vsock::test::run_receiver(fd, count); }, 60);
}
