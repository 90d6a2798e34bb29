// The stats publisher: one thread per process that keeps the process's
// stats segment (core/stats_segment.hpp) for vsock-stat — created when the
// process makes its first socket (nothing at all with VSOCK_STATS_SHM=0),
// refreshed when a reader asks, removed at exit. The data path is not
// touched: the thread sums the per-thread counters and walks the registry.
#pragma once

namespace vsock::sock {

// Starts the publisher if the settings want one and it has not started in
// this process yet. After the first call, one relaxed load.
void stats_publisher_start();

// The child of fork() or daemon(): the parent's segment is not ours (the
// fork handler dropped our view of it); start a publisher of our own if
// the parent had one.
void stats_publisher_after_fork_child();

// Removes this process's segment (the library's destructor, at exit).
void stats_publisher_remove();

}  // namespace vsock::sock
