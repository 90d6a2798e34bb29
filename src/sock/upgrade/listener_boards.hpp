// The rendezvous boards of this process's listening sockets (one per
// listen(), src/sock/upgrade/rendezvous_board.hpp), found by the socket's
// SocketState, so that accept() in any process that inherited the
// listener knows where to claim. A fork marks every board shared: from
// then on another process may accept from it.
#pragma once
#include <memory>
#include <vector>

#include "sock/socket_state.hpp"
#include "sock/upgrade/rendezvous_board.hpp"

namespace vsock::sock {

// The listen_key of a listener that joined another process's board (same
// port, SO_REUSEPORT): it has no rdma_cm side of its own in the engine.
inline constexpr uint64_t kJoinedBoardKey = ~uint64_t{0};

// `fd`: the listener's (the engine's rdma_cm side looks at its options).
void remember_listener_board(SocketState* listener, std::shared_ptr<RendezvousBoard> board, int fd);
std::shared_ptr<RendezvousBoard> listener_board(const SocketState* listener);
void forget_listener_board(const SocketState* listener);
// The board another listening socket of this process uses on the same
// address and port (`local`, its getsockname()), if its owner runs: a
// second SO_REUSEPORT listener of one port in one process (nginx's
// `reuseport` opens them all in its master) joins it. Else null.
std::shared_ptr<RendezvousBoard> live_listener_board(const sockaddr* local, socklen_t length);
struct ReleasedBoard {
  std::shared_ptr<RendezvousBoard> board;  // null: the listener had none
  // Another listener of this process still uses the board: its rdma_cm
  // side must stay. If `key` was an rdma_cm listener's (not
  // kJoinedBoardKey), that listener now holds it, and heir_fd is its fd.
  bool still_used = false;
  int heir_fd = -1;
};
// The listener (whose listen_key was `key`) is closed here: forgets its
// board and returns it; hands `key` on to another listener of this
// process on the board, if any; else removes the board's name if this
// process owns it and no other process can hold the listener (no fork,
// nobody joined): a new listen() makes a new one.
ReleasedBoard release_listener_board(const SocketState* listener, uint64_t key);
// At exit: removes the names of the boards only this process used.
void release_listener_boards_at_exit();
// Bumped by every fork() as it starts (the child inherits the new value): a
// socket accepted before the latest fork may be served by the other process.
uint64_t fork_generation();
// The library's fork(), daemon() and vfork() call this first, before they
// hand their sockets over.
void note_fork_starting();
// Every board this process knows (its listening sockets').
std::vector<std::shared_ptr<RendezvousBoard>> all_listener_boards();

}  // namespace vsock::sock
