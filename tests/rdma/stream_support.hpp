// Helpers shared by the stream tests (rdma_stream_*): connecting two
// StreamChannels over the test socketpair the way rc_pingpong connects
// raw queue pairs, a fast position-dependent byte pattern, a checksum, and
// bounded blocking reads and writes on top of sock::wait_until().
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"
#include "rdma/device.hpp"
#include "rdma/rc_queue_pair.hpp"
#include "rdma/remote_ring.hpp"
#include "sock/stream/stream_channel.hpp"
#include "sock/stream/stream_config.hpp"
#include "test_support.hpp"

namespace vsock::test {

// What each side sends the other before connecting.
struct StreamHello {
  rdma::QpEndpoint endpoint;
  rdma::RingDescriptor ring;
};

// Creates a channel, swaps StreamHellos over `fd` and connects. Prints why
// on failure.
core::Result<sock::StreamChannel> connect_stream(int fd, const rdma::Device& device, const sock::StreamConfig& config,
                                                 const char* program);

// The same steps without start(): the queue pair is in RTS with its
// receives posted, and *peer_ring is the ring the peer announced (a server
// learns it from the client's Switch instead). Messages and DATA may arrive
// before start(). The peer may be in RESET or INIT still: callers that send
// at once call barrier() first.
core::Result<sock::StreamChannel> connect_stream_unstarted(int fd, const rdma::Device& device,
                                                           const sock::StreamConfig& config, const char* program,
                                                           rdma::RingDescriptor* peer_ring);

// The spin budget of the waits, from VSOCK_TEST_SPIN_US (default 50 us),
// the same knob the raw rdma tests use.
uint32_t spin_us();
// Overrides it (a profile's own spin_us); -1 goes back to the environment.
void set_spin_us(int64_t us);

// A pattern that depends on the stream (seed) and on the byte's position,
// computed eight bytes at a time (checking 64 MiB under TCG emulation must
// not take longer than moving it).
void fill_stream(uint8_t* data, size_t len, uint64_t seed, uint64_t position);
// Index of the first byte that is not the pattern, or len.
size_t check_stream(const uint8_t* data, size_t len, uint64_t seed, uint64_t position);

// Order-dependent 64-bit checksum of a byte stream fed in any pieces.
class StreamChecksum {
 public:
  void update(const uint8_t* data, size_t len);
  uint64_t value() const;

 private:
  uint64_t hash_ = 0xcbf29ce484222325ull;
  uint64_t word_ = 0;
  unsigned filled_ = 0;
  uint64_t length_ = 0;
};

// Blocking on a channel, bounded by the deadline: false (and a message) on
// timeout or a channel error.
bool write_all(sock::StreamChannel& channel, const void* data, size_t len, const Deadline& deadline);
bool read_exact(sock::StreamChannel& channel, void* data, size_t len, const Deadline& deadline);
// Waits until the peer's FIN (read returns 0); false on data, error or timeout.
bool expect_eof(sock::StreamChannel& channel, const Deadline& deadline);
// Waits until everything written and the FIN have been acknowledged.
bool wait_all_sent(sock::StreamChannel& channel, const Deadline& deadline);

void print_counters(const char* program, const char* label, const sock::StreamChannel& channel);

}  // namespace vsock::test
