// The offload policy: when a socket is created, decide whether it can ever
// leave the kernel. It stays on the kernel, and the stats say why, when the
// settings keep its protocol there or when the process has no verbs device.
// (Rules that depend on the peer address or port are applied at connect/bind.)
#pragma once
#include "sock/socket_state.hpp"

namespace vsock::rdma {
class Device;
}

namespace vsock::sock {

// The verbs device sockets are offloaded through, or null (probed once).
rdma::Device* offload_device();

// Sets state->kernel_reason for a freshly registered candidate socket.
// Opens no device where sysfs lists one with an ACTIVE port: the first
// upgrade opens it (offload_device()); probes at once where none is listed.
void choose_initial_path(SocketState* state);

}  // namespace vsock::sock
