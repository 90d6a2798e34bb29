#include "sock/wait/spin_history.hpp"

#include "core/config.hpp"

namespace vsock::sock {

uint32_t SpinHistory::budget_us(uint32_t spin_us) {
  if (spin_us == 0) return 0;
  if (skipping()) {
    // Sleep at once, but now and then spin it all out: a hit ends this.
    if (++skipped_ < kProbeEvery) return 0;
    skipped_ = 0;
    return spin_us;
  }
  if (typical_us_ == 0) return spin_us;
  uint64_t span = uint64_t{typical_us_} * kSpanFactor;
  if (span < kFloorUs) span = kFloorUs;
  return span < spin_us ? static_cast<uint32_t>(span) : spin_us;
}

void SpinHistory::note_hit(int64_t us) {
  misses_in_row_ = 0;
  skipped_ = 0;
  const uint32_t t = us <= 0 ? 1 : us > 10'000'000 ? 10'000'000 : static_cast<uint32_t>(us);
  // A running average over about the last 8 hits.
  typical_us_ = typical_us_ == 0 ? t : static_cast<uint32_t>((int64_t{typical_us_} * 7 + t + 7) / 8);
}

void SpinHistory::note_miss() {
  if (misses_in_row_ < kMissesToSkip) ++misses_in_row_;
}

SpinHistory* SpinHistory::of_this_thread() {
  thread_local SpinHistory history;
  return core::config().settings.spin_adapt ? &history : nullptr;
}

}  // namespace vsock::sock
