#include "sock/offload_policy.hpp"

#include <dirent.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/config.hpp"
#include "core/log.hpp"
#include "core/small_file.hpp"
#include "core/stats.hpp"
#include "rdma/device.hpp"
#include "sys/reentry_guard.hpp"

namespace vsock::sock {
namespace {

// The process's device, or null; the probe runs (and logs) once per
// process: a child of fork() opens its own (rdma::probe_device).
std::atomic<bool> g_reported{false};
// What the probe found in this process: 0 not run yet, 1 a device, -1 none.
std::atomic<int> g_probe_outcome{0};

void report_again_in_child() {
  g_reported.store(false);
  g_probe_outcome.store(0);
}

__attribute__((constructor)) void install_report_fork_handler() {
  pthread_atfork(nullptr, nullptr, report_again_in_child);
}

rdma::Device* the_device() {
  sys::ReentryGuard guard;  // libibverbs reads sysfs and opens /dev files
  const std::string& name = core::config().settings.device;
  core::Result<rdma::Device*> device = rdma::probe_device(name);
  g_probe_outcome.store(device ? 1 : -1);
  if (g_reported.exchange(true)) return device ? device.value() : nullptr;
  if (!device) {
    VSOCK_LOG(kInfo, "no usable verbs device%s%s (%s): every socket stays on the kernel",
              name.empty() ? "" : " named ", name.c_str(), std::strerror(device.error()));
    return nullptr;
  }
  core::stat_set(core::Stat::device_opened, 1);
  VSOCK_LOG(kInfo, "using verbs device %s port %u", device.value()->name().c_str(),
            static_cast<unsigned>(device.value()->port()));
  return device.value();
}

// Whether sysfs lists a verbs device with an ACTIVE port (the named one, if
// one is named): a few reads, no device opened. Asked once per process.
// (No function-local static: a fork while another thread fills one would
// leave the child waiting on its guard; two threads that both look agree.)
std::atomic<int> g_listed{0};  // 0 not looked yet, 1 listed, -1 not

bool look_for_active_port() {
  sys::ReentryGuard guard;
  const std::string& name = core::config().settings.device;
  DIR* devices = ::opendir("/sys/class/infiniband");
  if (devices == nullptr) return false;
  bool found = false;
  for (int seen = 0; !found && seen < 64; ++seen) {  // bounded: a handful of devices at most
    dirent* device = ::readdir(devices);
    if (device == nullptr) break;
    if (device->d_name[0] == '.' || (!name.empty() && name != device->d_name)) continue;
    for (int port = 1; !found && port <= 4; ++port) {
      char path[512];
      std::snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%d/state", device->d_name, port);
      std::string state;
      if (!core::read_small_file(path, &state)) break;
      found = state.find("ACTIVE") != std::string::npos;
    }
  }
  ::closedir(devices);
  return found;
}

bool active_port_listed() {
  int listed = g_listed.load(std::memory_order_relaxed);
  if (listed == 0) {
    listed = look_for_active_port() ? 1 : -1;
    g_listed.store(listed, std::memory_order_relaxed);
  }
  return listed > 0;
}

// Whether a new socket may ever leave the kernel for want of a device. The
// device is opened by the first socket that upgrades something (the side
// band, the UD endpoint: offload_device()), not by the first socket made: a
// process that makes sockets and upgrades none opens nothing (issue 10
// item 5). Until then a device with an ACTIVE port in sysfs is enough;
// where there is none the probe runs here, as before, and says so.
bool have_device() {
  int outcome = g_probe_outcome.load();
  if (outcome != 0) return outcome > 0;
  if (active_port_listed()) return true;
  return the_device() != nullptr;
}

}  // namespace

rdma::Device* offload_device() { return the_device(); }

void choose_initial_path(SocketState* state) {
  const core::Settings& settings = core::config().settings;
  core::OffloadMode mode = state->type == SOCK_STREAM ? settings.tcp : settings.udp;
  if (mode == core::OffloadMode::kKernel) {
    state->kernel_reason.store(KernelReason::kRule);
    core::stat_add(core::Stat::kernel_by_rule);
    return;
  }
  if (!have_device()) {
    state->kernel_reason.store(KernelReason::kNoDevice);
    core::stat_add(core::Stat::kernel_no_device);
  }
}

}  // namespace vsock::sock
