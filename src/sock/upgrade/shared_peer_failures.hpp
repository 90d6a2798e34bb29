// The host's shared failure memory of this user (SharedFailureTable in
// /dev/shm/libvsock-peers-1-<euid>: a regular file only this user can
// open, checked before it is mapped, made whole under a private name and
// then linked into place so that nobody maps a half-made one). Mapped at
// the first use in a process and kept for its life (fork children share
// it). Without /dev/shm, or with peer_fail_cache_s = 0, nothing is shared
// and each process finds out for itself, as before.
#pragma once
#include <sys/socket.h>

namespace vsock::sock {

// Whether a process of this user found no libvsock at `peer` within
// peer_fail_cache_s. Opens no verbs device: connect() asks it first.
bool peer_plain_on_this_host(const sockaddr* peer, socklen_t length);
// An upgrade to `peer` found no libvsock there (no listener, rejected as a
// whole): tell the other processes.
void share_plain_peer(const sockaddr* peer, socklen_t length);
// An upgrade to `peer` succeeded: it is no plain peer (any more).
void forget_plain_peer(const sockaddr* peer, socklen_t length);

}  // namespace vsock::sock
