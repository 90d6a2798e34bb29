// rdma_stream_duplex: two processes connect StreamChannels over rxe and
// stream in both directions at once, each from one thread with
// non-blocking calls: random write sizes and random read sizes from 1 B to
// 1 MiB through a small receive ring (64 KiB), so credit runs out all the
// time and nearly every write wraps the ring somewhere. Every byte is
// checked against a position-dependent pattern as it is read (a lost,
// duplicated or reordered byte is caught where it happens), both streams
// end with FIN and must deliver every byte before end-of-stream, and the
// checksums of what each side wrote and read are compared at the end.
//
// Three passes: "plain" (default-like queues, no autocork) with the full
// size; "cork" (autocork, 8-deep send queue, no inline) and "sparse"
// (8-deep send queue signalled less often than it is deep) with an eighth
// of it, to run the held-back-data and full-queue paths. Two more start
// with a 4 KiB ring that grows (x4) up to its ring_size while the stream
// runs, both sides at once (docs/protocol.md §3.1): "grow" as plain,
// "grow-cork" as cork (its RingGrow and RingMoved go from their slots, not
// inline); each side's ring must have grown and each writer moved.
//
// Usage: rdma_stream_duplex [MIB_EACH_WAY]  (default 64)
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "sock/stream/stream_wait.hpp"
#include "stream_support.hpp"

