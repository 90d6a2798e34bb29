// The libibverbs provider (the user-space driver library) a kernel verbs
// device needs, loaded before libibverbs looks for it.
//
// Why: the first ibv_get_device_list() of a process matches each device in
// sysfs against the providers already loaded, and when one is left over it
// dlopen()s every provider named in /etc/libibverbs.d — seventeen on
// Debian 12, each a shared object to map and relocate. Under the Soft-RoCE
// test bed that took 50–130 ms of a process's first upgraded connection;
// with the one provider loaded first, 6–17 ms (docs/performance.md,
// "Connection set-up"). The provider registers itself when loaded (its
// constructor), so libibverbs then finds every device served and loads
// nothing more.
//
// The match is a guess from sysfs (the PCI driver of a hardware device;
// node type for the two software devices), never a decision: a wrong or
// missing guess only means libibverbs loads all its providers, as without
// this. librdmacm's own device list profits too: it asks libibverbs.
#pragma once
#include <string>

namespace vsock::rdma {

// What sysfs says of one device under /sys/class/infiniband/NAME.
struct VerbsDeviceFacts {
  // The kernel driver of the device's parent (the basename of
  // device/driver, e.g. "mlx5_core"); empty for a virtual device (rxe,
  // siw), which has no such link.
  std::string parent_driver;
  // The number that node_type starts with: 1 a channel adapter (rxe, and
  // InfiniBand and RoCE adapters), 4 an RNIC (iWARP: siw); 0 unknown.
  int node_type = 0;
};

// The provider's name as libibverbs spells it (the X of libX-rdmavN.so):
// "mlx5", "rxe", ...; empty when these facts name none we know.
std::string provider_for(const VerbsDeviceFacts& facts);

// The facts of the device called `name`, read from sysfs.
VerbsDeviceFacts read_device_facts(const std::string& name);

// Loads, once per process and before the first device list, the provider of
// the device called `only` (every device in sysfs when empty) from
// libibverbs' provider directory (next to libibverbs itself); what it
// loaded, or why not, goes to the debug log.
void preload_verbs_providers(const std::string& only);

}  // namespace vsock::rdma
