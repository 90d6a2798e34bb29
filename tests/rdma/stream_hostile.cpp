// rdma_stream_hostile: a peer that breaks the stream protocol. Role 0 is a
// StreamChannel (the victim); role 1 connects a raw queue pair to it (the
// attacker) and, on a fresh connection per case, posts what a correct peer
// never would. The victim must fail the connection with ECONNRESET — read
// and write both report it, the queue pair goes to the error state — and
// never crash or touch memory outside its ring. Where the device itself
// refuses the request (a write outside the ring, an RDMA READ), the victim
// may also stay healthy; what happened is printed.
//
// Usage: rdma_stream_hostile
#include <arpa/inet.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "rdma/completion_queue.hpp"
#include "rdma/memory_region.hpp"
#include "rdma/protection_domain.hpp"
#include "rdma/rc_queue_pair.hpp"
#include "rdma/ring_buffer.hpp"
#include "sock/stream/stream_immediate.hpp"
#include "sock/stream/stream_wait.hpp"
#include "stream_support.hpp"

namespace vsock::test {
namespace {

constexpr const char* kProgram = "rdma_stream_hostile";
constexpr int kSyncTimeoutMs = 20000;
constexpr uint64_t kRing = 64 << 10;
constexpr uint64_t kSeed = 0xBAD;

// Immediate words, host order, built by hand: the attacker must be able to
// say what encode_immediate() refuses. DATA carries the stream position its
// write ends at, CREDIT the position consumed to (protocol version 3); each
// connection's positions start at 0.
constexpr uint32_t word(uint32_t type, uint32_t value) { return type << 30 | value; }
constexpr uint32_t kData = 0, kCredit = 1, kControl = 2;

struct Attacker {
  rdma::ProtectionDomain pd;
  rdma::CompletionQueue cq;
  rdma::ReceiveRing ring;      // a real ring, so the victim's credits land somewhere valid
  rdma::MemoryRegion source;   // what the attacker writes from
  rdma::RcQueuePair qp;
  rdma::RingDescriptor victim{};
};

int attacker_connect(int fd, const rdma::Device& device, Attacker& a) {
  auto pd = rdma::ProtectionDomain::create(device);
  if (!pd) return 1;
  a.pd = std::move(pd.value());
  auto cq = rdma::CompletionQueue::create(device, 256, false);
  auto ring = rdma::ReceiveRing::create(a.pd, kRing);
  auto source = rdma::MemoryRegion::allocate(a.pd, 2 * kRing, IBV_ACCESS_LOCAL_WRITE);
  if (!cq || !ring || !source) return 1;
  a.cq = std::move(cq.value());
  a.ring = std::move(ring.value());
  a.source = std::move(source.value());
  fill_stream(a.source.data(), a.source.size(), kSeed, 0);
  rdma::RcQpConfig config;
  config.max_send_wr = 64;
  config.max_recv_wr = 64;
  config.remote_access = IBV_ACCESS_REMOTE_WRITE;
  auto qp = rdma::RcQueuePair::create(device, a.pd, a.cq, a.cq, config);
  if (!qp) return 1;
  a.qp = std::move(qp.value());
  uint32_t psn = rdma::random_psn();
  StreamHello mine{a.qp.local_endpoint(psn), a.ring.descriptor()}, peer{};
  if (!send_all(fd, &mine, sizeof mine, kSyncTimeoutMs) || !recv_all(fd, &peer, sizeof peer, kSyncTimeoutMs)) return 1;
  a.victim = peer.ring;
  if (!a.qp.to_init()) return 1;
  for (int i = 0; i < 32; ++i) {
    ibv_recv_wr wr{};
    if (!a.qp.post_recv(&wr)) return 1;
  }
  if (!a.qp.to_rtr(peer.endpoint) || !a.qp.to_rts(psn)) return 1;
  return 0;
}

// Posts one request: `length` bytes from the source buffer at `source_offset`
// to the victim's ring at `ring_offset` (which may lie outside the ring).
bool post(Attacker& a, ibv_wr_opcode opcode, uint64_t ring_offset, uint32_t length, uint32_t imm_word,
          uint64_t source_offset = 0) {
  ibv_sge sge{a.source.address() + source_offset, length, a.source.lkey()};
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = length > 0 ? &sge : nullptr;
  wr.num_sge = length > 0 ? 1 : 0;
  wr.opcode = opcode;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm_word);
  wr.wr.rdma.remote_addr = a.victim.address + ring_offset;
  wr.wr.rdma.rkey = a.victim.rkey;
  return a.qp.post_send(&wr).has_value();
}

bool write_imm(Attacker& a, uint64_t ring_offset, uint32_t length, uint32_t imm_word) {
  return post(a, IBV_WR_RDMA_WRITE_WITH_IMM, ring_offset, length, imm_word, ring_offset % kRing);
}

// Says how the attacker's own requests ended, for the record: the first
// error that is not a flush (once the victim resets, everything flushes).
void report_attacker_completions(Attacker& a, const char* name) {
  Deadline deadline(0.5);
  while (!deadline.expired()) {
    ibv_wc wc{};
    core::Result<int> n = a.cq.poll(&wc, 1);
    if (!n || n.value() == 0 || wc.wr_id != 1) continue;  // receives have wr_id 0
    if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR) {
      printf("%s:   (the attacker's request completed with: %s)\n", kProgram, ibv_wc_status_str(wc.status));
      return;
    }
  }
}

