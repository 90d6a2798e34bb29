#include "rdma/device.hpp"

#include <pthread.h>

#include <cerrno>
#include <mutex>
#include <new>
#include <utility>

#include "core/log.hpp"
#include "rdma/fork_guard.hpp"
#include "rdma/status.hpp"
#include "rdma/verbs_loader.hpp"
#include "rdma/verbs_provider.hpp"

namespace vsock::rdma {
namespace {

// Address vectors name the source GID with an 8-bit index, so only the
// first 256 entries are usable (rxe's table has 1024 slots, mostly empty).
constexpr int kMaxGidScan = 256;

// Once per process and before anything is registered: ibv_fork_init() makes
// registrations MADV_DONTFORK, so a forked child never shares (and never
// corrupts) the parent's registered pages. On kernels that are fork-safe on
// their own, libibverbs reports IBV_FORK_UNNEEDED and that is fine too.
Status ensure_fork_safety() {
  static const Status status = []() -> Status {
    int rc = ibv_fork_init();
    if (rc == 0 || ibv_is_fork_initialized() == IBV_FORK_UNNEEDED) return ok_status();
    return Status::fail(report_error(rc, "ibv_fork_init"));
  }();
  return status;
}

bool is_ipv4_mapped(const ibv_gid& gid) {
  for (int i = 0; i < 10; ++i)
    if (gid.raw[i] != 0) return false;
  return gid.raw[10] == 0xff && gid.raw[11] == 0xff;
}

bool is_zero(const ibv_gid& gid) { return gid.global.subnet_prefix == 0 && gid.global.interface_id == 0; }

// Ethernet ports carry one GID per IP address and RoCE version. Peers reached
// over IP (and rdma_cm) use the RoCEv2 GID holding the IPv4 address; fall
// back to any RoCEv2 GID, then to any GID at all.
core::Result<int> pick_roce_gid(ibv_context* context, uint8_t port, int table_len) {
  int any_v2 = -1, any = -1;
  int limit = table_len < kMaxGidScan ? table_len : kMaxGidScan;
  for (int i = 0; i < limit; ++i) {
    ibv_gid_entry entry{};
    if (ibv_query_gid_ex(context, port, static_cast<uint32_t>(i), &entry, 0) != 0) continue;  // empty slot
    if (is_zero(entry.gid)) continue;
    bool v2 = entry.gid_type == IBV_GID_TYPE_ROCE_V2;
    if (v2 && is_ipv4_mapped(entry.gid)) return core::Result<int>::ok(i);
    if (v2 && any_v2 < 0) any_v2 = i;
    if (any < 0) any = i;
  }
  if (any_v2 >= 0) return core::Result<int>::ok(any_v2);
  if (any >= 0) return core::Result<int>::ok(any);
  return core::Result<int>::fail(ENODATA);
}

}  // namespace

Device::~Device() { reset(); }

void Device::reset() {
  if (context_ != nullptr) ibv_close_device(context_);
  context_ = nullptr;
}

Device::Device(Device&& other) noexcept
    : context_(std::exchange(other.context_, nullptr)),
      name_(std::move(other.name_)),
      port_(other.port_),
      gid_index_(other.gid_index_),
      gid_(other.gid_),
      port_attr_(other.port_attr_),
      device_attr_(other.device_attr_) {}

Device& Device::operator=(Device&& other) noexcept {
  if (this != &other) {
    reset();
    context_ = std::exchange(other.context_, nullptr);
    name_ = std::move(other.name_);
    port_ = other.port_;
    gid_index_ = other.gid_index_;
    gid_ = other.gid_;
    port_attr_ = other.port_attr_;
    device_attr_ = other.device_attr_;
  }
  return *this;
}

// Queries the opened device, takes its first ACTIVE port and the GID to use.
// Returns 0 or an errno. No ACTIVE port is ENETDOWN and is not logged here:
// while looking for any usable device that is expected; open() reports the
// overall outcome once.
int Device::select_port(int gid_index) {
  int rc = ibv_query_device(context_, &device_attr_);
  if (rc != 0) return report_error(rc, "ibv_query_device(%s)", name_.c_str());
  port_ = 0;
  for (int p = 1; p <= device_attr_.phys_port_cnt && port_ == 0; ++p) {
    ibv_port_attr attr{};
    rc = ibv_query_port(context_, static_cast<uint8_t>(p), &attr);
    if (rc != 0) return report_error(rc, "ibv_query_port(%s, %d)", name_.c_str(), p);
    if (attr.state == IBV_PORT_ACTIVE) {
      port_ = static_cast<uint8_t>(p);
      port_attr_ = attr;
    }
  }
  if (port_ == 0) return ENETDOWN;

  if (gid_index == kAutoGidIndex) {
    if (!is_ethernet()) {
      gid_index = 0;  // InfiniBand: the port GID; peers are addressed by LID
    } else {
      core::Result<int> picked = pick_roce_gid(context_, port_, port_attr_.gid_tbl_len);
      if (!picked) return report_error(picked.error(), "%s port %u: no usable RoCE GID", name_.c_str(), port_);
      gid_index = picked.value();
    }
  }
  if (gid_index < 0 || gid_index >= port_attr_.gid_tbl_len || gid_index >= kMaxGidScan)
    return report_error(EINVAL, "%s port %u: GID index %d out of range", name_.c_str(), port_, gid_index);
  rc = ibv_query_gid(context_, port_, gid_index, &gid_);
  if (rc != 0) return report_error(errno ? errno : rc, "ibv_query_gid(%s, %d)", name_.c_str(), gid_index);
  gid_index_ = gid_index;
  return 0;
}

core::Result<Device> Device::open(const std::string& name, int gid_index) {
  using R = core::Result<Device>;
  if (!load_verbs()) return R::fail(ENODEV);  // logged where it failed
  Status fork_safe = ensure_fork_safety();
  if (!fork_safe) return R::fail(fork_safe.error());

  ForkGuard no_fork_now;  // the device list and open take process-wide locks
  // The device's provider first, so that libibverbs loads no other.
  preload_verbs_providers(name);
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) {
    // ENOSYS: no kernel verbs support at all; the library falls back quietly.
    VSOCK_LOG(kDebug, "rdma: no verbs devices (ibv_get_device_list: errno %d)", errno);
    return R::fail(ENODEV);
  }
  Device device;
  int error = ENODEV;
  for (int i = 0; i < count && !device.valid(); ++i) {
    const char* device_name = ibv_get_device_name(list[i]);
    if (!name.empty() && name != device_name) continue;
    Device candidate;
    candidate.context_ = ibv_open_device(list[i]);
    if (candidate.context_ == nullptr) {
      error = report_error(errno, "ibv_open_device(%s)", device_name);
    } else {
      candidate.name_ = device_name;
      error = candidate.select_port(gid_index);
      if (error == 0) device = std::move(candidate);
    }
    if (!name.empty()) break;  // the named device was found; no other will do
  }
  ibv_free_device_list(list);
  if (device.valid()) {
    VSOCK_LOG(kDebug, "rdma: using %s port %u gid index %d (%s)", device.name_.c_str(), device.port_,
              device.gid_index_, device.is_ethernet() ? "RoCE" : "InfiniBand");
    return R::ok(std::move(device));
  }
  // No device at all is the normal case on most machines: the library falls
  // back to the kernel without a warning. A device the user named and that
  // cannot be used is a configuration problem worth one warning.
  if (name.empty() && (error == ENODEV || error == ENETDOWN)) {
    VSOCK_LOG(kDebug, "rdma: no verbs device with an ACTIVE port");
    error = ENODEV;
  } else if (error == ENODEV || error == ENETDOWN) {
    VSOCK_LOG(kWarn, "rdma: verbs device %s %s", name.c_str(), error == ENODEV ? "not found" : "has no ACTIVE port");
  }
  return R::fail(error);
}

