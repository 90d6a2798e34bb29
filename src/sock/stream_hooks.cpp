#include "sock/stream_hooks.hpp"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <cstring>

#include "core/config.hpp"
#include "core/stats.hpp"
#include "sock/upgrade_engine.hpp"
#include "sys/real_calls.hpp"
#include "sys/reentry_guard.hpp"

namespace vsock::sock {
namespace {

// How long exit waits for one connection's data and FIN to be delivered.
constexpr int kExitDrainMs = 2000;

// Whether the settings and rules let this socket use RDMA at all.
bool offload_allowed(SocketState* state, core::Role role, const sockaddr* addr) {
  if (state->type != SOCK_STREAM || state->kernel_reason.load() != KernelReason::kUndecided) return false;
  const core::Config& config = core::config();
  core::Endpoint endpoint;
  endpoint.proto = core::Proto::kTcp;
  endpoint.program = program_invocation_short_name;
  endpoint.role = role;
  endpoint.addr = addr;
  if (core::decide(config.rules, endpoint, config.settings.tcp) == core::OffloadMode::kKernel) {
    state->kernel_reason.store(KernelReason::kRule);
    core::stat_add(core::Stat::kernel_by_rule);
    return false;
  }
  return true;
}

// Installs `stream` in the state (which then owns the creation reference).
bool attach(SocketState* state, StreamSocket* stream) {
  StreamSocket* expected = nullptr;
  if (state->stream.compare_exchange_strong(expected, stream, std::memory_order_acq_rel)) return true;
  stream->release();  // another thread attached one first (two connects at once)
  return false;
}

// Options the library applies itself on the ring, read once from the
// kernel socket (accept() copies them from the listener).
void copy_kernel_options(int fd, StreamSocket* stream) {
  int low_water = 1;
  socklen_t len = sizeof low_water;
  if (sys::real().getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &low_water, &len) == 0)
    stream->set_receive_low_water(low_water);
  int no_delay = 0;
  len = sizeof no_delay;
  if (sys::real().getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &no_delay, &len) == 0) stream->set_no_delay(no_delay != 0);
}

}  // namespace

void on_connected(int fd, SocketState* state, const sockaddr* peer, socklen_t peer_len, bool blocking_done) {
  if (peer == nullptr || (peer->sa_family != AF_INET && peer->sa_family != AF_INET6)) return;
  if (!offload_allowed(state, core::Role::kClient, peer)) return;
  sys::ReentryGuard guard;
  UpgradeEngine* engine = upgrade_engine();
  if (engine == nullptr) return;
  if (engine->peer_failed_recently(peer, peer_len)) {
    core::stat_add(core::Stat::fallback_cached_peer);
    return;
  }
  auto* stream = new (std::nothrow) StreamSocket(UpgradeRole::kClient, new_nonce());
  if (stream == nullptr || !attach(state, stream)) return;
  copy_kernel_options(fd, stream);
  if (!engine->start_connect(fd, stream, peer, peer_len)) return;
  // Wait a little longer than the connector's own bound, which ends it.
  if (blocking_done) stream->wait_settled(static_cast<int>(core::config().settings.upgrade_timeout_ms) + 100);
}

void on_listening(int fd, SocketState* state) {
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  sys::ReentryGuard guard;
  if (sys::real().getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return;
  if (!offload_allowed(state, core::Role::kServer, reinterpret_cast<sockaddr*>(&local))) return;
  if (state->listen_key.load() != 0) return;  // listen() again: already listening
  UpgradeEngine* engine = upgrade_engine();
  if (engine == nullptr) return;
  uint64_t key = engine->listen(fd);
  uint64_t expected = 0;
  if (key != 0 && !state->listen_key.compare_exchange_strong(expected, key)) engine->stop_listening(key);
}

void on_accepted(int fd, SocketState* listener, SocketState* accepted) {
  uint64_t key = listener->listen_key.load();
  if (key == 0 || accepted->kernel_reason.load() != KernelReason::kUndecided) return;
  sys::ReentryGuard guard;
  UpgradeEngine* engine = upgrade_engine();
  if (engine == nullptr) return;
  auto* stream = new (std::nothrow) StreamSocket(UpgradeRole::kServer, 0);
  if (stream == nullptr || !attach(accepted, stream)) return;
  copy_kernel_options(fd, stream);
  engine->on_accepted(key, fd, stream);
}

bool is_stream_option(int level, int name) {
  return (level == SOL_SOCKET && name == SO_RCVLOWAT) || (level == IPPROTO_TCP && name == TCP_NODELAY);
}

bool is_unsupported_option(int level, int name) {
  if (level == SOL_SOCKET)
    return name == SO_ATTACH_FILTER || name == SO_ATTACH_BPF || name == SO_ATTACH_REUSEPORT_CBPF ||
           name == SO_ATTACH_REUSEPORT_EBPF || name == SO_OOBINLINE || name == SO_ZEROCOPY;
  if (level == IPPROTO_TCP)
    return name == TCP_FASTOPEN || name == TCP_FASTOPEN_CONNECT || name == TCP_REPAIR || name == TCP_ULP ||
           name == TCP_MD5SIG;
  return false;
}

void on_unsupported_option(SocketState* state, int level, int name) {
  if (!is_unsupported_option(level, name)) return;
  KernelReason expected = KernelReason::kUndecided;
  if (state->kernel_reason.compare_exchange_strong(expected, KernelReason::kOption))
    core::stat_add(core::Stat::kernel_by_rule);
  // A connection already upgrading goes back to TCP if nothing is in a ring yet.
  if (StreamSocket* stream = state->stream.load(std::memory_order_acquire))
    stream->fall_back_now(FallbackReason::kDeclined, "socket option the RDMA path cannot honour");
}

void on_option_set(SocketState* state, int level, int name, const void* value, socklen_t len) {
  if (value == nullptr || len < sizeof(int)) return;
  StreamSocket* stream = state->stream.load(std::memory_order_acquire);
  if (stream == nullptr) return;
  int number;
  std::memcpy(&number, value, sizeof number);
  if (level == SOL_SOCKET && name == SO_RCVLOWAT) stream->set_receive_low_water(number);
  if (level == IPPROTO_TCP && name == TCP_NODELAY) {
    sys::ReentryGuard guard;  // turning Nagle off posts held data (libibverbs)
    stream->set_no_delay(number != 0);
  }
}

void finish_streams_at_exit() {
  sys::ReentryGuard guard;
  for_each_socket([](int, const SocketRef& ref) {
    if (StreamSocket* stream = managed_stream(ref)) stream->finish_at_exit(kExitDrainMs);
  });
}

void on_socket_released(SocketState* state) {
  StreamSocket* stream = state->stream.exchange(nullptr, std::memory_order_acq_rel);
  uint64_t key = state->listen_key.exchange(0);
  if (stream == nullptr && key == 0) return;
  sys::ReentryGuard guard;
  UpgradeEngine* engine = upgrade_engine();
  if (stream != nullptr) {
    bool drain = stream->on_last_close();
    if (engine != nullptr) engine->on_closed(stream, drain);
    stream->release();
  }
  if (key != 0 && engine != nullptr) engine->stop_listening(key);
}

}  // namespace vsock::sock