struct Case {
  const char* name;
  uint32_t valid_prefix;  // bytes of good DATA written before the attack
  uint32_t prefix_read;   // of which the victim reads this many (0: all)
  bool device_refuses;    // the victim's device rejects it: reset or nothing
  bool (*attack)(Attacker& a);
};

// Sends the valid prefix as one DATA write at offset 0 (it ends at `length`).
bool send_prefix(Attacker& a, uint32_t length) { return write_imm(a, 0, length, word(kData, length)); }

const Case kCases[] = {
    {"type 3 immediate", 0, 0, false, [](Attacker& a) { return write_imm(a, 0, 0, word(3, 5)); }},
    {"type 3 after valid data", 1000, 0, false, [](Attacker& a) { return write_imm(a, 1000, 0, word(3, 0)); }},
    {"zero-length DATA", 0, 0, false, [](Attacker& a) { return write_imm(a, 0, 0, word(kData, 0)); }},
    {"DATA longer than the bytes written", 0, 0, false,
     [](Attacker& a) { return write_imm(a, 0, 10, word(kData, 100)); }},
    {"DATA of 2^30-1 with no bytes", 0, 0, false,
     [](Attacker& a) { return write_imm(a, 0, 0, word(kData, (1u << 30) - 1)); }},
    {"DATA beyond credit (ring full, then more)", 0, 0, false,
     [](Attacker& a) {
       // 60000 + 5536 fill the 64 KiB ring exactly (legal); 4464 more at the
       // ring's start are bytes the writer never had credit for.
       return write_imm(a, 0, 60000, word(kData, 60000)) && write_imm(a, 60000, 5536, word(kData, 65536)) &&
              write_imm(a, 0, 4464, word(kData, 70000));
     }},
    {"DATA into consumed but uncredited space", 60000, 1000, false,
     [](Attacker& a) {
       // The victim read 1000 of 60000 bytes and (under a quarter ring, writer
       // not stalled) has not credited them. The writer writes 5000 of its
       // 5536 bytes of credit, then 1000: more than its credit (536), less
       // than the ring's free space (1536). Not filling the credit exactly
       // keeps the victim from returning credit in between.
       return write_imm(a, 60000, 5000, word(kData, 65000)) && write_imm(a, 0, 1000, word(kData, 66000));
     }},
    // The same DATA immediate twice (what a device that delivers one twice
    // shows): the second ends where the ring already stands, a write of
    // nothing, yet it carries bytes.
    {"DATA delivered twice", 1000, 0, false,
     [](Attacker& a) { return write_imm(a, 0, 1000, word(kData, 1000)); }},
    {"CREDIT with nothing in flight", 0, 0, false, [](Attacker& a) { return write_imm(a, 0, 0, word(kCredit, 100)); }},
    {"zero CREDIT", 0, 0, false, [](Attacker& a) { return write_imm(a, 0, 0, word(kCredit, 0)); }},
    {"CONTROL with unknown code 7", 0, 0, false, [](Attacker& a) { return write_imm(a, 0, 0, word(kControl, 7)); }},
    {"DATA after FIN", 0, 0, false,
     [](Attacker& a) { return write_imm(a, 0, 0, word(kControl, 1)) && write_imm(a, 0, 10, word(kData, 10)); }},
    {"second FIN", 0, 0, false,
     [](Attacker& a) { return write_imm(a, 0, 0, word(kControl, 1)) && write_imm(a, 0, 0, word(kControl, 1)); }},
    {"FIN with a payload", 0, 0, false, [](Attacker& a) { return write_imm(a, 0, 8, word(kControl, 1)); }},
    // Two SENDs (Bound or Switch, then Revert) may wait untaken; these are not.
    {"third SEND before the first two were taken", 0, 0, false,
     [](Attacker& a) {
       return post(a, IBV_WR_SEND, 0, 16, 0) && post(a, IBV_WR_SEND, 0, 16, 0) && post(a, IBV_WR_SEND, 0, 16, 0);
     }},
    {"zero-length SEND", 0, 0, false, [](Attacker& a) { return post(a, IBV_WR_SEND, 0, 0, 0); }},
    {"SEND longer than a receive's slot", 0, 0, false,
     [](Attacker& a) {
       return post(a, IBV_WR_SEND, 0, static_cast<uint32_t>(sock::StreamChannel::kControlMessageMax) + 1, 0);
     }},
    {"zero-length SEND WITH IMMEDIATE", 0, 0, false,
     [](Attacker& a) { return post(a, IBV_WR_SEND_WITH_IMM, 0, 0, word(kData, 1)); }},
    {"RDMA WRITE past the ring's end", 0, 0, true, [](Attacker& a) { return post(a, IBV_WR_RDMA_WRITE, kRing, 64, 0); }},
    {"RDMA WRITE straddling the ring's end", 0, 0, true,
     [](Attacker& a) { return post(a, IBV_WR_RDMA_WRITE, kRing - 32, 64, 0); }},
    {"RDMA READ of the ring", 0, 0, true, [](Attacker& a) { return post(a, IBV_WR_RDMA_READ, 0, 64, 0); }},
};

