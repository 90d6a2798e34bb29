#include "sock/stream/fork_children.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>
#include <new>
#include <vector>

#include "sys/real_calls.hpp"

namespace vsock::sock {
namespace {

struct Child {
  int pidfd;          // -1: pidfd_open failed, assumed alive for good
  uint64_t sequence;  // the fork that made it
};

std::mutex g_lock;
std::vector<Child>* g_children = nullptr;  // never freed: used until exit
uint64_t g_forks = 0;

bool exited(const Child& child) {
  if (child.pidfd < 0) return false;
  pollfd pfd{child.pidfd, POLLIN, 0};
  return sys::real().poll(&pfd, 1, 0) == 1;
}

// Forgets the children that have exited (their pidfds closed). Under g_lock.
void drop_exited() {
  if (g_children == nullptr) return;
  for (size_t i = 0; i < g_children->size();) {
    Child& child = (*g_children)[i];
    if (!exited(child)) {
      ++i;
      continue;
    }
    sys::real().close(child.pidfd);
    (*g_children)[i] = g_children->back();
    g_children->pop_back();
  }
}

// The child has none of its parent's children. Its copy of the lock may
// have been held by another thread of the parent: a fresh one is free.
void forget_children_in_child() {
  new (&g_lock) std::mutex();
  if (g_children != nullptr) {
    for (const Child& child : *g_children)
      if (child.pidfd >= 0) sys::real().close(child.pidfd);
    g_children->clear();
  }
  g_forks = 0;
}

__attribute__((constructor)) void install_fork_children_handler() {
  pthread_atfork(nullptr, nullptr, forget_children_in_child);
}

}  // namespace

uint64_t next_keeping_fork() {
  std::lock_guard<std::mutex> held(g_lock);
  return ++g_forks;
}

void note_fork_child(pid_t child, uint64_t sequence) {
  // Close-on-exec by itself. Fails only without pidfds (kernel < 5.3) or
  // fds: the child then counts as alive for as long as this process lives.
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
  std::lock_guard<std::mutex> held(g_lock);
  if (g_children == nullptr) g_children = new std::vector<Child>();
  // Also here, not only at a close: a process that forks every second
  // (redis BGSAVE) would otherwise keep a pidfd per fork.
  drop_exited();
  g_children->push_back(Child{pidfd, sequence});
}

bool fork_child_may_hold(uint64_t since) {
  if (since == 0) return false;
  std::lock_guard<std::mutex> held(g_lock);
  if (g_children == nullptr) return false;
  drop_exited();
  for (const Child& child : *g_children)
    if (child.sequence >= since) return true;
  return false;
}

}  // namespace vsock::sock
