// The verbs devices and ports of this machine, as vsock-info shows them:
// state, link layer, active MTU and every GID with its address and type.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vsock::info {

struct GidInfo {
  int index = 0;
  std::string gid;      // "fe80::...", as the kernel's GID table shows it
  std::string address;  // "10.0.2.15" for an IPv4-mapped GID, else the IPv6 form
  std::string type;     // "RoCE v2", "RoCE v1", "IB"
  bool roce_v2_ipv4 = false;
};

struct PortInfo {
  std::string device;
  int port = 0;
  bool active = false;
  std::string state;       // "ACTIVE", "DOWN", ...
  std::string link_layer;  // "Ethernet" or "InfiniBand"
  int active_mtu = 0;      // bytes
  std::vector<GidInfo> gids;
  int usable_gid = -1;     // the GID the library would pick (index into gids), -1: none
};

struct DeviceScan {
  std::vector<PortInfo> ports;
  int device_count = 0;
  std::string error;  // why the scan found nothing, when it found nothing
};

// Opens every verbs device (or only `only_device` when not empty) and
// queries its ports and GID tables.
DeviceScan scan_devices(const std::string& only_device);

// Prints the scan, one block per port.
void print_devices(const DeviceScan& scan);

}  // namespace vsock::info
