#include "tools/vsock_info/device_report.hpp"

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace vsock::info {
namespace {

// Address vectors carry an 8-bit GID index; the library scans no further.
constexpr int kMaxGidScan = 256;

const char* port_state_name(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_NOP: return "NOP";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
  }
  return "UNKNOWN";
}

bool is_zero(const ibv_gid& gid) { return gid.global.subnet_prefix == 0 && gid.global.interface_id == 0; }

bool is_ipv4_mapped(const ibv_gid& gid) {
  for (int i = 0; i < 10; ++i)
    if (gid.raw[i] != 0) return false;
  return gid.raw[10] == 0xff && gid.raw[11] == 0xff;
}

GidInfo describe_gid(const ibv_gid_entry& entry) {
  GidInfo info;
  info.index = static_cast<int>(entry.gid_index);
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, entry.gid.raw, text, sizeof text);
  info.gid = text;
  if (is_ipv4_mapped(entry.gid)) {
    char v4[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, entry.gid.raw + 12, v4, sizeof v4);
    info.address = v4;
  } else {
    info.address = text;
  }
  switch (entry.gid_type) {
    case IBV_GID_TYPE_ROCE_V2: info.type = "RoCE v2"; break;
    case IBV_GID_TYPE_ROCE_V1: info.type = "RoCE v1"; break;
    default: info.type = "IB"; break;
  }
  info.roce_v2_ipv4 = entry.gid_type == IBV_GID_TYPE_ROCE_V2 && is_ipv4_mapped(entry.gid);
  return info;
}

// The library's choice (src/rdma/device.cpp): on Ethernet the RoCE v2 GID
// holding an IPv4 address, else any RoCE v2 GID, else any GID; on
// InfiniBand GID 0.
int pick_usable_gid(const PortInfo& port) {
  if (port.gids.empty()) return -1;
  if (port.link_layer != "Ethernet") return port.gids.front().index == 0 ? 0 : -1;
  for (size_t i = 0; i < port.gids.size(); ++i)
    if (port.gids[i].roce_v2_ipv4) return static_cast<int>(i);
  for (size_t i = 0; i < port.gids.size(); ++i)
    if (port.gids[i].type == "RoCE v2") return static_cast<int>(i);
  return 0;
}

PortInfo scan_port(ibv_context* context, const char* device, uint8_t port_num) {
  PortInfo port;
  port.device = device;
  port.port = port_num;
  ibv_port_attr attr{};
  if (ibv_query_port(context, port_num, &attr) != 0) {
    port.state = std::string("query failed: ") + std::strerror(errno);
    return port;
  }
  port.state = port_state_name(attr.state);
  port.active = attr.state == IBV_PORT_ACTIVE;
  port.link_layer = attr.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
  port.active_mtu = 128 << attr.active_mtu;  // IBV_MTU_256 is 1
  int table_len = attr.gid_tbl_len < kMaxGidScan ? attr.gid_tbl_len : kMaxGidScan;
  for (int i = 0; i < table_len; ++i) {
    ibv_gid_entry entry{};
    if (ibv_query_gid_ex(context, port_num, static_cast<uint32_t>(i), &entry, 0) != 0) continue;  // empty slot
    if (is_zero(entry.gid)) continue;
    port.gids.push_back(describe_gid(entry));
  }
  port.usable_gid = pick_usable_gid(port);
  return port;
}

}  // namespace

DeviceScan scan_devices(const std::string& only_device) {
  DeviceScan scan;
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) {
    // ENOSYS: the kernel has no RDMA subsystem (no /sys/class/infiniband).
    scan.error = std::string("no verbs device (ibv_get_device_list: ") + std::strerror(errno) +
                 (errno == ENOSYS ? "; this kernel has no RDMA support loaded)" : ")");
    return scan;
  }
  for (int d = 0; d < count; ++d) {
    const char* name = ibv_get_device_name(list[d]);
    if (!only_device.empty() && only_device != name) continue;
    ++scan.device_count;
    ibv_context* context = ibv_open_device(list[d]);
    if (context == nullptr) {
      PortInfo failed;
      failed.device = name;
      failed.state = std::string("cannot open: ") + std::strerror(errno);
      scan.ports.push_back(failed);
      continue;
    }
    ibv_device_attr attr{};
    if (ibv_query_device(context, &attr) == 0)
      for (uint8_t p = 1; p <= attr.phys_port_cnt; ++p) scan.ports.push_back(scan_port(context, name, p));
    ibv_close_device(context);
  }
  ibv_free_device_list(list);
  if (scan.device_count == 0)
    scan.error = only_device.empty() ? "no verbs device (no RDMA NIC driver or rdma_rxe/siw link loaded)"
                                     : "no verbs device called '" + only_device + "' (the device setting)";
  return scan;
}

void print_devices(const DeviceScan& scan) {
  std::printf("devices:\n");
  if (scan.ports.empty()) std::printf("  none: %s\n", scan.error.c_str());
  for (const PortInfo& port : scan.ports) {
    std::printf("  %s port %d: %s", port.device.c_str(), port.port, port.state.c_str());
    if (!port.link_layer.empty()) std::printf(", %s, active MTU %d", port.link_layer.c_str(), port.active_mtu);
    std::printf("\n");
    for (size_t i = 0; i < port.gids.size(); ++i) {
      const GidInfo& gid = port.gids[i];
      std::printf("    gid %-3d %-40s %-8s %s%s\n", gid.index, gid.gid.c_str(), gid.type.c_str(), gid.address.c_str(),
                  static_cast<int>(i) == port.usable_gid ? "  <- used" : "");
    }
    if (!port.link_layer.empty() && port.gids.empty()) std::printf("    no GIDs (is an IP address configured?)\n");
  }
}

}  // namespace vsock::info