namespace {

// The probe's outcome, per process. A child of fork() probes again: the
// kernel serves a verbs context's write() commands (ibv_post_send on rxe,
// among others) only to the credentials that opened it, and a forked child
// has its own (EACCES). The parent's Device stays open in the child,
// unused (never closed, as ever).
std::mutex g_probe_lock;
bool g_probed = false;
Device* g_device = nullptr;
int g_probe_error = ENODEV;

void forget_probe_in_child() {
  new (&g_probe_lock) std::mutex();  // another thread may have held it at fork
  g_probed = false;
  g_device = nullptr;
}

__attribute__((constructor)) void install_probe_fork_handler() {
  pthread_atfork(nullptr, nullptr, forget_probe_in_child);
}

}  // namespace

core::Result<Device*> probe_device(const std::string& name) {
  std::lock_guard<std::mutex> held(g_probe_lock);
  if (!g_probed) {
    g_probed = true;
    g_device = nullptr;
    core::Result<Device> opened = Device::open(name);
    if (!opened) {
      g_probe_error = opened.error();
    } else {
      // Deliberately leaked: see the header.
      g_device = new (std::nothrow) Device(std::move(opened.value()));
      g_probe_error = g_device == nullptr ? ENOMEM : 0;
    }
  }
  if (g_device == nullptr) return core::Result<Device*>::fail(g_probe_error);
  return core::Result<Device*>::ok(g_device);
}

}  // namespace vsock::rdma
