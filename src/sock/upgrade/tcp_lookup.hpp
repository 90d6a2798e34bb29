// Whether the kernel has a TCP connection with a given 4-tuple that waits
// in a listener's backlog, accepted by no process yet (sock_diag, an exact
// lookup: no dump; an accepted socket has an inode, one in the backlog has
// none). The listener asks it before it answers an upgrade request whose
// socket accept() has not returned yet (an early upgrade): a request must
// name a connection that really waits in this host's backlog, so a peer
// cannot make us set up queue pairs for connections that do not exist, nor
// for live ones that were accepted (a request forged for a connection
// whose upgrade is done: its 4-tuple is no secret on the client's host).
#pragma once
#include <sys/socket.h>

#include "sock/wire/upgrade_request.hpp"

namespace vsock::sock {

// The connection `request` names (server = ours), as IPv4 and, for an IPv4
// 4-tuple, also as an IPv4-mapped one on a dual-stack socket. False when
// absent, accepted already, or when the kernel cannot be asked.
bool tcp_connection_in_backlog(const wire::UpgradeRequest& request);

// Whether a TCP socket listens on `local`'s address and port (in any
// process of this network namespace: sock_diag's dump of listening
// sockets). A listener's owner that closed its own keeps the port's
// rdma_cm side while one does (docs/protocol.md §1.1). False when none
// does or the kernel cannot be asked.
bool tcp_listening_on(const sockaddr* local, socklen_t length);

}  // namespace vsock::sock
