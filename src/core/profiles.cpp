// The profile bundles. docs/configuration.md documents the same numbers;
// tests/unit/config_test.cpp checks a few of them.
#include "core/settings.hpp"

namespace vsock::core {

bool parse_profile(std::string_view text, Profile* out) {
  if (text == "default") *out = Profile::kDefault;
  else if (text == "latency") *out = Profile::kLatency;
  else if (text == "throughput") *out = Profile::kThroughput;
  else return false;
  return true;
}

const char* profile_name(Profile profile) {
  switch (profile) {
    case Profile::kLatency: return "latency";
    case Profile::kThroughput: return "throughput";
    case Profile::kDefault: break;
  }
  return "default";
}

namespace {

// One profile's bundle: the settings a profile sets together.
struct Bundle {
  uint32_t spin_us, inline_size, ring_size, sq_depth, rq_depth, signal_every;
  bool autocork, nagle;
  uint32_t cq_mod_count, cq_mod_us;
};

// Indexed by Profile. latency: spin long, send small messages inline, signal
// often, never cork. throughput: sleep almost at once, big rings, deep
// queues, coalesce, moderate interrupts. default: in between, and small
// writes coalesce as the kernel's Nagle does (unless TCP_NODELAY).
// Queue depths are 2^k - 1: a provider whose queues keep one slot empty
// (rxe, siw) makes a queue of 2^k + 1 slots into one of 2^(k+1), twice the
// memory, for every connection (docs/performance.md).
constexpr Bundle kBundles[] = {
    /* default    */ {50, 128, 2u << 20, 255, 255, 16, false, true, 0, 0},
    /* latency    */ {2000, 256, 1u << 20, 127, 127, 8, false, false, 0, 0},
    /* throughput */ {10, 64, 8u << 20, 1023, 1023, 64, true, true, 16, 32},
};
static_assert(static_cast<int>(Profile::kDefault) == 0 && static_cast<int>(Profile::kLatency) == 1 &&
              static_cast<int>(Profile::kThroughput) == 2, "kBundles is indexed by Profile");

}  // namespace

uint32_t largest_profile_ring_size() {
  uint32_t largest = 0;
  for (const Bundle& b : kBundles) largest = b.ring_size > largest ? b.ring_size : largest;
  return largest;
}

void apply_profile(Settings* s, Profile profile) {
  const Bundle& b = kBundles[static_cast<int>(profile)];
  s->profile = profile;
  s->spin_us = b.spin_us;
  s->inline_size = b.inline_size;
  s->ring_size = b.ring_size;
  s->sq_depth = b.sq_depth;
  s->rq_depth = b.rq_depth;
  s->signal_every = b.signal_every;
  s->autocork = b.autocork;
  s->nagle = b.nagle;
  s->cq_mod_count = b.cq_mod_count;
  s->cq_mod_us = b.cq_mod_us;
}

bool is_profile_setting(std::string_view name) {
  // The fields apply_profile() assigns, in the same order.
  static constexpr std::string_view kBundleNames[] = {"spin_us",  "inline_size", "ring_size", "sq_depth",
                                                      "rq_depth", "signal_every", "autocork", "nagle",
                                                      "cq_mod_count", "cq_mod_us"};
  for (std::string_view bundle_name : kBundleNames)
    if (bundle_name == name) return true;
  return false;
}

}  // namespace vsock::core
