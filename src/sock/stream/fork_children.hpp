// Which fork() children may still hold this process's switched sockets
// (docs/protocol.md §5.2). A fork keeps the parent's upgraded connections
// on RDMA; the child gets copies of their fds. While such a child lives,
// closing a connection here must not end it over RDMA (the kernel
// connection stays open in the child): it goes back to TCP first.
//
// Each fork that kept a connection gets a sequence number; a connection
// remembers the first one that kept it (every later child inherited it
// too, while it was open here). Children are watched through pidfds: an
// exited child (even one not reaped yet) no longer holds anything.
#pragma once
#include <sys/types.h>

#include <cstdint>

namespace vsock::sock {

// Before fork(), when at least one connection stays on RDMA across it:
// the number of this fork (1, 2, ...).
uint64_t next_keeping_fork();
// After fork(), in the parent: the child of fork `sequence` is `child`.
void note_fork_child(pid_t child, uint64_t sequence);
// Whether a child of fork `since` or of a later one may still be alive.
bool fork_child_may_hold(uint64_t since);

}  // namespace vsock::sock
