// The stats publisher: one thread per process that keeps the process's
// stats segment (core/stats_segment.hpp) for vsock-stat — created when the
// process makes its first socket (nothing at all with VSOCK_STATS_SHM=0),
// refreshed when a reader asks, removed at exit. The data path is not
// touched: the thread sums the per-thread counters and walks the registry.
// A fork child drops the parent's segment (atfork) and starts its own at
// its first socket of its own made a second or more after the fork: not at
// the fork, so that a child that execs or ends soon starts no thread
// (ThreadSanitizer also kills a child that starts one after a
// multi-threaded fork). A child that only uses inherited sockets is not
// listed; its parent is.
#pragma once

namespace vsock::sock {

// Starts the publisher if the settings want one and it has not started in
// this process yet. After the first call, one relaxed load.
void stats_publisher_start();

// Removes this process's segment (the library's destructor, at exit).
void stats_publisher_remove();

}  // namespace vsock::sock
