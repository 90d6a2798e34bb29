// What vsock-stat shows of one socket: a row of the stats segment
// (core/stats_segment.hpp), built by the publisher's thread from the
// registry's state, the StreamSocket's own snapshot (taken under its lock)
// and the kernel's TCP_INFO. Nothing here runs on the data path.
#pragma once
#include <cstdint>

#include "core/stats_segment.hpp"
#include "sock/registry.hpp"
#include "sock/upgrade/upgrade_state.hpp"

namespace vsock::sock {

// StreamSocket::snapshot() fills it (socket_report.cpp defines it, so the
// stream files carry only the declaration).
struct StreamSnapshot {
  UpgradePhase phase = UpgradePhase::kKernel;
  FallbackReason fallback = FallbackReason::kNone;
  bool kernel_only = false;
  bool reverted = false;     // a Revert went either way (docs/protocol.md §5)
  bool resumed = false;      // ... or RDMA failed under it and it went on over TCP (§5.1)
  bool has_channel = false;
  uint64_t rdma_bytes_sent = 0;
  uint64_t rdma_bytes_received = 0;
  uint64_t rdma_in_flight = 0;
  uint64_t rdma_readable = 0;
  uint64_t credit_stalls = 0;
};

// Where a stream stands, from its snapshot and the registry's reason.
void classify_stream(const StreamSnapshot& snapshot, KernelReason registry_reason, core::SocketPath* path,
                     core::KernelWhy* why);

// Fills *row for the socket `ref` found at `fd`. False when the fd no
// longer refers to that socket once the row is built (closed or reused
// meanwhile: the kernel's answers may be another socket's), or it is not
// a socket vsock-stat lists.
bool report_socket(int fd, const SocketRef& ref, core::SocketRecord* row);

}  // namespace vsock::sock
