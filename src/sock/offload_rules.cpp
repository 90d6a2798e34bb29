#include "sock/offload_rules.hpp"

#include <errno.h>

#include "core/config.hpp"

namespace vsock::sock {

bool rules_offload(core::Proto proto, const sockaddr* address, core::Role role) {
  const core::Config& config = core::config();
  core::Endpoint endpoint;
  endpoint.proto = proto;
  endpoint.program = program_invocation_short_name;
  endpoint.role = role;
  endpoint.addr = address;
  const core::OffloadMode fallback = proto == core::Proto::kTcp ? config.settings.tcp : config.settings.udp;
  return core::decide(config.rules, endpoint, fallback) == core::OffloadMode::kOffload;
}

}  // namespace vsock::sock
