// rdma_rc_pingpong: two processes connect RC queue pairs through src/rdma
// and ping-pong messages of 1 B .. 64 KiB, first with SEND/RECV, then with
// RDMA WRITE WITH IMMEDIATE into the peer's registered buffer. Every byte of
// every message is checked; the exit status is 0 only if all of them were
// right. Prints round trips and microseconds per round trip.
//
// Usage: rdma_rc_pingpong [ITERATIONS]  (for the small sizes; default 1000)
#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rdma/completion_queue.hpp"
#include "rdma/device.hpp"
#include "rdma/memory_region.hpp"
#include "rdma/protection_domain.hpp"
#include "rdma/rc_queue_pair.hpp"
#include "test_support.hpp"

namespace vsock::test {
namespace {

constexpr const char* kProgram = "rdma_rc_pingpong";
constexpr size_t kBufferSize = 64 * 1024;
constexpr int kSetupTimeoutMs = 20000;
constexpr double kStepTimeoutS = 10.0;  // per message; TCG is slow, not that slow

enum class Mode { kSend, kWriteImm };
const char* mode_name(Mode mode) { return mode == Mode::kSend ? "send/recv" : "write_imm"; }

struct Hello {
  rdma::QpEndpoint endpoint;
  uint64_t buffer_address;
  uint32_t buffer_rkey;
  uint32_t buffer_size;
};

// Declaration order is teardown order reversed: the QP goes first, then the
// buffers, the CQ, the PD and the device.
struct Side {
  rdma::Device device;
  rdma::ProtectionDomain pd;
  rdma::CompletionQueue cq;
  rdma::MemoryRegion send_buffer;
  rdma::MemoryRegion recv_buffer;
  rdma::RcQueuePair qp;
  Hello peer{};
  int outstanding_sends = 0;
  bool recv_ready = false;
  ibv_wc last_recv{};
};

// Opens everything, swaps Hellos over the socketpair, connects. 0 or exit code.
int set_up(Side& side, int fd) {
  int exit_code = 0;
  core::Result<rdma::Device> device = open_test_device(kProgram, &exit_code);
  if (!device) return exit_code;
  side.device = std::move(device.value());
  auto pd = rdma::ProtectionDomain::create(side.device);
  if (!pd) return 1;
  side.pd = std::move(pd.value());
  auto cq = rdma::CompletionQueue::create(side.device, 256, true);
  if (!cq) return 1;
  side.cq = std::move(cq.value());
  auto send_buffer = rdma::MemoryRegion::allocate(side.pd, kBufferSize, IBV_ACCESS_LOCAL_WRITE);
  auto recv_buffer =
      rdma::MemoryRegion::allocate(side.pd, kBufferSize, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!send_buffer || !recv_buffer) return 1;
  side.send_buffer = std::move(send_buffer.value());
  side.recv_buffer = std::move(recv_buffer.value());
  rdma::RcQpConfig config;
  config.max_send_wr = 16;
  config.max_recv_wr = 16;
  config.max_inline_data = 64;
  config.remote_access = IBV_ACCESS_REMOTE_WRITE;
  auto qp = rdma::RcQueuePair::create(side.device, side.pd, side.cq, side.cq, config);
  if (!qp) return 1;
  side.qp = std::move(qp.value());

  uint32_t psn = rdma::random_psn();
  Hello mine{side.qp.local_endpoint(psn), side.recv_buffer.address(), side.recv_buffer.rkey(),
             static_cast<uint32_t>(side.recv_buffer.size())};
  if (!send_all(fd, &mine, sizeof mine, kSetupTimeoutMs) || !recv_all(fd, &side.peer, sizeof side.peer, kSetupTimeoutMs)) {
    fprintf(stderr, "%s: QP info exchange failed\n", kProgram);
    return 1;
  }
  if (!side.qp.connect(side.peer.endpoint, psn)) return 1;
  return 0;
}

bool post_recv(Side& side) {
  ibv_sge sge{side.recv_buffer.address(), static_cast<uint32_t>(kBufferSize), side.recv_buffer.lkey()};
  ibv_recv_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return side.qp.post_recv(&wr).has_value();
}

bool post_message(Side& side, Mode mode, uint32_t size, uint32_t sequence) {
  ibv_sge sge{side.send_buffer.address(), size, side.send_buffer.lkey()};
  ibv_send_wr wr{};
  wr.wr_id = 2;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED | (size <= side.qp.max_inline_data() ? IBV_SEND_INLINE : 0);
  if (mode == Mode::kSend) {
    wr.opcode = IBV_WR_SEND;
  } else {
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.imm_data = htonl(sequence);
    wr.wr.rdma.remote_addr = side.peer.buffer_address;
    wr.wr.rdma.rkey = side.peer.buffer_rkey;
  }
  if (!side.qp.post_send(&wr)) return false;
  ++side.outstanding_sends;
  return true;
}

// Takes completions until a receive is there (need_recv) or until every
// send has completed (!need_recv).
bool pump(Side& side, bool need_recv) {
  Deadline deadline(kStepTimeoutS);
  for (int taken = 0; taken < 64; ++taken) {
    if (need_recv ? side.recv_ready : side.outstanding_sends == 0) return true;
    ibv_wc wc{};
    if (!wait_completion(side.cq, &wc, deadline, need_recv ? "a message" : "a send")) return false;
    if (wc.opcode & IBV_WC_RECV) {
      side.last_recv = wc;
      side.recv_ready = true;
    } else {
      --side.outstanding_sends;
    }
  }
  return false;
}

uint64_t seed_for(Mode mode, uint32_t size, int role) {
  return (static_cast<uint64_t>(mode == Mode::kSend ? 1 : 2) << 40) | (uint64_t{size} << 8) | static_cast<uint64_t>(role);
}

// Takes the pending receive and checks it: opcode, length, immediate, bytes.
bool check_received(Side& side, Mode mode, uint32_t size, uint32_t sequence, int sender_role) {
  side.recv_ready = false;
  const ibv_wc& wc = side.last_recv;
  bool ok = true;
  if (mode == Mode::kSend && wc.opcode != IBV_WC_RECV) ok = false;
  if (mode == Mode::kWriteImm &&
      (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != sequence))
    ok = false;
  if (wc.byte_len != size) ok = false;
  if (!ok) {
    fprintf(stderr, "%s: %s %u B #%u: bad completion (opcode %d, byte_len %u, imm %u)\n", kProgram,
            mode_name(mode), size, sequence, wc.opcode, wc.byte_len, ntohl(wc.imm_data));
    return false;
  }
  size_t bad = find_mismatch(side.recv_buffer.data(), size, seed_for(mode, size, sender_role), uint64_t{sequence} << 20);
  if (bad != size) {
    fprintf(stderr, "%s: %s %u B #%u: byte %zu is wrong\n", kProgram, mode_name(mode), size, sequence, bad);
    return false;
  }
  return post_recv(side);
}

bool send_message(Side& side, Mode mode, uint32_t size, uint32_t sequence, int role) {
  if (!pump(side, false)) return false;  // the send buffer is free again
  fill_pattern(side.send_buffer.data(), size, seed_for(mode, size, role), uint64_t{sequence} << 20);
  return post_message(side, mode, size, sequence);
}

struct Round {
  uint32_t size;
  int iterations;
};

long read_counter(const Side& side, const char* name) {
  char path[256];
  snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%u/hw_counters/%s", side.device.name().c_str(),
           side.device.port(), name);
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  long value = -1;
  if (fscanf(f, "%ld", &value) != 1) value = -1;
  fclose(f);
  return value;
}

// role 0 pings and measures; role 1 answers each ping with a pong.
int run(int fd, int role, int small_iterations) {
  Side side;
  int rc = set_up(side, fd);
  if (rc != 0) return rc;
  if (!post_recv(side) || !barrier(fd, kSetupTimeoutMs)) return 1;  // both receives are posted
  const Round rounds[] = {{1, small_iterations},      {64, small_iterations},     {1024, small_iterations / 2},
                          {4096, small_iterations / 4}, {65536, small_iterations / 10}};
  long packets_before = read_counter(side, "sent_pkts");
  uint64_t total_trips = 0, total_bytes = 0;
  for (Mode mode : {Mode::kSend, Mode::kWriteImm}) {
    for (const Round& round : rounds) {
      int iterations = round.iterations > 0 ? round.iterations : 1;
      double start = now_seconds();
      for (int i = 0; i < iterations; ++i) {
        uint32_t sequence = static_cast<uint32_t>(i);
        if (role == 0) {
          if (!send_message(side, mode, round.size, sequence, role) || !pump(side, true) ||
              !check_received(side, mode, round.size, sequence, 1))
            return 1;
        } else {
          if (!pump(side, true) || !check_received(side, mode, round.size, sequence, 0) ||
              !send_message(side, mode, round.size, sequence, role))
            return 1;
        }
      }
      if (!pump(side, false)) return 1;
      double elapsed = now_seconds() - start;
      total_trips += static_cast<uint64_t>(iterations);
      total_bytes += 2ull * iterations * round.size;
      if (role == 0)
        printf("%s: %-9s %6u B: %5d round trips, %8.1f us per round trip, %7.1f MB/s\n", kProgram, mode_name(mode),
               round.size, iterations, elapsed * 1e6 / iterations, 2.0 * iterations * round.size / elapsed / 1e6);
      // Both sides finish a round before the next one reuses the receive buffer.
      if (!barrier(fd, kSetupTimeoutMs)) return 1;
    }
  }
  long packets_after = read_counter(side, "sent_pkts");
  if (role == 0) {
    printf("%s: waits poll for %.0f us, then sleep on the completion channel\n", kProgram, spin_budget_seconds() * 1e6);
    printf("%s: OK: %llu round trips, %llu bytes verified", kProgram, static_cast<unsigned long long>(total_trips),
           static_cast<unsigned long long>(total_bytes));
    if (packets_before >= 0 && packets_after >= 0) printf(", %s sent_pkts +%ld", side.device.name().c_str(), packets_after - packets_before);
    printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace vsock::test

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  int iterations = argc > 1 ? atoi(argv[1]) : 1000;
  if (iterations < 10 || iterations > 1000000) {
    fprintf(stderr, "usage: %s [ITERATIONS (10..1000000)]\n", argv[0]);
    return 2;
  }
  using vsock::test::run;
  return vsock::test::run_pair([&](int fd) { return run(fd, 0, iterations); },
                               [&](int fd) { return run(fd, 1, iterations); }, 60);
}
