#include "sock/registry.hpp"

#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

#include <cstdint>
#include <mutex>
#include <new>

#include "core/config.hpp"
#include "sock/stream/stream_hooks.hpp"
#include "core/stats.hpp"
#include "sock/fd_table.hpp"
#include "sock/stats_publisher.hpp"

namespace vsock::sock {
namespace {

FdTable<SocketState> g_table;

// Type-stable pool: states are recycled, never returned to the allocator.
std::mutex g_pool_lock;
SocketState* g_free_list = nullptr;

// A fork() while another thread holds the pool lock would leave the child
// with a lock nobody will release. Hold it across every fork (glibc's own
// forks too, e.g. inside daemon()), so the child starts with it free.
void lock_pool_for_fork() { g_pool_lock.lock(); }
void unlock_pool_after_fork() { g_pool_lock.unlock(); }
__attribute__((constructor)) void install_fork_handlers() {
  pthread_atfork(lock_pool_for_fork, unlock_pool_after_fork, unlock_pool_after_fork);
}

SocketState* pool_take() {
  {
    std::lock_guard<std::mutex> lock(g_pool_lock);
    if (g_free_list != nullptr) {
      SocketState* s = g_free_list;
      g_free_list = s->next_free;
      return s;
    }
  }
  return new (std::nothrow) SocketState;
}

void reset(SocketState* s, int domain, int type, int protocol, SocketRole role) {
  s->domain = domain;
  s->type = type;
  s->protocol = protocol;
  s->role.store(role);
  s->kernel_reason.store(KernelReason::kUndecided);
  s->stream.store(nullptr);
  s->datagram.store(nullptr);
  s->listen_key.store(0);
  s->known_mode.store(0);
  s->next_free = nullptr;
  s->generation.fetch_add(1, std::memory_order_acq_rel);
}

void release(SocketState* s) {
  if (s->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  on_socket_released(s);  // the last fd is gone: finish its connection
  std::lock_guard<std::mutex> lock(g_pool_lock);
  s->next_free = g_free_list;
  g_free_list = s;
}

// Takes a reference only if the state is live (refs > 0).
bool try_acquire(SocketState* s) {
  uint32_t refs = s->refs.load(std::memory_order_acquire);
  while (refs != 0) {
    if (s->refs.compare_exchange_weak(refs, refs + 1, std::memory_order_acq_rel)) return true;
  }
  return false;
}

// Puts s (already holding a reference for the slot) at fd, dropping the old one.
void install(int fd, SocketState* s) {
  SocketState* previous = nullptr;
  if (!g_table.exchange(fd, s, &previous)) {
    if (s != nullptr) release(s);  // no memory for the table: the fd stays untracked (kernel)
    return;
  }
  if (s != nullptr) s->fds.fetch_add(1, std::memory_order_acq_rel);
  if (previous != nullptr) {
    previous->fds.fetch_sub(1, std::memory_order_acq_rel);
    release(previous);
  }
}

}  // namespace

SocketRef& SocketRef::operator=(SocketRef&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) release(state_);
    state_ = other.state_;
    other.state_ = nullptr;
  }
  return *this;
}

SocketRef::~SocketRef() {
  if (state_ != nullptr) release(state_);
}

bool is_offload_candidate(int domain, int type, int protocol) {
  if (domain != AF_INET && domain != AF_INET6) return false;
  int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (base == SOCK_STREAM) return protocol == 0 || protocol == IPPROTO_TCP;
  if (base == SOCK_DGRAM) return protocol == 0 || protocol == IPPROTO_UDP;
  return false;
}

SocketRef register_socket(int fd, int domain, int type, int protocol, SocketRole role) {
  core::report_config_problems();
  stats_publisher_start();  // the first socket of the process: publish for vsock-stat
  int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (!is_offload_candidate(domain, type, protocol)) {
    core::stat_add(core::Stat::other_sockets);
    forget_fd(fd);
    return SocketRef();
  }
  core::stat_add(base == SOCK_STREAM ? core::Stat::tcp_sockets : core::Stat::udp_sockets);
  SocketState* s = pool_take();
  if (s == nullptr) {  // out of memory: the socket simply stays a kernel socket
    forget_fd(fd);
    return SocketRef();
  }
  reset(s, domain, base, protocol, role);
  s->refs.store(2, std::memory_order_release);  // the table's reference and the caller's
  install(fd, s);
  return SocketRef(s);
}

SocketRef lookup_socket(int fd) {
  for (;;) {
    SocketState* s = g_table.lookup(fd);
    if (s == nullptr) return SocketRef();
    if (!try_acquire(s)) continue;  // being recycled: the slot has changed, look again
    if (g_table.lookup(fd) == s) return SocketRef(s);
    release(s);  // recycled for another fd between the two loads
  }
}

void forget_fd(int fd) { install(fd, nullptr); }

void share_fd(int oldfd, int newfd) {
  if (oldfd == newfd) return;
  SocketRef ref = lookup_socket(oldfd);
  if (!ref) {
    forget_fd(newfd);
    return;
  }
  SocketState* s = ref.get();
  s->refs.fetch_add(1, std::memory_order_acq_rel);  // the new slot's reference
  install(newfd, s);
}

int find_fd_of(const SocketState* state, uint64_t generation, int except) {
  int found = -1;
  g_table.for_each_used(0, INT32_MAX, [&](int fd) {
    if (found >= 0 || fd == except) return;
    SocketRef ref = lookup_socket(fd);
    if (ref.get() == state && ref->generation.load(std::memory_order_acquire) == generation) found = fd;
  });
  return found;
}

void for_each_socket(void (*fn)(int fd, const SocketRef& ref)) {
  g_table.for_each_used(0, INT32_MAX, [fn](int fd) {
    if (SocketRef ref = lookup_socket(fd)) fn(fd, ref);
  });
}

void forget_fd_range(unsigned int first, unsigned int last) {
  if (first > static_cast<unsigned int>(INT32_MAX)) return;
  if (last > static_cast<unsigned int>(INT32_MAX)) last = INT32_MAX;
  g_table.for_each_used(static_cast<int>(first), static_cast<int>(last), [](int fd) { forget_fd(fd); });
}

std::vector<std::pair<int, SocketRef>> sockets_in_range(unsigned int first, unsigned int last) {
  std::vector<std::pair<int, SocketRef>> found;
  if (first > static_cast<unsigned int>(INT32_MAX)) return found;
  if (last > static_cast<unsigned int>(INT32_MAX)) last = INT32_MAX;
  g_table.for_each_used(static_cast<int>(first), static_cast<int>(last), [&found](int fd) {
    if (SocketRef ref = lookup_socket(fd)) found.emplace_back(fd, std::move(ref));
  });
  return found;
}

}  // namespace vsock::sock
