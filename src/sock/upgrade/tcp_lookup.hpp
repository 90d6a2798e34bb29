// Whether the kernel has a TCP connection with a given 4-tuple (sock_diag,
// an exact lookup: no dump). The listener asks it before it answers an
// upgrade request whose socket accept() has not returned yet: a request
// must name a connection that really waits in this host's backlog, so a
// peer cannot make us set up queue pairs for connections that do not exist.
#pragma once
#include "sock/wire/upgrade_request.hpp"

namespace vsock::sock {

// The connection `request` names (server = ours), as IPv4 and, for an IPv4
// 4-tuple, also as an IPv4-mapped one on a dual-stack socket. False when
// absent or when the kernel cannot be asked.
bool tcp_connection_exists(const wire::UpgradeRequest& request);

}  // namespace vsock::sock
