#include "sock/offload_policy.hpp"

#include <pthread.h>
#include <sys/socket.h>

#include <atomic>
#include <cstring>

#include "core/config.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "rdma/device.hpp"
#include "sys/reentry_guard.hpp"

namespace vsock::sock {
namespace {

// The process's device, or null; the probe runs (and logs) once per
// process: a child of fork() opens its own (rdma::probe_device).
std::atomic<bool> g_reported{false};

void report_again_in_child() { g_reported.store(false); }

__attribute__((constructor)) void install_report_fork_handler() {
  pthread_atfork(nullptr, nullptr, report_again_in_child);
}

rdma::Device* the_device() {
  sys::ReentryGuard guard;  // libibverbs reads sysfs and opens /dev files
  const std::string& name = core::config().settings.device;
  core::Result<rdma::Device*> device = rdma::probe_device(name);
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

bool have_device() { return the_device() != nullptr; }

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