namespace vsock::test {
namespace {

constexpr const char* kProgram = "rdma_stream_duplex";
constexpr size_t kMaxIo = 1 << 20;
constexpr int kSetupTimeoutMs = 20000;
constexpr double kPassTimeoutS = 240.0;

struct Pass {
  const char* name;
  sock::StreamConfig config;
  uint64_t bytes_each_way;
};

// 1 B .. 1 MiB, log-uniform, so tiny and huge calls are both common.
size_t random_size(std::mt19937_64& random) {
  unsigned bits = static_cast<unsigned>(random() % 21);  // 2^0 .. 2^20
  size_t size = (size_t{1} << bits) + random() % (size_t{1} << bits);
  return size < kMaxIo ? size : kMaxIo;
}

struct Totals {
  uint64_t sent_checksum;
  uint64_t received_checksum;
  uint64_t received;
};

int run_pass(int fd, const rdma::Device& device, int role, const Pass& pass) {
  core::Result<sock::StreamChannel> made = connect_stream(fd, device, pass.config, kProgram);
  if (!made) return 1;
  sock::StreamChannel& channel = made.value();
  if (!barrier(fd, kSetupTimeoutMs)) return 1;

  const uint64_t my_seed = 0x5EED0000u + static_cast<uint64_t>(role) * 7919 + pass.bytes_each_way;
  const uint64_t peer_seed = 0x5EED0000u + static_cast<uint64_t>(1 - role) * 7919 + pass.bytes_each_way;
  std::mt19937_64 random(my_seed);
  std::vector<uint8_t> out(kMaxIo), in(kMaxIo);
  StreamChecksum sent_sum, received_sum;
  uint64_t sent = 0, received = 0, waits = 0, writes = 0, reads = 0;
  size_t chunk = 0, chunk_done = 0;  // the write in progress: out[chunk_done, chunk)
  bool shut = false, eof = false;
  Deadline deadline(kPassTimeoutS);
  double start = now_seconds();

  while (!(shut && eof)) {
    bool moved = false;
    if (!shut && chunk_done == chunk) {
      if (sent == pass.bytes_each_way) {
        if (!channel.shutdown_write()) {
          fprintf(stderr, "%s: %s: shutdown_write: %s\n", kProgram, pass.name, strerror(channel.error()));
          return 1;
        }
        shut = true;
        moved = true;
      } else {
        size_t size = random_size(random);
        if (size > pass.bytes_each_way - sent) size = static_cast<size_t>(pass.bytes_each_way - sent);
        fill_stream(out.data(), size, my_seed, sent);
        chunk = size;
        chunk_done = 0;
      }
    }
    if (!shut && chunk_done < chunk) {
      core::Result<size_t> n = channel.write(out.data() + chunk_done, chunk - chunk_done);
      if (n) {
        sent_sum.update(out.data() + chunk_done, n.value());
        chunk_done += n.value();
        sent += n.value();
        ++writes;
        moved = true;
      } else if (n.error() != EAGAIN) {
        fprintf(stderr, "%s: %s: write at %llu: %s (%s)\n", kProgram, pass.name, (unsigned long long)sent,
                strerror(n.error()), channel.failure());
        return 1;
      }
    }
    if (!eof) {
      size_t size = random_size(random);
      bool peek = random() % 16 == 0;  // now and then look first, then read the same bytes
      core::Result<size_t> n = channel.read(in.data(), size, peek);
      if (n && peek && n.value() > 0) n = channel.read(in.data(), n.value());
      if (n && n.value() == 0) {
        eof = true;
        moved = true;
        if (received != pass.bytes_each_way) {
          fprintf(stderr, "%s: %s: end of stream after %llu of %llu bytes\n", kProgram, pass.name,
                  (unsigned long long)received, (unsigned long long)pass.bytes_each_way);
          return 1;
        }
      } else if (n) {
        size_t bad = check_stream(in.data(), n.value(), peer_seed, received);
        if (bad != n.value()) {
          fprintf(stderr, "%s: %s: stream byte %llu is wrong (read of %zu at %llu)\n", kProgram, pass.name,
                  (unsigned long long)(received + bad), n.value(), (unsigned long long)received);
          return 1;
        }
        received_sum.update(in.data(), n.value());
        received += n.value();
        ++reads;
        moved = true;
      } else if (n.error() != EAGAIN) {
        fprintf(stderr, "%s: %s: read at %llu: %s (%s)\n", kProgram, pass.name, (unsigned long long)received,
                strerror(n.error()), channel.failure());
        return 1;
      }
    }
    if (moved) continue;
    if (deadline.expired()) {
      fprintf(stderr, "%s: %s: timeout: sent %llu, received %llu of %llu\n", kProgram, pass.name,
              (unsigned long long)sent, (unsigned long long)received, (unsigned long long)pass.bytes_each_way);
      print_counters(kProgram, pass.name, channel);
      return 1;
    }
    // End of stream stays readable: once it has been seen, only writing counts.
    bool want_read = !eof, want_write = !shut;
    auto ready = [want_read, want_write](const sock::StreamChannel& c) {
      return (want_read && c.readable()) || (want_write && c.writable());
    };
    core::Result<bool> waited = sock::wait_until(channel, ready, deadline.remaining_ms(1000), spin_us());
    if (!waited && waited.error() != EINTR) {
      fprintf(stderr, "%s: %s: wait: %s\n", kProgram, pass.name, strerror(waited.error()));
      return 1;
    }
    ++waits;
  }
  if (!wait_all_sent(channel, deadline)) return 1;
  double elapsed = now_seconds() - start;

  // Compare checksums: what I read must be what the peer wrote.
  Totals mine{sent_sum.value(), received_sum.value(), received}, theirs{};
  if (!send_all(fd, &mine, sizeof mine, kSetupTimeoutMs) || !recv_all(fd, &theirs, sizeof theirs, kSetupTimeoutMs))
    return 1;
  if (theirs.sent_checksum != mine.received_checksum || theirs.received_checksum != mine.sent_checksum ||
      theirs.received != sent) {
    fprintf(stderr, "%s: %s: checksum mismatch (sent %016llx, peer read %016llx; read %016llx, peer sent %016llx)\n",
            kProgram, pass.name, (unsigned long long)mine.sent_checksum, (unsigned long long)theirs.received_checksum,
            (unsigned long long)mine.received_checksum, (unsigned long long)theirs.sent_checksum);
    return 1;
  }
  const sock::StreamCounters& counters = channel.counters();
  if (pass.config.ring_initial != 0 &&
      (counters.ring_grows == 0 || counters.peer_ring_moves == 0 || channel.ring_capacity() != pass.config.ring_size)) {
    fprintf(stderr, "%s: %s: the rings did not grow to %llu: ours grew %llu times (now %llu), we moved %llu times\n",
            kProgram, pass.name, (unsigned long long)pass.config.ring_size, (unsigned long long)counters.ring_grows,
            (unsigned long long)channel.ring_capacity(), (unsigned long long)counters.peer_ring_moves);
    return 1;
  }
  if (pass.bytes_each_way >= 64 * channel.peer_ring_capacity() && channel.counters().ring_end_splits == 0) {
    // With random sizes over 64 ring-fulls, some write must have crossed
    // the ring's end; if none did, the test did not test what it says.
    fprintf(stderr, "%s: %s: no write was split at the ring's end\n", kProgram, pass.name);
    return 1;
  }
  printf("%s: %s (role %d): %llu B each way in %.2f s, %.2f MB/s each way; %llu writes, %llu reads, %llu waits; "
         "checksum %016llx\n",
         kProgram, pass.name, role, (unsigned long long)pass.bytes_each_way, elapsed,
         pass.bytes_each_way / elapsed / 1e6, (unsigned long long)writes, (unsigned long long)reads,
         (unsigned long long)waits, (unsigned long long)mine.sent_checksum);
  print_counters(kProgram, pass.name, channel);
  return barrier(fd, kSetupTimeoutMs) ? 0 : 1;
}

int run(int fd, int role, uint64_t mib) {
  int exit_code = 0;
  core::Result<rdma::Device> device = open_test_device(kProgram, &exit_code);
  if (!device) return exit_code;

  sock::StreamConfig plain;
  plain.ring_size = 64 << 10;
  plain.sq_depth = 64;
  plain.rq_depth = 64;
  plain.signal_every = 16;
  plain.inline_size = 128;
  plain.autocork = false;

  sock::StreamConfig cork = plain;
  cork.sq_depth = 8;
  cork.rq_depth = 16;
  cork.inline_size = 0;
  cork.signal_every = 64;  // the full queue forces signals instead
  cork.autocork = true;

  // Signals rarer than the send queue is deep, no autocork: only the
  // queue-full rule produces completions.
  sock::StreamConfig sparse = plain;
  sparse.sq_depth = 8;
  sparse.rq_depth = 16;
  sparse.signal_every = 64;
  sparse.inline_size = 0;

  sock::StreamConfig grow = plain;
  grow.ring_initial = 4 << 10;
  grow.ring_size = 1 << 20;
  sock::StreamConfig grow_cork = cork;
  grow_cork.ring_initial = 4 << 10;
  grow_cork.ring_size = 256 << 10;

  const Pass passes[] = {{"plain", plain, mib << 20},
                         {"cork", cork, (mib << 20) / 8},
                         {"sparse", sparse, (mib << 20) / 8},
                         {"grow", grow, (mib << 20) / 4},
                         {"grow-cork", grow_cork, (mib << 20) / 8}};
  for (const Pass& pass : passes)
    if (int rc = run_pass(fd, device.value(), role, pass); rc != 0) return rc;
  if (role == 0) printf("%s: OK\n", kProgram);
  return 0;
}

}  // namespace
}  // namespace vsock::test

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  long mib = argc > 1 ? atol(argv[1]) : 64;
  if (mib < 1 || mib > 4096) {
    fprintf(stderr, "usage: %s [MIB_EACH_WAY (1..4096)]\n", argv[0]);
    return 2;
  }
  auto size = static_cast<uint64_t>(mib);
  return vsock::test::run_pair([&](int fd) { return vsock::test::run(fd, 0, size); },
                               [&](int fd) { return vsock::test::run(fd, 1, size); }, 120);
}
