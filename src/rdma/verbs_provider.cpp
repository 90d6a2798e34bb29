#include "rdma/verbs_provider.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/log.hpp"
#include "core/small_file.hpp"

namespace vsock::rdma {
namespace {

constexpr const char* kSysfsClass = "/sys/class/infiniband";
// A handful of devices at most; the loop is bounded all the same.
constexpr int kMaxDevices = 64;

// The PCI driver of a verbs device's parent, and the provider that serves
// what it registers (the provider's own match is by PCI ID or kernel
// driver ID: this is the same answer read from the other end).
struct ParentDriver {
  const char* driver;
  const char* provider;
};
constexpr ParentDriver kParentDrivers[] = {
    {"mlx5_core", "mlx5"}, {"mlx4_core", "mlx4"},  {"ice", "irdma"},         {"i40e", "irdma"},
    {"irdma", "irdma"},    {"bnxt_en", "bnxt_re"}, {"efa", "efa"},           {"mana", "mana"},
    {"erdma", "erdma"},    {"hns3", "hns"},        {"qede", "qedr"},         {"cxgb4", "cxgb4"},
    {"hfi1", "hfi1verbs"}, {"ib_qib", "ipathverbs"}, {"vmw_pvrdma", "vmw_pvrdma"},
    {"ib_mthca", "mthca"}, {"be2net", "ocrdma"},
};

// libibverbs' provider directory: "libibverbs" beside the libibverbs
// this process runs (where it looks first, VERBS_PROVIDER_DIR). Asked of
// the loaded library itself (libvsock.so loads it at run time:
// verbs_loader.hpp).
std::string provider_directory() {
  void* verbs = ::dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (verbs == nullptr) return {};
  void* function = ::dlsym(verbs, "ibv_get_device_list");
  ::dlclose(verbs);  // only the reference NOLOAD took
  Dl_info info{};
  if (function == nullptr || dladdr(function, &info) == 0 || info.dli_fname == nullptr) return {};
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {};
  return path.substr(0, slash) + "/libibverbs";
}

// The file of `provider` in `directory` (libPROVIDER-rdmavN.so, whatever
// N this libibverbs was built with); empty if none.
std::string provider_file(const std::string& directory, const std::string& provider) {
  DIR* dir = ::opendir(directory.c_str());
  if (dir == nullptr) return {};
  const std::string prefix = "lib" + provider + "-rdmav";
  std::string found;
  for (int seen = 0; found.empty() && seen < 256; ++seen) {
    dirent* entry = ::readdir(dir);
    if (entry == nullptr) break;
    size_t length = std::strlen(entry->d_name);
    if (length > prefix.size() + 3 && std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) == 0 &&
        std::strcmp(entry->d_name + length - 3, ".so") == 0)
      found = directory + "/" + entry->d_name;
  }
  ::closedir(dir);
  return found;
}

std::atomic<bool> g_preloaded{false};

}  // namespace

std::string provider_for(const VerbsDeviceFacts& facts) {
  if (facts.parent_driver.empty()) {
    // The software devices have no parent device: rxe registers a channel
    // adapter (RoCE over a netdev), siw an RNIC (iWARP over TCP).
    if (facts.node_type == 1) return "rxe";
    if (facts.node_type == 4) return "siw";
    return {};
  }
  for (const ParentDriver& known : kParentDrivers)
    if (facts.parent_driver == known.driver) return known.provider;
  return {};
}

VerbsDeviceFacts read_device_facts(const std::string& name) {
  VerbsDeviceFacts facts;
  char path[512];
  std::snprintf(path, sizeof path, "%s/%s/device/driver", kSysfsClass, name.c_str());
  char target[512];
  ssize_t length = ::readlink(path, target, sizeof target - 1);
  if (length > 0) {
    target[length] = '\0';
    const char* base = std::strrchr(target, '/');
    facts.parent_driver = base != nullptr ? base + 1 : target;
  }
  std::snprintf(path, sizeof path, "%s/%s/node_type", kSysfsClass, name.c_str());
  std::string text;
  if (core::read_small_file(path, &text)) facts.node_type = std::atoi(text.c_str());
  return facts;
}

void preload_verbs_providers(const std::string& only) {
  if (g_preloaded.exchange(true)) return;
  DIR* devices = ::opendir(kSysfsClass);
  if (devices == nullptr) return;
  std::vector<std::string> wanted;
  for (int seen = 0; seen < kMaxDevices; ++seen) {
    dirent* device = ::readdir(devices);
    if (device == nullptr) break;
    if (device->d_name[0] == '.' || (!only.empty() && only != device->d_name)) continue;
    std::string provider = provider_for(read_device_facts(device->d_name));
    if (provider.empty()) {
      // libibverbs will load every provider for this one: nothing saved.
      VSOCK_LOG(kDebug, "rdma: no provider known for %s: libibverbs loads them all", device->d_name);
      continue;
    }
    bool listed = false;
    for (const std::string& name : wanted) listed = listed || name == provider;
    if (!listed) wanted.push_back(provider);
  }
  ::closedir(devices);
  if (wanted.empty()) return;
  const std::string directory = provider_directory();
  for (const std::string& provider : wanted) {
    std::string file = provider_file(directory, provider);
    // Never closed: libibverbs keeps what it registers for the process's life.
    if (!file.empty() && ::dlopen(file.c_str(), RTLD_NOW) != nullptr) {
      VSOCK_LOG(kDebug, "rdma: provider %s loaded (%s)", provider.c_str(), file.c_str());
    } else {
      VSOCK_LOG(kDebug, "rdma: provider %s not loaded from %s: %s", provider.c_str(), directory.c_str(),
                file.empty() ? "no such file" : dlerror());
    }
  }
}

}  // namespace vsock::rdma
