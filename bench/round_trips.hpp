// The measured phase of vsock_bench's datagram latency runs (udp-lat,
// mcast-lat), and the clock they read.
#pragma once
#include <chrono>
#include <cstdint>
#include <vector>

namespace bench {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Runs round_trip(seq) (send datagram `seq`, wait for its answer or
// answers; true when they came) for seq = 0, 1, ...: first the warm-up,
// which ends after `warmup` round trips or a quarter of `seconds`, then
// `iters` measured ones or `seconds` from the warm-up's end, whichever comes
// first. Each answered measured round trip's time (µs, in the order
// measured) goes to *samples; unanswered ones are counted in *lost. False,
// at once, when more than 100 went unanswered.
template <class RoundTrip>
bool measure_round_trips(long warmup, long iters, double seconds, RoundTrip round_trip, std::vector<double>* samples,
                         long* lost) {
  uint64_t first_measured = static_cast<uint64_t>(warmup);
  const double warm_until = now_seconds() + seconds / 4;
  double deadline = now_seconds() + seconds;
  *lost = 0;
  for (uint64_t seq = 0; seq < first_measured + static_cast<uint64_t>(iters); ++seq) {
    if (seq < first_measured && now_seconds() > warm_until) first_measured = seq;
    if (seq == first_measured) deadline = now_seconds() + seconds;
    const double t0 = now_seconds();
    const bool answered = round_trip(seq);
    const double t1 = now_seconds();
    if (!answered) ++*lost;
    else if (seq >= first_measured) samples->push_back((t1 - t0) * 1e6);
    if (seq >= first_measured && t1 > deadline) break;
    if (*lost > 100) return false;
  }
  return true;
}

}  // namespace bench
