#include "sock/upgrade/listener_boards.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <new>

namespace vsock::sock {
namespace {

std::mutex g_lock;
std::atomic<uint64_t> g_forks{0};
// Never destroyed: listeners may be closed by static destructors at exit.
auto* g_boards = new std::map<const SocketState*, std::shared_ptr<RendezvousBoard>>();

void mark_all_shared() {
  for (auto& [state, board] : *g_boards) board->mark_shared();
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

void remember_listener_board(const SocketState* listener, std::shared_ptr<RendezvousBoard> board) {
  std::lock_guard<std::mutex> held(g_lock);
  (*g_boards)[listener] = std::move(board);
}

std::shared_ptr<RendezvousBoard> listener_board(const SocketState* listener) {
  std::lock_guard<std::mutex> held(g_lock);
  auto it = g_boards->find(listener);
  return it == g_boards->end() ? nullptr : it->second;
}

void forget_listener_board(const SocketState* listener) {
  std::lock_guard<std::mutex> held(g_lock);
  g_boards->erase(listener);
}

namespace {

void unlink_if_alone(RendezvousBoard& board) {
  if (board.named() && board.owner() == static_cast<uint32_t>(::getpid()) && !board.shared()) board.unlink_name();
}

}  // namespace

std::shared_ptr<RendezvousBoard> release_listener_board(const SocketState* listener) {
  std::shared_ptr<RendezvousBoard> board;
  {
    std::lock_guard<std::mutex> held(g_lock);
    auto it = g_boards->find(listener);
    if (it == g_boards->end()) return nullptr;
    board = std::move(it->second);
    g_boards->erase(it);
  }
  unlink_if_alone(*board);
  return board;
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
  for (auto& [state, board] : *g_boards) boards.push_back(board);
  return boards;
}

}  // namespace vsock::sock
