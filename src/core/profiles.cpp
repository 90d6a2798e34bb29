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

void apply_profile(Settings* s, Profile profile) {
  s->profile = profile;
  switch (profile) {
    case Profile::kLatency:
      // Spin long, send small messages inline, signal often, never cork.
      s->spin_us = 2000;
      s->inline_size = 256;
      s->ring_size = 1u << 20;
      s->sq_depth = 128;
      s->rq_depth = 128;
      s->signal_every = 8;
      s->autocork = false;
      s->cq_mod_count = 0;
      s->cq_mod_us = 0;
      break;
    case Profile::kThroughput:
      // Sleep almost at once, big rings, deep queues, coalesce, moderate.
      s->spin_us = 10;
      s->inline_size = 64;
      s->ring_size = 8u << 20;
      s->sq_depth = 1024;
      s->rq_depth = 1024;
      s->signal_every = 64;
      s->autocork = true;
      s->cq_mod_count = 16;
      s->cq_mod_us = 32;
      break;
    case Profile::kDefault:
      s->spin_us = 50;
      s->inline_size = 128;
      s->ring_size = 2u << 20;
      s->sq_depth = 256;
      s->rq_depth = 256;
      s->signal_every = 16;
      s->autocork = false;
      s->cq_mod_count = 0;
      s->cq_mod_us = 0;
      break;
  }
}

}  // namespace vsock::core
