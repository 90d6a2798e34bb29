// Process-level entry points (fork, daemon; vfork is in vfork_x86_64.S)
// and the library's constructor and destructor.
#include <unistd.h>

#include "core/config.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "preload/entry_common.hpp"
#include "sock/stream/fork_children.hpp"
#include "sock/stream/stream_handoff.hpp"
#include "sock/stats_publisher.hpp"
#include "sock/upgrade/listener_boards.hpp"
#include "sock/stream/stream_hooks.hpp"
#include "vsock/vsock.h"

using namespace vsock;
using vsock::preload::real;

// Both processes may use every socket after a fork. Switched connections
// stay on RDMA here; the child's first use of one asks us to hand it back
// to TCP (docs/protocol.md §5.2). The rest (upgrades under way) go back to
// TCP first (§5). All stay locked across the fork so the child copies none
// of them half-changed.
VSOCK_EXPORT pid_t fork(void) {
  sock::HandoffHold hold;
  // Datagram sockets first: leaving UD takes the side band's lock, which
  // its thread may hold while it waits for a stream's (held from here on).
  if (!sys::in_library()) {
    sock::dgram::leave_all_datagram_sockets();
    sock::hand_off_all_streams(&hold, sock::HandoffKind::kFork);
  }
  pid_t pid = real().fork();
  int saved = errno;
  if (pid == 0) core::stats_start_anew_in_child();  // before the child counts anything of its own
  if (pid > 0 && hold.fork_sequence() != 0) {
    sock::note_fork_child(pid, hold.fork_sequence());
    core::stat_add(core::Stat::forks_keeping_rdma);
  }
  hold.release(pid == 0);
  if (pid == 0 && !sys::in_library()) sock::dgram::abandon_datagram_sockets_in_child();
  if (pid > 0) core::stat_add(core::Stat::forks);
  errno = saved;
  return pid;
}

VSOCK_EXPORT int daemon(int nochdir, int noclose) {
  // glibc's daemon() forks internally, past our fork(): the child goes on
  // with the sockets, and with the counts (its parent exits without
  // printing them).
  if (!sys::in_library()) {
    sock::dgram::leave_all_datagram_sockets();
    sock::HandoffHold hold;
    sock::hand_off_all_streams(&hold, sock::HandoffKind::kDaemon);
  }
  int rc = real().daemon(nochdir, noclose);
  if (rc == 0) {
    core::stat_add(core::Stat::forks);
    if (!sys::in_library()) {
      preload::ErrnoKeeper keep;
      sock::adopt_inherited_listeners();
    }
  }
  return rc;
}

// Called by the vfork trampoline before it jumps to the real vfork; not
// exported (hidden by the version script). The child shares our memory
// until it execs, and the program it execs knows nothing of the rings: the
// connections go back to TCP here, in the parent, before the vfork.
extern "C" void* vsock_real_vfork_address(void) {
  if (!sys::in_library()) {
    int saved = errno;
    sock::HandoffHold hold;
    sock::hand_off_all_streams(&hold, sock::HandoffKind::kAway);
    hold.release(false);
    sock::dgram::leave_all_datagram_sockets();
    errno = saved;
  }
  return reinterpret_cast<void*>(real().vfork);
}

namespace {

__attribute__((constructor)) void library_loaded() {
  sys::ReentryGuard guard;
  const core::Config& config = core::config();
  VSOCK_LOG(kInfo, "libvsock %s loaded, profile %s%s%s", vsock_version(),
            core::profile_name(config.settings.profile), config.file.empty() ? "" : ", rules file ",
            config.file.c_str());
  // A program exec'd with a connection as its stdin/stdout (inetd's
  // handlers): the library starts fresh here and must learn of it.
  sock::adopt_inherited_connections();
}

__attribute__((destructor)) void library_unloading() {
  sock::finish_streams_at_exit();
  sock::release_listener_boards_at_exit();
  sock::dgram::finish_datagrams_at_exit();
  sock::stats_publisher_remove();
  if (core::config().settings.stats) core::stats_print();
}

}  // namespace
