#include "stream_support.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "sock/stream/stream_wait.hpp"

namespace vsock::test {
namespace {

constexpr int kSetupTimeoutMs = 20000;

uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ull;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dull;
  return x ^ (x >> 33);
}

uint64_t block(uint64_t seed, uint64_t index) { return mix(seed * 0x9E3779B97F4A7C15ull + index); }

}  // namespace

namespace {

// Creates a channel and swaps StreamHellos; *psn is ours.
core::Result<sock::StreamChannel> create_and_greet(int fd, const rdma::Device& device,
                                                   const sock::StreamConfig& config, const char* program,
                                                   uint32_t* psn, StreamHello* peer) {
  using R = core::Result<sock::StreamChannel>;
  core::Result<sock::StreamChannel> made = sock::StreamChannel::create(device, config);
  if (!made) {
    fprintf(stderr, "%s: StreamChannel::create: %s\n", program, strerror(made.error()));
    return made;
  }
  sock::StreamChannel& channel = made.value();
  *psn = rdma::random_psn();
  StreamHello mine{channel.local_endpoint(*psn), channel.local_ring()};
  if (!send_all(fd, &mine, sizeof mine, kSetupTimeoutMs) || !recv_all(fd, peer, sizeof *peer, kSetupTimeoutMs)) {
    fprintf(stderr, "%s: hello exchange failed\n", program);
    return R::fail(EPIPE);
  }
  return made;
}

}  // namespace

core::Result<sock::StreamChannel> connect_stream(int fd, const rdma::Device& device, const sock::StreamConfig& config,
                                                 const char* program) {
  using R = core::Result<sock::StreamChannel>;
  uint32_t psn = 0;
  StreamHello peer{};
  core::Result<sock::StreamChannel> made = create_and_greet(fd, device, config, program, &psn, &peer);
  if (!made) return made;
  rdma::Status connected = made.value().connect(peer.endpoint, psn, peer.ring);
  if (!connected) {
    fprintf(stderr, "%s: StreamChannel::connect: %s\n", program, strerror(connected.error()));
    return R::fail(connected.error());
  }
  return made;
}

core::Result<sock::StreamChannel> connect_stream_unstarted(int fd, const rdma::Device& device,
                                                           const sock::StreamConfig& config, const char* program,
                                                           rdma::RingDescriptor* peer_ring) {
  using R = core::Result<sock::StreamChannel>;
  uint32_t psn = 0;
  StreamHello peer{};
  core::Result<sock::StreamChannel> made = create_and_greet(fd, device, config, program, &psn, &peer);
  if (!made) return made;
  sock::StreamChannel& channel = made.value();
  rdma::Status step = channel.queue_pair().to_init();
  if (step) step = channel.post_initial_receives();
  if (step) step = channel.queue_pair().to_rtr(peer.endpoint);
  if (step) step = channel.queue_pair().to_rts(psn);
  if (!step) {
    fprintf(stderr, "%s: connecting the queue pair: %s\n", program, strerror(step.error()));
    return R::fail(step.error());
  }
  *peer_ring = peer.ring;
  return made;
}

namespace {
int64_t spin_override = -1;
}  // namespace

uint32_t spin_us() {
  if (spin_override >= 0) return static_cast<uint32_t>(spin_override);
  return static_cast<uint32_t>(spin_budget_seconds() * 1e6 + 0.5);
}

void set_spin_us(int64_t us) { spin_override = us; }

void fill_stream(uint8_t* data, size_t len, uint64_t seed, uint64_t position) {
  size_t i = 0;
  while (i < len) {
    uint64_t p = position + i;
    uint64_t word = block(seed, p >> 3);
    unsigned from = static_cast<unsigned>(p & 7);
    size_t take = 8 - from < len - i ? 8 - from : len - i;
    for (size_t k = 0; k < take; ++k) data[i + k] = static_cast<uint8_t>(word >> (8 * (from + k)));
    i += take;
  }
}

size_t check_stream(const uint8_t* data, size_t len, uint64_t seed, uint64_t position) {
  uint8_t expected[4096];
  for (size_t done = 0; done < len;) {
    size_t n = len - done < sizeof expected ? len - done : sizeof expected;
    fill_stream(expected, n, seed, position + done);
    if (std::memcmp(expected, data + done, n) != 0) {
      for (size_t k = 0; k < n; ++k)
        if (expected[k] != data[done + k]) return done + k;
    }
    done += n;
  }
  return len;
}

void StreamChecksum::update(const uint8_t* data, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    word_ |= uint64_t{data[i]} << (8 * filled_);
    if (++filled_ == 8) {
      hash_ = (hash_ ^ word_) * 0x100000001b3ull;
      hash_ ^= hash_ >> 29;
      word_ = 0;
      filled_ = 0;
    }
  }
  length_ += len;
}

