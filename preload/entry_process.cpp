// Process-level entry points (fork, daemon; vfork is in vfork_x86_64.S)
// and the library's constructor and destructor.
#include <unistd.h>

#include "core/config.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "preload/entry_common.hpp"
#include "sock/stream_hooks.hpp"
#include "vsock/vsock.h"

using namespace vsock;
using vsock::preload::real;

VSOCK_EXPORT pid_t fork(void) {
  pid_t pid = real().fork();
  if (pid > 0) core::stat_add(core::Stat::forks);
  return pid;
}

VSOCK_EXPORT int daemon(int nochdir, int noclose) {
  // glibc's daemon() forks internally, past our fork(); count it here.
  int rc = real().daemon(nochdir, noclose);
  if (rc == 0) core::stat_add(core::Stat::forks);
  return rc;
}

// Called by the vfork trampoline; not exported (hidden by the version script).
extern "C" void* vsock_real_vfork_address(void) { return reinterpret_cast<void*>(real().vfork); }

namespace {

__attribute__((constructor)) void library_loaded() {
  sys::ReentryGuard guard;
  const core::Config& config = core::config();
  VSOCK_LOG(kInfo, "libvsock %s loaded, profile %s%s%s", vsock_version(),
            core::profile_name(config.settings.profile), config.file.empty() ? "" : ", rules file ",
            config.file.c_str());
}

__attribute__((destructor)) void library_unloading() {
  sock::finish_streams_at_exit();
  if (core::config().settings.stats) core::stats_print();
}

}  // namespace