int run_victim(int fd, const rdma::Device& device, const Case& c) {
  sock::StreamConfig config;
  config.ring_size = kRing;
  config.sq_depth = 32;
  config.rq_depth = 32;
  auto made = connect_stream(fd, device, config, kProgram);
  if (!made) return 1;
  sock::StreamChannel& ch = made.value();
  Deadline deadline(20);
  char verdict = 'n';
  if (c.valid_prefix > 0) {
    uint32_t length = c.prefix_read != 0 ? c.prefix_read : c.valid_prefix;
    std::vector<uint8_t> buffer(length);
    if (!read_exact(ch, buffer.data(), length, deadline) || check_stream(buffer.data(), length, kSeed, 0) != length) {
      fprintf(stderr, "%s: %s: the valid prefix was not delivered intact\n", kProgram, c.name);
      return 1;
    }
  }
  if (!send_all(fd, "g", 1, kSyncTimeoutMs)) return 1;  // go: attack now
  double start = now_seconds();
  // Wait (bounded) for the channel to notice; a refused request may leave
  // it healthy. Nothing is read meanwhile: consuming would return credit
  // and could make a later write of the attack legal.
  Deadline notice(c.device_refuses ? 3.0 : 10.0);
  auto never = [](const sock::StreamChannel&) { return false; };  // only an error ends the wait
  while (ch.error() == 0 && !notice.expired()) {
    core::Result<bool> waited = sock::wait_until(ch, never, notice.remaining_ms(500), spin_us());
    if (!waited && waited.error() != EINTR) break;
  }
  double elapsed = now_seconds() - start;
  bool reset = ch.error() == ECONNRESET;
  if (reset) {
    uint8_t byte;
    core::Result<size_t> r = ch.read(&byte, 1);
    core::Result<size_t> w = ch.write("x", 1);
    if (r || r.error() != ECONNRESET || w || w.error() != ECONNRESET || ch.readable_bytes() != 0) {
      fprintf(stderr, "%s: %s: failed channel does not report ECONNRESET on read and write\n", kProgram, c.name);
      return 1;
    }
    printf("%s: %-42s -> ECONNRESET after %.1f ms (%s)\n", kProgram, c.name, elapsed * 1e3, ch.failure());
    verdict = 'r';
  } else if (c.device_refuses && ch.error() == 0) {
    // Still healthy: it must still work.
    if (!write_all(ch, "ok", 2, deadline)) return 1;
    printf("%s: %-42s -> refused by the device; the victim stays healthy\n", kProgram, c.name);
    verdict = 'h';
  } else {
    fprintf(stderr, "%s: %s: victim did not reset (error %d: %s)\n", kProgram, c.name, ch.error(), ch.failure());
    return 1;
  }
  if (!send_all(fd, &verdict, 1, kSyncTimeoutMs)) return 1;
  return barrier(fd, kSyncTimeoutMs) ? 0 : 1;
}

int run_attacker(int fd, const rdma::Device& device, const Case& c) {
  Attacker a;
  if (attacker_connect(fd, device, a) != 0) return 1;
  if (c.valid_prefix > 0 && !send_prefix(a, c.valid_prefix)) return 1;
  char go = 0, verdict = 0;
  if (!recv_all(fd, &go, 1, kSyncTimeoutMs)) return 1;
  if (!c.attack(a)) {
    fprintf(stderr, "%s: %s: could not post the attack\n", kProgram, c.name);
    return 1;
  }
  if (!recv_all(fd, &verdict, 1, kSyncTimeoutMs)) return 1;
  if (verdict == 'h') {  // the victim stayed healthy and wrote "ok": see it arrive
    Deadline deadline(5.0);
    ibv_wc wc{};
    while (!deadline.expired()) {
      core::Result<int> n = a.cq.poll(&wc, 1);
      if (n && n.value() == 1 && (wc.opcode & IBV_WC_RECV) && wc.status == IBV_WC_SUCCESS) break;
    }
  }
  report_attacker_completions(a, c.name);
  return barrier(fd, kSyncTimeoutMs) ? 0 : 1;
}

int run(int fd, int role) {
  int exit_code = 0;
  core::Result<rdma::Device> device = open_test_device(kProgram, &exit_code);
  if (!device) return exit_code;
  for (const Case& c : kCases) {
    int rc = role == 0 ? run_victim(fd, device.value(), c) : run_attacker(fd, device.value(), c);
    if (rc != 0) return rc;
  }
  if (role == 0) printf("%s: OK: %zu hostile cases, no crash, no hang\n", kProgram, sizeof kCases / sizeof kCases[0]);
  return 0;
}

}  // namespace
}  // namespace vsock::test

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  return vsock::test::run_pair([](int fd) { return vsock::test::run(fd, 0); },
                               [](int fd) { return vsock::test::run(fd, 1); }, 60);
}
