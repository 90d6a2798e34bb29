// What the rules file (core/rules.hpp) says of UDP over UD for one
// address: a bound socket's own address (role server: may it receive over
// UD?) or a destination (role client: may datagrams to it go over UD?).
// The `udp` setting is the answer when no rule decides.
#pragma once
#include <sys/socket.h>

#include "core/rules.hpp"

namespace vsock::sock::dgram {

bool udp_rules_allow(const sockaddr* address, core::Role role);

}  // namespace vsock::sock::dgram
