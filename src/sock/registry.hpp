// The registry: the fd table of SocketStates and the operations the entry
// points perform on it when fds are created, duplicated and closed.
#pragma once
#include <utility>
#include <vector>

#include "sock/socket_state.hpp"

namespace vsock::sock {

// A counted reference to a SocketState; empty if the fd is not tracked.
class SocketRef {
 public:
  SocketRef() = default;
  explicit SocketRef(SocketState* state) : state_(state) {}
  SocketRef(SocketRef&& other) noexcept : state_(other.state_) { other.state_ = nullptr; }
  SocketRef& operator=(SocketRef&& other) noexcept;
  SocketRef(const SocketRef&) = delete;
  SocketRef& operator=(const SocketRef&) = delete;
  ~SocketRef();

  SocketState* get() const { return state_; }
  SocketState* operator->() const { return state_; }
  explicit operator bool() const { return state_ != nullptr; }

 private:
  SocketState* state_ = nullptr;
};

// True if (domain, type, protocol) names a socket the library may offload.
bool is_offload_candidate(int domain, int type, int protocol);

// Records a socket the kernel just created (socket, accept): a candidate
// gets a fresh state, returned as a reference; anything else is only counted
// (empty ref). Replaces any stale entry for the fd number.
SocketRef register_socket(int fd, int domain, int type, int protocol, SocketRole role);

// The state for fd, or an empty ref. Lock-free.
SocketRef lookup_socket(int fd);

// The fd was closed (close, dup2/dup3 onto it, close_range, closefrom).
void forget_fd(int fd);

// newfd now refers to what oldfd refers to (dup, dup2, dup3, F_DUPFD).
void share_fd(int oldfd, int newfd);

// An fd other than `except` that refers to the socket (state, generation)
// now, or -1 (a scan of the whole table: for the rare case of a closed
// number with a dup).
int find_fd_of(const SocketState* state, uint64_t generation, int except = -1);

// Calls fn(fd, ref) for every tracked fd (at exit: no fd may come or go).
void for_each_socket(void (*fn)(int fd, const SocketRef& ref));

// Forgets every fd in [first, last] (close_range, closefrom).
void forget_fd_range(unsigned int first, unsigned int last);

// Every tracked fd in [first, last] with its socket, in fd order (what a
// close_range or closefrom is about to close).
std::vector<std::pair<int, SocketRef>> sockets_in_range(unsigned int first, unsigned int last);

}  // namespace vsock::sock
