// Shared by the extern "C" entry points: the real-call table, the registry,
// and a guard that keeps errno as the kernel left it while the library does
// its bookkeeping after a real call.
#pragma once
#include <cerrno>

#include "core/result.hpp"

#include "sock/offload_policy.hpp"
#include "sock/dgram/datagram_hooks.hpp"
#include "sock/registry.hpp"
#include "sock/socket_route.hpp"
#include "sock/stream/stream_hooks.hpp"
#include "sys/real_calls.hpp"
#include "sys/reentry_guard.hpp"

// Every exported entry point is marked so; the version script exports it.
#define VSOCK_EXPORT extern "C" __attribute__((visibility("default")))

namespace vsock::preload {

class ErrnoKeeper {
 public:
  ErrnoKeeper() : saved_(errno) {}
  ~ErrnoKeeper() { errno = saved_; }

 private:
  int saved_;
};

using sys::real;

// Records a socket the kernel just created and decides whether it may ever
// leave the kernel. errno is left as the kernel set it.
// `known_mode`: SocketState::known_mode, what the call that made it says.
inline sock::SocketRef track_new_socket(int fd, int domain, int type, int protocol, sock::SocketRole role,
                                        uint8_t known_mode) {
  ErrnoKeeper keep;
  sock::SocketRef state = sock::register_socket(fd, domain, type, protocol, role);
  if (state) {
    state->known_mode.store(known_mode);
    sock::choose_initial_path(state.get());
    sock::dgram::on_datagram_created(state.get());
  }
  return state;
}

// -1 and errno for a failed Result, the value otherwise.
template <class T>
inline long finish(const core::Result<T>& result) {
  if (!result) {
    errno = result.error();
    return -1;
  }
  return static_cast<long>(result.value());
}

}  // namespace vsock::preload
