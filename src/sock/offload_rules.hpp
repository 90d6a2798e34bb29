// What the settings and the rules file (core/rules.hpp) say of one socket
// address for a protocol: may it leave the kernel? For TCP, the local
// address of a listener (role server) or the peer of a connect (client);
// for UDP over UD, a bound socket's own address (server: may it receive
// over UD?) or a destination (client: may datagrams to it go over UD?).
// The protocol's setting (`tcp`, `udp`) answers when no rule decides.
#pragma once
#include <sys/socket.h>

#include "core/rules.hpp"

namespace vsock::sock {

bool rules_offload(core::Proto proto, const sockaddr* address, core::Role role);

}  // namespace vsock::sock
