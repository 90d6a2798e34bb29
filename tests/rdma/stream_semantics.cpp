// rdma_stream_semantics: the socket-shaped behaviour of StreamChannel over
// rxe, one small case per connection (both processes run the cases in
// lockstep; role 0 is "A", role 1 is "B"):
//
//   peek_readv     writev of three pieces; FIONREAD; MSG_PEEK leaves the
//                  bytes; readv across two buffers; then EAGAIN
//   fin_after_held FIN goes after data autocork still holds, and after a
//                  transfer larger than the ring; write after shutdown is EPIPE
//   full_ring      a reader that does not read: the writer gets exactly one
//                  ring's worth, then EAGAIN; one byte consumed comes back
//                  as credit at once (the writer was stalled), not at the
//                  quarter-ring threshold
//   abort          abort() → the peer reads what came before, then read and write fail with ECONNRESET
//   probe          a liveness probe completes and is invisible to the peer
//   sparse_one_way a send queue signalled less often than it is deep keeps
//                  moving one-way traffic without help from the idle probe
//   not_started    a channel that is not connected: ENOTCONN, zero-length I/O
//
// Usage: rdma_stream_semantics
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sock/stream/stream_wait.hpp"
#include "stream_support.hpp"

namespace vsock::test {
namespace {

constexpr const char* kProgram = "rdma_stream_semantics";
constexpr int kSyncTimeoutMs = 20000;
constexpr uint64_t kRing = 64 << 10;

#define CHECK(cond)                                                                        \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      fprintf(stderr, "%s: %s (role %d): check failed at line %d: %s\n", kProgram, name, role, \
              __LINE__, #cond);                                                            \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

sock::StreamConfig base_config() {
  sock::StreamConfig config;
  config.ring_size = kRing;
  config.sq_depth = 32;
  config.rq_depth = 32;
  config.signal_every = 8;
  config.inline_size = 64;
  return config;
}

bool wait_readable(sock::StreamChannel& channel, int ms) {
  core::Result<bool> waited = sock::wait_until(channel, sock::is_readable, ms, spin_us());
  return waited && waited.value();
}

int case_peek_readv(int fd, const rdma::Device& device, int role) {
  const char* name = "peek_readv";
  auto made = connect_stream(fd, device, base_config(), kProgram);
  if (!made) return 1;
  sock::StreamChannel& ch = made.value();
  Deadline deadline(20);
  if (role == 0) {
    char a[] = "hel", b[] = "lo w", c[] = "orld";
    iovec iov[3] = {{a, 3}, {b, 4}, {c, 4}};
    core::Result<size_t> n = ch.write(iov, 3);
    CHECK(n && n.value() == 11);
  } else {
    CHECK(wait_readable(ch, 10000));
    // The whole writev is one write: all 11 bytes arrive together.
    CHECK(ch.readable_bytes() == 11);
    char peeked[5] = {};
    core::Result<size_t> n = ch.read(peeked, 5, true);
    CHECK(n && n.value() == 5 && memcmp(peeked, "hello", 5) == 0);
    CHECK(ch.readable_bytes() == 11);
    char x[4], y[20];
    iovec iov[2] = {{x, 4}, {y, 20}};
    n = ch.read(iov, 2, false);
    CHECK(n && n.value() == 11 && memcmp(x, "hell", 4) == 0 && memcmp(y, "o world", 7) == 0);
    CHECK(ch.readable_bytes() == 0);
    n = ch.read(x, 4);
    CHECK(!n && n.error() == EAGAIN);
    CHECK(!ch.readable());
  }
  return barrier(fd, kSyncTimeoutMs) ? 0 : 1;
}

int case_fin_after_held(int fd, const rdma::Device& device, int role) {
  const char* name = "fin_after_held";
  sock::StreamConfig config = base_config();
  config.autocork = true;
  auto made = connect_stream(fd, device, config, kProgram);
  if (!made) return 1;
  sock::StreamChannel& ch = made.value();
  Deadline deadline(60);
  constexpr size_t kSmall = 100, kSmallWrites = 50, kBig = 300 << 10;  // big: more than 4 rings
  const uint64_t seed = 0xF1;
  std::vector<uint8_t> data(kSmall * kSmallWrites + kBig);
  fill_stream(data.data(), data.size(), seed, 0);
  if (role == 0) {
    // Small writes back to back: autocork holds most of them behind the
    // first (signalled) one; shutdown_write must send them before the FIN.
    for (size_t i = 0; i < kSmallWrites; ++i) {
      core::Result<size_t> n = ch.write(data.data() + i * kSmall, kSmall);
      CHECK(n && n.value() == kSmall);
    }
    CHECK(ch.counters().corked > 0);
    CHECK(write_all(ch, data.data() + kSmall * kSmallWrites, kBig, deadline));  // waits for credit
    CHECK(ch.shutdown_write());
    core::Result<size_t> after = ch.write("x", 1);
    CHECK(!after && after.error() == EPIPE);
    CHECK(ch.writable());  // poll says writable so that the caller gets EPIPE
    CHECK(wait_all_sent(ch, deadline));
  } else {
    // Start late, so that the writer fills the ring and has to wait.
    usleep(200000);
    std::vector<uint8_t> got(data.size());
    CHECK(read_exact(ch, got.data(), got.size(), deadline));
    CHECK(check_stream(got.data(), got.size(), seed, 0) == got.size());
    CHECK(expect_eof(ch, deadline));
    core::Result<size_t> again = ch.read(got.data(), 1);
    CHECK(again && again.value() == 0);  // end of stream stays end of stream
    // Half-close: this direction still works after the peer's FIN.
    CHECK(write_all(ch, "back", 4, deadline));
  }
  if (role == 0) {
    char back[4];
    CHECK(read_exact(ch, back, 4, deadline) && memcmp(back, "back", 4) == 0);
  }
  return barrier(fd, kSyncTimeoutMs) ? 0 : 1;
}

int case_full_ring(int fd, const rdma::Device& device, int role) {
  const char* name = "full_ring";
  auto made = connect_stream(fd, device, base_config(), kProgram);
  if (!made) return 1;
  sock::StreamChannel& ch = made.value();
  Deadline deadline(30);
  std::vector<uint8_t> data(kRing * 2);
  fill_stream(data.data(), data.size(), 0xF0, 0);
  if (role == 0) {
    uint64_t accepted = 0;
    for (int attempt = 0; attempt < 1000; ++attempt) {
      core::Result<size_t> n = ch.write(data.data() + accepted, data.size() - accepted);
      if (!n) {
        CHECK(n.error() == EAGAIN);
        break;
      }
      accepted += n.value();
    }
    CHECK(accepted == kRing);  // exactly the peer's ring, then EAGAIN
    CHECK(!ch.writable());
    CHECK(barrier(fd, kSyncTimeoutMs));  // B reads one byte now
    // One byte consumed from a ring the writer had filled: the credit must
    // come at once, long before a quarter of the ring is consumed.
    core::Result<bool> waited = sock::wait_until(ch, sock::is_writable, 10000, spin_us());
    CHECK(waited && waited.value() && ch.error() == 0);
    CHECK(ch.write_space() == 1);
    core::Result<size_t> n = ch.write(data.data() + accepted, data.size() - accepted);
    CHECK(n && n.value() == 1);
    CHECK(barrier(fd, kSyncTimeoutMs));
  } else {
    CHECK(barrier(fd, kSyncTimeoutMs));
    CHECK(wait_readable(ch, 10000));
    // Wait until the whole ring has arrived (all of A's writes).
    for (int i = 0; i < 1000 && ch.readable_bytes() < kRing; ++i) sock::wait_until(ch, sock::is_readable, 10, 0);
    CHECK(ch.readable_bytes() == kRing);
    uint8_t first;
    CHECK(ch.read(&first, 1) && first == data[0]);
    CHECK(ch.counters().credits_sent == 1);
    CHECK(barrier(fd, kSyncTimeoutMs));
    std::vector<uint8_t> rest(kRing);
    CHECK(read_exact(ch, rest.data(), kRing, deadline));
    CHECK(check_stream(rest.data(), kRing, 0xF0, 1) == kRing);
  }
  return barrier(fd, kSyncTimeoutMs) ? 0 : 1;
}

int case_abort(int fd, const rdma::Device& device, int role) {
  const char* name = "abort";
  auto made = connect_stream(fd, device, base_config(), kProgram);
  if (!made) return 1;
  sock::StreamChannel& ch = made.value();
  Deadline deadline(20);
  if (role == 0) {
    CHECK(write_all(ch, "before the reset", 16, deadline));
    CHECK(ch.abort());
    core::Result<size_t> n = ch.write("x", 1);
    CHECK(!n && n.error() == ECONNRESET);
    char byte;
    n = ch.read(&byte, 1);
    CHECK(!n && n.error() == ECONNRESET);
  } else {
    // As after a TCP reset, what had arrived before it is still read
    // (the kernel keeps its receive queue), then the error.
    // The data comes before the RESET and makes the channel readable at
    // once, so wait by the clock (bounded: 20 s), not by wake-ups.
    for (int i = 0; i < 2000 && ch.error() == 0; ++i) {
      (void)ch.progress();
      if (ch.error() == 0) ::usleep(10000);
    }
    CHECK(ch.error() == ECONNRESET);
    CHECK(ch.readable() && ch.writable());  // poll reports the error as both
    char buffer[32];
    core::Result<size_t> n = ch.read(buffer, sizeof buffer);
    CHECK(n && n.value() == 16 && std::memcmp(buffer, "before the reset", 16) == 0);
    n = ch.read(buffer, sizeof buffer);
    CHECK(!n && n.error() == ECONNRESET);
    n = ch.write("x", 1);
    CHECK(!n && n.error() == ECONNRESET);
    CHECK(std::string(ch.failure()) == "reset by the peer");
  }
  return barrier(fd, kSyncTimeoutMs) ? 0 : 1;
}

int case_probe(int fd, const rdma::Device& device, int role) {
  const char* name = "probe";
  auto made = connect_stream(fd, device, base_config(), kProgram);
  if (!made) return 1;
  sock::StreamChannel& ch = made.value();
  Deadline deadline(20);
  if (role == 0) {
    CHECK(ch.probe());
    CHECK(ch.counters().probes == 1);
    CHECK(ch.probe());  // one is outstanding (or done): at most one more
    auto sent = [](const sock::StreamChannel& c) { return c.all_sent(); };
    for (int i = 0; i < 2000 && !ch.all_sent(); ++i) sock::wait_until(ch, sent, 10, 0);
    CHECK(ch.all_sent() && ch.error() == 0);
    CHECK(write_all(ch, "after", 5, deadline));
  } else {
    char buffer[5];
    CHECK(read_exact(ch, buffer, 5, deadline) && memcmp(buffer, "after", 5) == 0);
    CHECK(ch.counters().data_received == 1 && ch.counters().credits_received == 0);
  }
  return barrier(fd, kSyncTimeoutMs) ? 0 : 1;
}

// One-way traffic through an 8-deep send queue signalled every 64 requests
// (so only the reserve-line rule produces completions) and no credits of
// the writer's own to post: progress must never depend on the idle probe.
int case_sparse_one_way(int fd, const rdma::Device& device, int role) {
  const char* name = "sparse_one_way";
  sock::StreamConfig config = base_config();
  config.sq_depth = 8;
  config.rq_depth = 16;
  config.signal_every = 64;
  config.inline_size = 0;
  auto made = connect_stream(fd, device, config, kProgram);
  if (!made) return 1;
  sock::StreamChannel& ch = made.value();
  Deadline deadline(60);
  constexpr size_t kTotal = 512 << 10, kWrite = 1024;
  std::vector<uint8_t> data(kTotal);
  fill_stream(data.data(), data.size(), 0x5A, 0);
  if (role == 0) {
    for (size_t at = 0; at < kTotal; at += kWrite) CHECK(write_all(ch, data.data() + at, kWrite, deadline));
    CHECK(ch.shutdown_write() && wait_all_sent(ch, deadline));
    CHECK(ch.counters().probes == 0);
    CHECK(ch.counters().sq_full > 0);  // the queue did fill: the case tested what it says
  } else {
    std::vector<uint8_t> got(kTotal);
    CHECK(read_exact(ch, got.data(), got.size(), deadline));
    CHECK(check_stream(got.data(), got.size(), 0x5A, 0) == got.size());
    CHECK(expect_eof(ch, deadline));
  }
  return barrier(fd, kSyncTimeoutMs) ? 0 : 1;
}

int case_not_started(int fd, const rdma::Device& device, int role) {
  const char* name = "not_started";
  core::Result<sock::StreamChannel> made = sock::StreamChannel::create(device, base_config());
  CHECK(made);
  sock::StreamChannel& ch = made.value();
  char byte = 0;
  core::Result<size_t> n = ch.write(&byte, 1);
  CHECK(!n && n.error() == ENOTCONN);
  n = ch.read(&byte, 1);
  CHECK(!n && n.error() == ENOTCONN);
  CHECK(!ch.shutdown_write() && ch.shutdown_write().error() == ENOTCONN);
  CHECK(ch.start(rdma::RingDescriptor{}).error() == EINVAL);  // receives not posted yet
  sock::StreamConfig bad = base_config();
  bad.sq_depth = 2;
  CHECK(sock::StreamChannel::create(device, bad).error() == EINVAL);
  bad = base_config();
  bad.ring_size = 3000;
  CHECK(!sock::StreamChannel::create(device, bad));

  // Zero-length calls on a connected channel do nothing and succeed.
  auto connected = connect_stream(fd, device, base_config(), kProgram);
  if (!connected) return 1;
  sock::StreamChannel& live = connected.value();
  n = live.write(&byte, 0);
  CHECK(n && n.value() == 0);
  n = live.read(&byte, 0);
  CHECK(n && n.value() == 0);
  CHECK(live.write(static_cast<const iovec*>(nullptr), -1).value() == 0);

  // A peer may not choose how much we register to mirror its ring: one
  // declared above max_peer_ring (the profiles' largest; a 1 GiB one made
  // the server pin 1 GiB) is a protocol error, and nothing is registered.
  rdma::RingDescriptor peer{};
  auto unstarted = connect_stream_unstarted(fd, device, base_config(), kProgram, &peer);
  if (!unstarted) return 1;
  rdma::RingDescriptor huge = peer;
  huge.capacity = 1u << 30;
  CHECK(unstarted.value().start(huge).error() == EPROTO);
  huge.capacity = static_cast<uint32_t>(base_config().max_peer_ring * 2);
  CHECK(unstarted.value().start(huge).error() == EPROTO);
  CHECK(unstarted.value().start(peer));  // the peer's real ring: the same channel starts
  return barrier(fd, kSyncTimeoutMs) ? 0 : 1;
}

int run(int fd, int role) {
  int exit_code = 0;
  core::Result<rdma::Device> device = open_test_device(kProgram, &exit_code);
  if (!device) return exit_code;
  struct Case {
    const char* name;
    int (*run)(int, const rdma::Device&, int);
  };
  const Case cases[] = {{"peek_readv", case_peek_readv},   {"fin_after_held", case_fin_after_held},
                        {"full_ring", case_full_ring},     {"abort", case_abort},
                        {"probe", case_probe},             {"sparse_one_way", case_sparse_one_way},
                        {"not_started", case_not_started}};
  for (const Case& c : cases) {
    double start = now_seconds();
    if (c.run(fd, device.value(), role) != 0) return 1;
    if (role == 0) printf("%s: %-15s ok (%.2f s)\n", kProgram, c.name, now_seconds() - start);
  }
  if (role == 0) printf("%s: OK\n", kProgram);
  return 0;
}

}  // namespace
}  // namespace vsock::test

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  return vsock::test::run_pair([](int fd) { return vsock::test::run(fd, 0); },
                               [](int fd) { return vsock::test::run(fd, 1); }, 60);
}
