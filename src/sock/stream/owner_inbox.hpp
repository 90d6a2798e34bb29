// Where fork() children reach the process that owns a connection's RDMA
// path (docs/protocol.md §5.2). A fork keeps the parent's switched
// connections on RDMA; a child that uses one of them first asks the owner
// to hand it back to TCP, here: a Unix seqpacket socket in the abstract
// namespace named after the owner's pid, served by the owner's side-band
// thread. One request (wire::OwnerRequest) and one answer per connection.
#pragma once
#include <sys/types.h>

#include <cstdint>

#include "core/result.hpp"
#include "sock/wire/owner_request.hpp"

namespace vsock::sock {

// --- the owner ---
// Opens the inbox if it is not open (before a fork that keeps connections
// on RDMA). False if it cannot be opened: that fork hands them back first.
bool open_owner_inbox();
// The inbox's listening fd, -1 if none (closed in a child of fork()).
int owner_inbox_fd();
// Hands the connection with `nonce` back to TCP; says how that went.
using OwnerHandler = wire::OwnerAnswer (*)(uint64_t nonce);
// The side-band thread, once the inbox is readable: answers the requests
// waiting there. A request must come within 200 ms of its connect and from
// a process of our own user; anything malformed is dropped unanswered.
void serve_owner_inbox(OwnerHandler handler);

// --- a child ---
// Asks `owner` to hand the connection `nonce` back to TCP and waits for
// the answer (timeout_ms at most). ECONNREFUSED or ENOENT: the owner is
// gone; ETIMEDOUT: no answer in time; EPROTO: a malformed answer.
core::Result<wire::OwnerAnswer> ask_owner(pid_t owner, uint64_t nonce, int timeout_ms);

}  // namespace vsock::sock
