// Process-wide counters: incremented lock-free on the paths that decide,
// read by vsock_stats_snapshot() and printed at exit with VSOCK_STATS=1.
//
// Each thread counts into a block of its own (stats.cpp), so a data-path
// call adds with a plain load and store on a cache line no other thread
// writes, instead of a read-modify-write on a line every thread contends
// for; a read sums the blocks. A block outlives its thread (it is handed to
// the next new thread, values kept), so sums never go backwards.
#pragma once
#include <atomic>
#include <cstdint>

namespace vsock::core {

#define VSOCK_STAT_COUNTERS(X) \
  X(tcp_sockets)               \
  X(udp_sockets)               \
  X(other_sockets)             \
  X(kernel_by_rule)            \
  X(kernel_no_device)          \
  X(device_opened)             \
  X(forks)                     \
  X(tcp_bytes_sent)            \
  X(tcp_bytes_received)        \
  X(tcp_sends)                 \
  X(tcp_receives)              \
  X(rdma_bytes_sent)           \
  X(rdma_bytes_received)       \
  X(rdma_sends)                \
  X(rdma_receives)             \
  X(upgrade_attempts)          \
  X(upgrades_done)             \
  X(upgrade_resets)            \
  X(fallback_declined)         \
  X(fallback_cached_peer)      \
  X(fallback_rejected)         \
  X(fallback_no_listener)      \
  X(fallback_unreachable)      \
  X(fallback_timeout)          \
  X(fallback_local_error)      \
  X(fallback_peer_closed)      \
  X(fallback_transport_error)  \
  X(reverts_sent)              \
  X(reverts_received)          \
  X(rdma_writes)               \
  X(wait_sleeps)               \
  X(fallback_refused)          \
  X(upgrade_redirects)         \
  X(rendezvous_claims)         \
  X(upgrade_requests_forged)   \
  X(stream_violations)         \
  X(fallback_no_request)       \
  X(udp_ud_sends)              \
  X(udp_ud_receives)           \
  X(udp_ud_bytes_sent)         \
  X(udp_ud_bytes_received)     \
  X(udp_kernel_sends)          \
  X(udp_kernel_receives)       \
  X(udp_resolutions)           \
  X(udp_resolution_failures)   \
  X(udp_drops_budget)          \
  X(udp_drops_malformed)       \
  X(udp_drops_unknown_socket)  \
  X(udp_drops_reassembly)      \
  X(udp_revokes_sent)          \
  X(udp_revokes_received)      \
  X(udp_ud_posts)              \
  X(udp_unreach_sent)          \
  X(udp_unreach_received)      \
  X(udp_mcast_joins)           \
  X(udp_mcast_join_failures)   \
  X(udp_mcast_leaves)          \
  X(udp_mcast_sends)           \
  X(udp_mcast_receives)        \
  X(udp_mcast_drops_loop)      \
  X(udp_send_errors)           \
  X(stream_resumes)            \
  X(udp_ud_restarts)           \
  X(udp_announces_sent)        \
  X(udp_announces_received)    \
  X(forks_keeping_rdma)        \
  X(fork_handbacks)            \
  X(fallback_no_resources)     \
  X(registered_bytes)          \
  X(registered_bytes_peak)     \
  X(close_handbacks)           \
  X(ring_grows)                \
  X(upgrade_tokens_refused)    \
  X(channels_parked)           \
  X(upgrade_attached)          \
  X(attach_refused)            \
  X(attach_failed)             \
  X(parked_yielded)            \
  X(parked_now)                \
  X(epoll_quiet_wakes)

enum class Stat : int {
#define VSOCK_STAT_ENUM(name) name,
  VSOCK_STAT_COUNTERS(VSOCK_STAT_ENUM)
#undef VSOCK_STAT_ENUM
  kCount
};

void stat_add(Stat stat, uint64_t amount = 1);
// For a counter that is only ever set, never added to (a flag such as
// device_opened): the value stat_get() adds to the threads' sums.
void stat_set(Stat stat, uint64_t value);
uint64_t stat_get(Stat stat);
// One call that moved `bytes` (> 0) on a path: its byte and call counters.
void stat_transfer(Stat bytes_counter, Stat calls_counter, uint64_t bytes);
const char* stat_name(Stat stat);

// In a fork() child, right after the fork: every counter and set value back
// to 0, so the child reports what it did itself and the sum of the stats
// lines of a forking server is what the server did (the parent's counts
// stay with the parent, which prints them). The threads the parent had do
// not exist here: their blocks are given to the child's next new threads.
void stats_start_anew_in_child();

// Writes "libvsock[pid]: stats: name=value ..." to the log destination.
void stats_print();

}  // namespace vsock::core
