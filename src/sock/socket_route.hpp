// The route of a call on a tracked fd: the ManagedSocket that serves it, or
// none (the kernel's call, unchanged). Where the socket kinds meet, so that
// the entry points and the wait engine name only the interface.
#pragma once
#include "sock/managed_socket.hpp"
#include "sock/dgram/datagram_socket.hpp"
#include "sock/registry.hpp"
#include "sock/stream/stream_socket.hpp"

namespace vsock::sock {

// The socket a call on `ref` must go through, or null: not tracked, kept
// on the kernel, or fallen back for good.
inline ManagedSocket* managed_socket(const SocketRef& ref) {
  if (!ref) return nullptr;
  if (StreamSocket* stream = ref->stream.load(std::memory_order_acquire))
    return stream->kernel_only() ? nullptr : stream;
  if (dgram::DatagramSocket* datagram = ref->datagram.load(std::memory_order_acquire))
    return datagram->kernel_only() ? nullptr : datagram;
  return nullptr;
}

}  // namespace vsock::sock
