#include "sock/dgram/udp_rules.hpp"

#include <errno.h>

#include "core/config.hpp"

namespace vsock::sock::dgram {

bool udp_rules_allow(const sockaddr* address, core::Role role) {
  const core::Config& config = core::config();
  core::Endpoint endpoint;
  endpoint.proto = core::Proto::kUdp;
  endpoint.program = program_invocation_short_name;
  endpoint.role = role;
  endpoint.addr = address;
  return core::decide(config.rules, endpoint, config.settings.udp) == core::OffloadMode::kOffload;
}

}  // namespace vsock::sock::dgram
