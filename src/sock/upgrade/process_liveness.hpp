// Whether a process still runs (for the rendezvous: a listener's owner that
// exited, e.g. the parent inside daemon(), no longer takes requests).
#pragma once
#include <cstdint>

namespace vsock::sock {

// False for pid 0, a pid that no longer exists, and a zombie (its fds,
// rdma_cm ids among them, are gone already).
bool process_alive(uint32_t pid);

}  // namespace vsock::sock
