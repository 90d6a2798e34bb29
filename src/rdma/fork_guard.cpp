#include "rdma/fork_guard.hpp"

#include <pthread.h>

namespace vsock::rdma {
namespace {

pthread_rwlock_t g_verbs_calls = PTHREAD_RWLOCK_INITIALIZER;

void hold_for_fork() { pthread_rwlock_wrlock(&g_verbs_calls); }
void release_in_parent() { pthread_rwlock_unlock(&g_verbs_calls); }
// Not an unlock: glibc tells a writer's unlock by the thread id that took
// the lock, and the child's thread has a new one. No other thread exists
// in the child, so a fresh lock is the released one.
void release_in_child() { pthread_rwlock_init(&g_verbs_calls, nullptr); }

__attribute__((constructor)) void install_verbs_fork_handlers() {
  pthread_atfork(hold_for_fork, release_in_parent, release_in_child);
}

}  // namespace

ForkGuard::ForkGuard() { pthread_rwlock_rdlock(&g_verbs_calls); }
ForkGuard::~ForkGuard() { pthread_rwlock_unlock(&g_verbs_calls); }

}  // namespace vsock::rdma
