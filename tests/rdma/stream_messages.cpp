// rdma_stream_messages: the one two-sided message of each direction (the
// Switch, docs/protocol.md §2) on StreamChannel over rxe. Both processes
// run the cases in lockstep, a fresh connection each; role 0 is "A", role
// 1 is "B":
//
//   before_start   A (the client: started) sends its Switch and writes at
//                  once; B (the server: not started) takes the Switch,
//                  learns A's ring from it, and only then starts — the
//                  DATA that came right after the Switch is there, intact.
//                  Then B's Switch and data the other way.
//   ordered        both ways at once, inline on one side and through the
//                  send slot on the other: bytes written (and corked)
//                  before send_message() have all arrived when the message
//                  has; bytes written after it follow
//   invalid        0 bytes, more than kControlMessageMax, no data: EINVAL;
//                  a queue pair not in RTS: ENOTCONN; nothing there: EAGAIN;
//                  too small a buffer: EMSGSIZE; the send slot reused
//   two_messages   two messages before either was taken come out in order
//   second_message two messages before either was taken wait in the inbox
//                  (Switch, then Revert) and come out in order; a third
//                  one is a violation: the receiver resets the connection
//   recycle        rq_depth 16, 1000 small writes with a message after
//                  every 200: receives are re-posted many times over, and
//                  every message still arrives intact (its slot index is
//                  right)
//
// Usage: rdma_stream_messages
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sock/stream/stream_wait.hpp"
#include "sock/wire/switch_message.hpp"
#include "stream_support.hpp"

