// Device: an opened verbs device, the port the library uses on it and the
// GID it addresses peers with. Move-only; closes the device on destruction.
#pragma once
#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "core/result.hpp"

namespace vsock::rdma {

class Device {
 public:
  static constexpr int kAutoGidIndex = -1;

  // Opens the device called `name` (e.g. the value of VSOCK_DEVICE), or the
  // first device that has an ACTIVE port when `name` is empty. Picks that
  // device's first ACTIVE port and, unless `gid_index` is given, its GID:
  // on Ethernet (RoCE) the IPv4-mapped RoCEv2 GID, which is what rdma_cm and
  // IP-routed peers use; on InfiniBand GID 0. Calls ibv_fork_init() first so
  // that memory registered later is never shared with a forked child.
  // Errors: ENODEV (no such / no active device), ENETDOWN (named device has
  // no ACTIVE port), ENODATA (no usable GID), or the errno of a verbs call.
  static core::Result<Device> open(const std::string& name, int gid_index = kAutoGidIndex);

  Device() = default;
  ~Device();
  Device(Device&& other) noexcept;
  Device& operator=(Device&& other) noexcept;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  bool valid() const { return context_ != nullptr; }
  ibv_context* context() const { return context_; }
  const std::string& name() const { return name_; }
  uint8_t port() const { return port_; }
  int gid_index() const { return gid_index_; }
  const ibv_gid& gid() const { return gid_; }
  uint16_t lid() const { return port_attr_.lid; }
  ibv_mtu active_mtu() const { return port_attr_.active_mtu; }
  bool is_ethernet() const { return port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET; }
  const ibv_device_attr& attr() const { return device_attr_; }
  const ibv_port_attr& port_attr() const { return port_attr_; }

 private:
  void reset();
  int select_port(int gid_index);

  ibv_context* context_ = nullptr;
  std::string name_;
  uint8_t port_ = 0;
  int gid_index_ = 0;
  ibv_gid gid_{};
  ibv_port_attr port_attr_{};
  ibv_device_attr device_attr_{};
};

// The process-wide device, opened on first call (thread-safe) with `name`
// ("" = first ACTIVE device). Later calls return the same outcome, whatever
// name they pass: the library decides once per process whether it has a
// device (a child of fork() decides again: it cannot use its parent's). The Device is never closed (it must outlive every socket, even
// those closed by static destructors at exit); the kernel releases it.
core::Result<Device*> probe_device(const std::string& name);

}  // namespace vsock::rdma
