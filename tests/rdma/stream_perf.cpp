// rdma_stream_perf: what StreamChannel costs, for the record. Two
// processes over rxe:
//   - ping-pong of 64 B messages (write, then wait for and read the reply),
//     mean and median round trip; waits spin (the default profile:
//     VSOCK_TEST_SPIN_US, 50 us, like rdma_rc_pingpong; the latency
//     profile: its own 2 ms) and then sleep on the completion channel;
//   - one-way streaming of 64 KiB writes read with 64 KiB reads, MB/s from
//     the first write to the reader's confirmation that it has everything
//     (each write starts with its index, checked by the reader);
// each with the default profile's settings and with the latency or
// throughput profile's. tests/rdma/stream_perf.sh runs rdma_rc_pingpong
// in the same VM first, for the raw verbs figures to compare with.
//
// Usage: rdma_stream_perf [ROUND_TRIPS] [STREAM_MIB]  (default 1000, 32)
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/settings.hpp"
#include "sock/stream/stream_wait.hpp"
#include "stream_support.hpp"

namespace vsock::test {
namespace {

constexpr const char* kProgram = "rdma_stream_perf";
constexpr int kSyncTimeoutMs = 20000;
constexpr size_t kMessage = 64;
constexpr size_t kStreamWrite = 64 << 10;

sock::StreamConfig profile_config(core::Profile profile) {
  core::Settings settings;
  core::apply_profile(&settings, profile);
  return sock::StreamConfig::from_settings(settings);
}

int ping_pong(int fd, const rdma::Device& device, int role, core::Profile profile, int round_trips) {
  auto made = connect_stream(fd, device, profile_config(profile), kProgram);
  if (!made) return 1;
  sock::StreamChannel& ch = made.value();
  if (!barrier(fd, kSyncTimeoutMs)) return 1;
  if (profile == core::Profile::kLatency) {
    core::Settings settings;
    core::apply_profile(&settings, profile);
    set_spin_us(settings.spin_us);
  }
  Deadline deadline(120);
  uint8_t message[kMessage];
  fill_stream(message, sizeof message, 64, 0);
  const int warmup = round_trips / 10;
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(round_trips));
  for (int i = 0; i < warmup + round_trips; ++i) {
    double start = now_seconds();
    if (role == 0) {
      if (!write_all(ch, message, sizeof message, deadline) || !read_exact(ch, message, sizeof message, deadline))
        return 1;
    } else {
      if (!read_exact(ch, message, sizeof message, deadline) || !write_all(ch, message, sizeof message, deadline))
        return 1;
    }
    if (i >= warmup) samples.push_back(now_seconds() - start);
  }
  if (check_stream(message, sizeof message, 64, 0) != sizeof message) {
    fprintf(stderr, "%s: ping-pong message corrupted\n", kProgram);
    return 1;
  }
  if (role == 0) {
    double sum = 0;
    for (double s : samples) sum += s;
    std::sort(samples.begin(), samples.end());
    printf("%s: ping-pong %zu B, %-10s profile: %d round trips, mean %8.1f us, p50 %8.1f us, p99 %8.1f us "
           "(spin %u us)\n",
           kProgram, kMessage, core::profile_name(profile), round_trips, sum / round_trips * 1e6,
           samples[samples.size() / 2] * 1e6, samples[samples.size() * 99 / 100] * 1e6, spin_us());
    print_counters(kProgram, "ping-pong", ch);
  }
  set_spin_us(-1);
  return barrier(fd, kSyncTimeoutMs) ? 0 : 1;
}

int stream(int fd, const rdma::Device& device, int role, core::Profile profile, uint64_t bytes) {
  auto made = connect_stream(fd, device, profile_config(profile), kProgram);
  if (!made) return 1;
  sock::StreamChannel& ch = made.value();
  if (!barrier(fd, kSyncTimeoutMs)) return 1;
  Deadline deadline(240);
  std::vector<uint8_t> buffer(kStreamWrite);
  const uint64_t writes = bytes / kStreamWrite;
  if (role == 0) {
    fill_stream(buffer.data(), buffer.size(), 65, 0);
    double start = now_seconds();
    for (uint64_t i = 0; i < writes; ++i) {
      memcpy(buffer.data(), &i, sizeof i);
      if (!write_all(ch, buffer.data(), buffer.size(), deadline)) return 1;
    }
    if (!ch.shutdown_write() || !wait_all_sent(ch, deadline)) return 1;
    char done = 0;
    if (!recv_all(fd, &done, 1, 240000) || done != 'd') return 1;
    double elapsed = now_seconds() - start;
    printf("%s: stream %zu KiB writes, %-10s profile: %llu MiB in %.2f s = %.2f MB/s\n", kProgram,
           kStreamWrite >> 10, core::profile_name(profile), (unsigned long long)(bytes >> 20), elapsed,
           bytes / elapsed / 1e6);
    print_counters(kProgram, "stream writer", ch);
  } else {
    uint64_t received = 0;
    while (received < writes * kStreamWrite) {
      size_t want = kStreamWrite - received % kStreamWrite;
      if (!read_exact(ch, buffer.data(), want, deadline)) return 1;
      if (received % kStreamWrite == 0) {
        uint64_t index = 0;
        memcpy(&index, buffer.data(), sizeof index);
        if (index != received / kStreamWrite) {
          fprintf(stderr, "%s: write %llu arrived where %llu belongs\n", kProgram, (unsigned long long)index,
                  (unsigned long long)(received / kStreamWrite));
          return 1;
        }
      }
      received += want;
    }
    if (!expect_eof(ch, deadline) || !send_all(fd, "d", 1, kSyncTimeoutMs)) return 1;
    print_counters(kProgram, "stream reader", ch);
  }
  return barrier(fd, kSyncTimeoutMs) ? 0 : 1;
}

int run(int fd, int role, int round_trips, uint64_t stream_bytes) {
  int exit_code = 0;
  core::Result<rdma::Device> device = open_test_device(kProgram, &exit_code);
  if (!device) return exit_code;
  for (core::Profile profile : {core::Profile::kDefault, core::Profile::kLatency})
    if (ping_pong(fd, device.value(), role, profile, round_trips) != 0) return 1;
  for (core::Profile profile : {core::Profile::kDefault, core::Profile::kThroughput})
    if (stream(fd, device.value(), role, profile, stream_bytes) != 0) return 1;
  if (role == 0) printf("%s: OK\n", kProgram);
  return 0;
}

}  // namespace
}  // namespace vsock::test

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  int round_trips = argc > 1 ? atoi(argv[1]) : 1000;
  long mib = argc > 2 ? atol(argv[2]) : 32;
  if (round_trips < 10 || round_trips > 1000000 || mib < 1 || mib > 4096) {
    fprintf(stderr, "usage: %s [ROUND_TRIPS (10..1000000)] [STREAM_MIB (1..4096)]\n", argv[0]);
    return 2;
  }
  uint64_t bytes = static_cast<uint64_t>(mib) << 20;
  return vsock::test::run_pair([&](int fd) { return vsock::test::run(fd, 0, round_trips, bytes); },
                               [&](int fd) { return vsock::test::run(fd, 1, round_trips, bytes); }, 120);
}