namespace vsock::test {
namespace {

constexpr const char* kProgram = "rdma_stream_messages";
constexpr int kSyncTimeoutMs = 20000;
constexpr uint64_t kRing = 64 << 10;
constexpr size_t kMax = sock::StreamChannel::kControlMessageMax;

#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      fprintf(stderr, "%s: %s (role %d): check failed at line %d: %s\n", kProgram, name, role, \
              __LINE__, #cond);                                                                \
      return 1;                                                                                \
    }                                                                                          \
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

// Waits (bounded) until `ready` holds or the channel fails; false on timeout.
template <class Ready>
bool wait_for(sock::StreamChannel& channel, Ready ready, const Deadline& deadline) {
  while (!ready(channel) && channel.error() == 0) {
    int ms = deadline.remaining_ms(1000);
    if (ms == 0) return false;
    core::Result<bool> waited = sock::wait_until(channel, ready, ms, spin_us());
    if (!waited && waited.error() != EINTR) return false;
  }
  return ready(channel);
}

bool wait_message(sock::StreamChannel& channel, const Deadline& deadline) {
  return wait_for(channel, [](const sock::StreamChannel& c) { return c.has_message(); }, deadline);
}

// send_message(), retried while the send slot or the queue is busy.
rdma::Status send_retrying(sock::StreamChannel& channel, const void* data, size_t length, const Deadline& deadline) {
  for (;;) {
    rdma::Status sent = channel.send_message(data, length);
    if (sent || sent.error() != EAGAIN || deadline.expired()) return sent;
    channel.progress();
  }
}

std::vector<uint8_t> encode_switch(uint64_t nonce, uint64_t tcp_bytes, const rdma::RingDescriptor& ring) {
  std::vector<uint8_t> bytes(sock::wire::kSwitchMessageSize);
  sock::wire::SwitchMessage message;
  message.nonce = nonce;
  message.tcp_bytes = tcp_bytes;
  message.ring = ring;
  sock::wire::encode(message, bytes.data());
  return bytes;
}

int case_before_start(int fd, const rdma::Device& device, int role) {
  const char* name = "before_start";
  constexpr uint64_t kNonce = 0x5EED5EED12345678ull;
  constexpr size_t kData = 1000;
  Deadline deadline(20);
  std::vector<uint8_t> got(kData);
  if (role == 0) {
    auto made = connect_stream(fd, device, base_config(), kProgram);
    if (!made) return 1;
    sock::StreamChannel& ch = made.value();
    CHECK(barrier(fd, kSyncTimeoutMs));  // B's receives are posted
    std::vector<uint8_t> mine = encode_switch(kNonce, 77, ch.local_ring());
    CHECK(ch.send_message(mine.data(), mine.size()));
    // Straight after the Switch, before B can have started.
    std::vector<uint8_t> data(kData);
    fill_stream(data.data(), kData, 0xA1, 0);
    CHECK(write_all(ch, data.data(), kData, deadline));
    CHECK(ch.counters().messages_sent == 1);

    CHECK(wait_message(ch, deadline));
    uint8_t theirs[kMax];
    core::Result<size_t> n = ch.take_message(theirs, sizeof theirs);
    CHECK(n && n.value() == sock::wire::kSwitchMessageSize);
    core::Result<sock::wire::SwitchMessage> parsed = sock::wire::parse_switch_message(theirs, n.value());
    CHECK(parsed && parsed.value().nonce == kNonce && parsed.value().tcp_bytes == 5);
    CHECK(read_exact(ch, got.data(), kData, deadline));
    CHECK(check_stream(got.data(), kData, 0xB1, 0) == kData);
    CHECK(ch.counters().messages_received == 1);
  } else {
    rdma::RingDescriptor announced{};
    auto made = connect_stream_unstarted(fd, device, base_config(), kProgram, &announced);
    if (!made) return 1;
    sock::StreamChannel& ch = made.value();
    CHECK(barrier(fd, kSyncTimeoutMs));
    CHECK(wait_message(ch, deadline));
    // The DATA behind the Switch lands in the ring before start() too.
    CHECK(wait_for(ch, [](const sock::StreamChannel& c) { return c.readable_bytes() == kData; }, deadline));
    CHECK(!ch.started() && ch.error() == 0);
    CHECK(ch.read(got.data(), kData).error() == ENOTCONN);

    uint8_t theirs[kMax];
    CHECK(ch.take_message(theirs, 10).error() == EMSGSIZE);
    CHECK(ch.has_message());  // a buffer too small leaves it there
    core::Result<size_t> n = ch.take_message(theirs, sizeof theirs);
    CHECK(n && n.value() == sock::wire::kSwitchMessageSize);
    CHECK(!ch.has_message());
    CHECK(ch.take_message(theirs, sizeof theirs).error() == EAGAIN);
    core::Result<sock::wire::SwitchMessage> parsed = sock::wire::parse_switch_message(theirs, n.value());
    CHECK(parsed && parsed.value().nonce == kNonce && parsed.value().tcp_bytes == 77);
    const rdma::RingDescriptor& ring = parsed.value().ring;
    CHECK(ring.address == announced.address && ring.rkey == announced.rkey && ring.capacity == announced.capacity);
    CHECK(ch.start(parsed.value().ring));
    CHECK(read_exact(ch, got.data(), kData, deadline));
    CHECK(check_stream(got.data(), kData, 0xA1, 0) == kData);
    CHECK(ch.counters().messages_received == 1);

    // Now the server's Switch, and data after it.
    std::vector<uint8_t> mine = encode_switch(kNonce, 5, ch.local_ring());
    CHECK(ch.send_message(mine.data(), mine.size()));
    std::vector<uint8_t> data(kData);
    fill_stream(data.data(), kData, 0xB1, 0);
    CHECK(write_all(ch, data.data(), kData, deadline));
  }
  return barrier(fd, kSyncTimeoutMs) ? 0 : 1;
}

int case_ordered(int fd, const rdma::Device& device, int role) {
  const char* name = "ordered";
  sock::StreamConfig config = base_config();
  config.autocork = true;
  // A's 64-byte message goes through the send slot, B's inline.
  config.inline_size = role == 0 ? 0 : 64;
  auto made = connect_stream(fd, device, config, kProgram);
  if (!made) return 1;
  sock::StreamChannel& ch = made.value();
  CHECK(role == 0 ? ch.inline_limit() == 0 : ch.inline_limit() >= kMax);
  CHECK(barrier(fd, kSyncTimeoutMs));
  Deadline deadline(20);
  constexpr size_t kPiece = 100, kBefore = 3, kAfter = 1;
  const uint64_t my_seed = 0x0D0 + role, peer_seed = 0x0D0 + (1 - role);
  std::vector<uint8_t> data((kBefore + kAfter) * kPiece);
  fill_stream(data.data(), data.size(), my_seed, 0);
  uint8_t message[kMax];
  fill_stream(message, kMax, my_seed, 1u << 20);

  for (size_t i = 0; i < kBefore; ++i) {
    core::Result<size_t> n = ch.write(data.data() + i * kPiece, kPiece);
    CHECK(n && n.value() == kPiece);
  }
  // Normally held back (autocork, the first piece's completion pending):
  // send_message must post it first. On a loaded host that completion can
  // be back before the second write, and nothing is held: the order below
  // is still checked, trivially kept.
  if (ch.counters().corked == 0)
    printf("%s: ordered (role %d): autocork held nothing this time (the first completion came back first)\n",
           kProgram, role);
  CHECK(ch.send_message(message, kMax));
  CHECK(write_all(ch, data.data() + kBefore * kPiece, kAfter * kPiece, deadline));

  CHECK(wait_message(ch, deadline));
  // Completions are handled in order: what was written before the message
  // is in the ring by the time the message is in the inbox.
  CHECK(ch.readable_bytes() >= kBefore * kPiece);
  uint8_t theirs[kMax];
  core::Result<size_t> n = ch.take_message(theirs, sizeof theirs);
  CHECK(n && n.value() == kMax);
  CHECK(check_stream(theirs, kMax, peer_seed, 1u << 20) == kMax);
  std::vector<uint8_t> got(data.size());
  CHECK(read_exact(ch, got.data(), got.size(), deadline));
  CHECK(check_stream(got.data(), got.size(), peer_seed, 0) == got.size());
  CHECK(ch.counters().messages_sent == 1 && ch.counters().messages_received == 1);
  // Autocork may still hold our last piece (its completion came while we
  // were not polling). At this layer only the owner progresses a channel
  // (the library's side band does it above): keep polling until the piece
  // is posted, or the peer waits for it while we wait in the barrier.
  CHECK(wait_for(ch, [](const sock::StreamChannel& c) { return c.held_bytes() == 0; }, deadline));
  return barrier(fd, kSyncTimeoutMs) ? 0 : 1;
}

int case_invalid(int fd, const rdma::Device& device, int role) {
  const char* name = "invalid";
  uint8_t buffer[kMax + 1] = {1, 2, 3};
  {
    // A queue pair in RESET: nothing may be posted, nothing has arrived.
    core::Result<sock::StreamChannel> fresh = sock::StreamChannel::create(device, base_config());
    CHECK(fresh);
    CHECK(fresh.value().send_message(buffer, 8).error() == ENOTCONN);
    CHECK(fresh.value().take_message(buffer, sizeof buffer).error() == EAGAIN);
    CHECK(fresh.value().error() == 0);
  }
  sock::StreamConfig config = base_config();
  config.inline_size = 0;  // every message through the send slot
  auto made = connect_stream(fd, device, config, kProgram);
  if (!made) return 1;
  sock::StreamChannel& ch = made.value();
  CHECK(barrier(fd, kSyncTimeoutMs));
  Deadline deadline(20);
  CHECK(ch.send_message(buffer, 0).error() == EINVAL);
  CHECK(ch.send_message(buffer, kMax + 1).error() == EINVAL);
  CHECK(ch.send_message(nullptr, 8).error() == EINVAL);
  CHECK(ch.error() == 0 && ch.counters().messages_sent == 0);
  if (role == 0) {
    // Two messages, the second once B has taken the first: the send slot
    // is reused once the first SEND has completed.
    for (uint8_t round = 1; round <= 2; ++round) {
      uint8_t message[kMax];
      memset(message, round, sizeof message);
      CHECK(send_retrying(ch, message, sizeof message, deadline));
      CHECK(barrier(fd, kSyncTimeoutMs));  // B took it
    }
    CHECK(ch.counters().messages_sent == 2);
  } else {
    for (uint8_t round = 1; round <= 2; ++round) {
      CHECK(wait_message(ch, deadline));
      uint8_t message[kMax];
      core::Result<size_t> n = ch.take_message(message, sizeof message);
      CHECK(n && n.value() == kMax);
      for (size_t i = 0; i < kMax; ++i) CHECK(message[i] == round);
      CHECK(barrier(fd, kSyncTimeoutMs));
    }
    CHECK(ch.error() == 0 && ch.counters().messages_received == 2);
  }
  return barrier(fd, kSyncTimeoutMs) ? 0 : 1;
}

// Switch then Revert may both arrive before either is taken: in order.
int case_two_messages(int fd, const rdma::Device& device, int role) {
  const char* name = "two_messages";
  auto made = connect_stream(fd, device, base_config(), kProgram);
  if (!made) return 1;
  sock::StreamChannel& ch = made.value();
  CHECK(barrier(fd, kSyncTimeoutMs));
  Deadline deadline(20);
  if (role == 0) {
    CHECK(ch.send_message("first", 5));
    CHECK(ch.send_message("second", 6));
  } else {
    auto two = [](const sock::StreamChannel& c) { return c.counters().messages_received == 2; };
    CHECK(wait_for(ch, two, deadline));
    uint8_t message[kMax];
    core::Result<size_t> got = ch.take_message(message, sizeof message);
    CHECK(got && got.value() == 5 && std::memcmp(message, "first", 5) == 0);
    got = ch.take_message(message, sizeof message);
    CHECK(got && got.value() == 6 && std::memcmp(message, "second", 6) == 0);
    CHECK(!ch.has_message() && ch.error() == 0);
  }
  return barrier(fd, kSyncTimeoutMs) ? 0 : 1;
}

int case_second_message(int fd, const rdma::Device& device, int role) {
  const char* name = "second_message";
  auto made = connect_stream(fd, device, base_config(), kProgram);
  if (!made) return 1;
  sock::StreamChannel& ch = made.value();
  CHECK(barrier(fd, kSyncTimeoutMs));
  Deadline deadline(20);
  if (role == 0) {
    CHECK(ch.send_message("first", 5));
    CHECK(ch.send_message("second", 6));
    CHECK(barrier(fd, kSyncTimeoutMs));  // B has both, untaken
    CHECK(ch.send_message("third", 5));  // legal to post; the peer refuses it
  } else {
    auto two = [](const sock::StreamChannel& c) { return c.counters().messages_received == 2; };
    CHECK(wait_for(ch, two, deadline));
    CHECK(ch.error() == 0);
    CHECK(barrier(fd, kSyncTimeoutMs));
    auto failed = [](const sock::StreamChannel& c) { return c.error() != 0; };
    CHECK(wait_for(ch, failed, deadline));
    CHECK(ch.error() == ECONNRESET);
    CHECK(std::string(ch.failure()) == "a message more than the inbox holds");
    CHECK(!ch.has_message());  // dropped with the connection
    uint8_t message[kMax];
    CHECK(ch.take_message(message, sizeof message).error() == ECONNRESET);
    CHECK(ch.send_message("x", 1).error() == ECONNRESET);
  }
  return barrier(fd, kSyncTimeoutMs) ? 0 : 1;
}

int case_recycle(int fd, const rdma::Device& device, int role) {
  const char* name = "recycle";
  sock::StreamConfig config = base_config();
  config.rq_depth = 16;
  config.inline_size = 48;  // 40-byte messages inline, 64-byte ones through the slot
  auto made = connect_stream(fd, device, config, kProgram);
  if (!made) return 1;
  sock::StreamChannel& ch = made.value();
  CHECK(barrier(fd, kSyncTimeoutMs));
  Deadline deadline(60);
  constexpr size_t kRounds = 5, kWritesPerRound = 200, kWrite = 10;
  const uint64_t seed = 0x5107;
  std::vector<uint8_t> data(kRounds * kWritesPerRound * kWrite + kWrite);
  fill_stream(data.data(), data.size(), seed, 0);
  for (size_t round = 0; round < kRounds; ++round) {
    const size_t length = round % 2 == 0 ? kMax : sock::wire::kSwitchMessageSize;
    uint8_t message[kMax];
    fill_stream(message, length, seed + 1 + round, 0);
    const uint8_t* piece = data.data() + round * kWritesPerRound * kWrite;
    if (role == 0) {
      for (size_t i = 0; i < kWritesPerRound; ++i) {
        CHECK(write_all(ch, piece + i * kWrite, kWrite, deadline));
        // As time passing would: completions free the send queue, so most
        // writes go out as a work request (and a receive) of their own.
        CHECK(ch.progress());
      }
      CHECK(send_retrying(ch, message, length, deadline));
    } else {
      std::vector<uint8_t> got(kWritesPerRound * kWrite);
      CHECK(read_exact(ch, got.data(), got.size(), deadline));
      CHECK(memcmp(got.data(), piece, got.size()) == 0);
      CHECK(wait_message(ch, deadline));
      uint8_t theirs[kMax];
      core::Result<size_t> n = ch.take_message(theirs, sizeof theirs);
      CHECK(n && n.value() == length);
      CHECK(memcmp(theirs, message, length) == 0);
    }
    CHECK(barrier(fd, kSyncTimeoutMs));  // the message was taken: the next one may come
  }
  // The stream goes on after the last message.
  const uint8_t* tail = data.data() + kRounds * kWritesPerRound * kWrite;
  if (role == 0) {
    CHECK(write_all(ch, tail, kWrite, deadline));
    CHECK(ch.counters().messages_sent == kRounds);
  } else {
    uint8_t got[kWrite];
    CHECK(read_exact(ch, got, kWrite, deadline) && memcmp(got, tail, kWrite) == 0);
    const sock::StreamCounters& c = ch.counters();
    CHECK(c.messages_received == kRounds);
    // Each receive slot went round many times (each post call re-posts at
    // most the 16 slots).
    CHECK(c.data_received + c.messages_received > 10 * config.rq_depth);
    CHECK(c.recv_posts > 10);
    print_counters(kProgram, "recycle, receiver", ch);
  }
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
  const Case cases[] = {{"before_start", case_before_start},
                        {"ordered", case_ordered},
                        {"invalid", case_invalid},
                        {"two_messages", case_two_messages},
                        {"second_message", case_second_message},
                        {"recycle", case_recycle}};
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