uint64_t StreamChecksum::value() const { return mix(hash_ ^ word_ ^ (length_ << 3)); }

namespace {

bool wait_for(sock::StreamChannel& channel, bool (*ready)(const sock::StreamChannel&), const Deadline& deadline,
              const char* what) {
  for (int round = 0; round < 100000; ++round) {
    if (ready(channel) || channel.error() != 0) return true;  // an error: the next call reports it
    int ms = deadline.remaining_ms(1000);
    if (ms == 0) break;
    core::Result<bool> waited = sock::wait_until(channel, ready, ms, spin_us());
    if (!waited && waited.error() != EINTR) {
      fprintf(stderr, "wait for %s: %s\n", what, strerror(waited.error()));
      return false;
    }
  }
  fprintf(stderr, "timeout waiting for %s\n", what);
  return false;
}

}  // namespace

bool write_all(sock::StreamChannel& channel, const void* data, size_t len, const Deadline& deadline) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    core::Result<size_t> n = channel.write(p, len);
    if (n) {
      p += n.value();
      len -= n.value();
      continue;
    }
    if (n.error() != EAGAIN) {
      fprintf(stderr, "write: %s (%s)\n", strerror(n.error()), channel.failure());
      return false;
    }
    if (!wait_for(channel, sock::is_writable, deadline, "room to write")) return false;
  }
  return true;
}

bool read_exact(sock::StreamChannel& channel, void* data, size_t len, const Deadline& deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (len > 0) {
    core::Result<size_t> n = channel.read(p, len);
    if (n && n.value() == 0) {
      fprintf(stderr, "read: unexpected end of stream (%zu bytes missing)\n", len);
      return false;
    }
    if (n) {
      p += n.value();
      len -= n.value();
      continue;
    }
    if (n.error() != EAGAIN) {
      fprintf(stderr, "read: %s (%s)\n", strerror(n.error()), channel.failure());
      return false;
    }
    if (!wait_for(channel, sock::is_readable, deadline, "data")) return false;
  }
  return true;
}

bool expect_eof(sock::StreamChannel& channel, const Deadline& deadline) {
  for (int round = 0; round < 100000; ++round) {
    uint8_t byte;
    core::Result<size_t> n = channel.read(&byte, 1);
    if (n) {
      if (n.value() == 0) return true;
      fprintf(stderr, "expected end of stream, got data\n");
      return false;
    }
    if (n.error() != EAGAIN) {
      fprintf(stderr, "expected end of stream: %s (%s)\n", strerror(n.error()), channel.failure());
      return false;
    }
    if (!wait_for(channel, sock::is_readable, deadline, "end of stream")) return false;
  }
  return false;
}

bool wait_all_sent(sock::StreamChannel& channel, const Deadline& deadline) {
  auto sent = [](const sock::StreamChannel& c) { return c.all_sent(); };
  return wait_for(channel, sent, deadline, "the FIN to be acknowledged") && channel.error() == 0;
}

void print_counters(const char* program, const char* label, const sock::StreamChannel& channel) {
  const sock::StreamCounters& c = channel.counters();
  printf("%s: %s: wrote %llu read %llu; data WRs %llu (inline %llu, split at ring end %llu), signalled %llu, "
         "post calls %llu; credits sent %llu received %llu; recv posts %llu; completions %llu; write EAGAIN %llu, "
         "SQ full %llu, corked %llu, probes %llu; messages sent %llu received %llu; ring grew %llu (refused %llu) to "
         "%llu, moved to the peer's %llu times\n",
         program, label, (unsigned long long)c.bytes_written, (unsigned long long)c.bytes_read,
         (unsigned long long)c.data_wrs, (unsigned long long)c.inline_wrs, (unsigned long long)c.ring_end_splits,
         (unsigned long long)c.signaled_wrs, (unsigned long long)c.post_calls, (unsigned long long)c.credits_sent,
         (unsigned long long)c.credits_received, (unsigned long long)c.recv_posts,
         (unsigned long long)c.completions, (unsigned long long)c.write_eagain, (unsigned long long)c.sq_full,
         (unsigned long long)c.corked, (unsigned long long)c.probes, (unsigned long long)c.messages_sent,
         (unsigned long long)c.messages_received, (unsigned long long)c.ring_grows,
         (unsigned long long)c.ring_grows_refused, (unsigned long long)channel.ring_capacity(),
         (unsigned long long)c.peer_ring_moves);
}

}  // namespace vsock::test
