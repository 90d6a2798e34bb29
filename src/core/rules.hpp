// Offload rules: which sockets go to RDMA and which stay on the kernel,
// chosen per protocol, program, role, peer address and port.
// Syntax (one rule a line, the first matching rule wins):
//   tcp|udp  offload|kernel  [program=NAME] [role=client|server] [addr=CIDR] [port=N|N-M]
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/settings.hpp"

namespace vsock::core {

enum class Proto { kTcp, kUdp };
enum class Role { kAny, kClient, kServer };

struct AddressPrefix {
  int family = AF_UNSPEC;  // AF_UNSPEC matches every address
  uint8_t bytes[16] = {};
  int prefix_len = 0;
};

struct Rule {
  Proto proto = Proto::kTcp;
  OffloadMode mode = OffloadMode::kOffload;
  std::string program;  // empty: any program (compared with the basename)
  Role role = Role::kAny;
  AddressPrefix addr;
  uint16_t port_lo = 0, port_hi = 65535;
  int line = 0;
};

// What is known of a socket when the library decides its path.
struct Endpoint {
  Proto proto = Proto::kTcp;
  std::string_view program;
  Role role = Role::kAny;
  const sockaddr* addr = nullptr;  // peer (client) or local (server) address; may be null
};

// Parses "a.b.c.d[/n]" or "ipv6[/n]" or "*". False on bad input.
bool parse_address_prefix(std::string_view text, AddressPrefix* out);

// Parses the words of one rule line. On failure returns false and sets *why.
bool parse_rule(const std::vector<std::string_view>& words, Rule* out, std::string* why);

// True if `rule` can decide for a socket of `proto` in `program` on `port`:
// the protocol, program and port match. Its role and addr, if it has them,
// are still to be checked against the socket (decide() does).
bool rule_applies(const Rule& rule, Proto proto, std::string_view program, uint16_t port);

// True if the rule also names a role or an address, so it decides only for
// some sockets of a program and port.
bool rule_is_conditional(const Rule& rule);

// First matching rule's mode, or `fallback` if none matches.
OffloadMode decide(const std::vector<Rule>& rules, const Endpoint& endpoint, OffloadMode fallback);

}  // namespace vsock::core
