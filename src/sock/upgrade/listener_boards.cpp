#include "sock/upgrade/listener_boards.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <new>

#include "sock/upgrade/process_liveness.hpp"
#include "sock/wire/endpoint.hpp"

namespace vsock::sock {
namespace {

struct Entry {
  std::shared_ptr<RendezvousBoard> board;
  int fd = -1;
};

std::mutex g_lock;
std::atomic<uint64_t> g_forks{0};
// Never destroyed: listeners may be closed by static destructors at exit.
// The states are the listening sockets' (live while they are here: a
// socket's release takes its entry out).
auto* g_boards = new std::map<SocketState*, Entry>();

void mark_all_shared() {
  for (auto& [state, entry] : *g_boards) entry.board->mark_shared();
}

// The fork copies the map under the lock; both processes now share every
// board's listener. (A fork that went past the library's fork() counts
// here too; ours counted already, in note_fork_starting().)
void before_fork() {
  g_forks.fetch_add(1);
  g_lock.lock();
}
void in_parent() {
  mark_all_shared();
  g_lock.unlock();
}
void in_child() {
  new (&g_lock) std::mutex();  // the parent's other threads are gone
  mark_all_shared();
}

__attribute__((constructor)) void install_fork_handlers() { pthread_atfork(before_fork, in_parent, in_child); }

}  // namespace

void remember_listener_board(SocketState* listener, std::shared_ptr<RendezvousBoard> board, int fd) {
  std::lock_guard<std::mutex> held(g_lock);
  (*g_boards)[listener] = Entry{std::move(board), fd};
}

std::shared_ptr<RendezvousBoard> listener_board(const SocketState* listener) {
  std::lock_guard<std::mutex> held(g_lock);
  auto it = g_boards->find(const_cast<SocketState*>(listener));
  return it == g_boards->end() ? nullptr : it->second.board;
}

void forget_listener_board(const SocketState* listener) {
  std::lock_guard<std::mutex> held(g_lock);
  g_boards->erase(const_cast<SocketState*>(listener));
}

std::shared_ptr<RendezvousBoard> live_listener_board(const sockaddr* local, socklen_t length) {
  core::Result<wire::FamilyEndpoint> at = wire::endpoint_from_sockaddr(local, length);
  if (!at) return nullptr;
  std::shared_ptr<RendezvousBoard> found;
  {
    std::lock_guard<std::mutex> held(g_lock);
    for (auto& [state, entry] : *g_boards) {
      sockaddr_storage address{};
      socklen_t address_len = entry.board->address(&address);
      if (address_len == 0) continue;
      core::Result<wire::FamilyEndpoint> its =
          wire::endpoint_from_sockaddr(reinterpret_cast<sockaddr*>(&address), address_len);
      if (its && its.value().family == at.value().family && its.value().endpoint == at.value().endpoint) {
        found = entry.board;
        break;
      }
    }
  }
  if (!found) return nullptr;
  uint32_t owner = found->owner();
  if (owner != static_cast<uint32_t>(::getpid()) && !process_alive(owner)) return nullptr;
  return found;
}

namespace {

void unlink_if_alone(RendezvousBoard& board) {
  if (board.named() && board.owner() == static_cast<uint32_t>(::getpid()) && !board.shared()) board.unlink_name();
}

}  // namespace

ReleasedBoard release_listener_board(const SocketState* listener, uint64_t key) {
  ReleasedBoard released;
  {
    std::lock_guard<std::mutex> held(g_lock);
    auto it = g_boards->find(const_cast<SocketState*>(listener));
    if (it == g_boards->end()) return released;
    released.board = std::move(it->second.board);
    g_boards->erase(it);
    for (auto& [state, entry] : *g_boards) {
      if (entry.board.get() != released.board.get()) continue;
      if (key == kJoinedBoardKey || key == 0) {
        released.still_used = true;
        break;
      }
      // The heir takes the rdma_cm listener's key over, unless it is being
      // closed itself (its key is 0 by then: its own release follows).
      uint64_t expected = kJoinedBoardKey;
      if (state->listen_key.compare_exchange_strong(expected, key)) {
        released.still_used = true;
        released.heir_fd = entry.fd;
        break;
      }
    }
  }
  if (!released.still_used) unlink_if_alone(*released.board);
  return released;
}

void release_listener_boards_at_exit() {
  for (const std::shared_ptr<RendezvousBoard>& board : all_listener_boards()) unlink_if_alone(*board);
}

}  // namespace vsock::sock

namespace vsock::sock {

uint64_t fork_generation() { return g_forks.load(); }

// A fork counts from its start, before the sockets are handed over: the
// side-band thread runs on meanwhile, and one that looked at the count
// then and claimed a socket for this process would race the child, which
// copies the socket unclaimed (Engine::claim_unused).
void note_fork_starting() { g_forks.fetch_add(1); }

std::vector<std::shared_ptr<RendezvousBoard>> all_listener_boards() {
  std::lock_guard<std::mutex> held(g_lock);
  std::vector<std::shared_ptr<RendezvousBoard>> boards;
  for (auto& [state, entry] : *g_boards) {
    bool seen = false;  // one port's listeners share one board
    for (const std::shared_ptr<RendezvousBoard>& board : boards) seen = seen || board == entry.board;
    if (!seen) boards.push_back(entry.board);
  }
  return boards;
}

}  // namespace vsock::sock
