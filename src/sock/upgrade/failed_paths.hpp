// Peers whose RDMA path failed under a live connection (docs/protocol.md
// §5.1: the connection went on over TCP). New connections to them stay on
// TCP for peer_fail_cache_s; the first one after that tries RDMA again and
// is the probe that says whether it works. Process-wide, behind a lock of
// its own that is taken last (a stream records its peer under its socket
// lock, which the engine's lock may be held around).
#pragma once
#include <sys/socket.h>

namespace vsock::sock {

void note_failed_path(const sockaddr* peer, socklen_t len);
bool path_failed_recently(const sockaddr* peer, socklen_t len);

}  // namespace vsock::sock
