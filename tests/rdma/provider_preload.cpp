// On the device: opening it loads the libibverbs provider it needs and no
// other (src/rdma/verbs_provider.hpp). Without the preload, libibverbs
// dlopen()s every provider it has (seventeen on Debian 12) at the first
// device list of a process; the test reads which are mapped afterwards.
#include <dirent.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "rdma/device.hpp"
#include "rdma/verbs_provider.hpp"
#include "test_support.hpp"

namespace {

constexpr const char* kProgram = "rdma_provider_preload";

// The providers mapped into this process: the X of every
// ".../libibverbs/libX-rdmavN.so" in /proc/self/maps.
std::set<std::string> mapped_providers() {
  std::set<std::string> found;
  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps == nullptr) return found;
  char line[4096];
  while (fgets(line, sizeof line, maps) != nullptr) {
    const char* base = strstr(line, "/libibverbs/lib");
    if (base == nullptr) continue;
    base += strlen("/libibverbs/lib");
    const char* end = strstr(base, "-rdmav");
    if (end != nullptr) found.insert(std::string(base, end));
  }
  fclose(maps);
  return found;
}

// What the preload should load: the known provider of every device in
// sysfs; false if one device has none known (libibverbs then loads all).
bool expected_providers(std::set<std::string>* out) {
  DIR* devices = opendir("/sys/class/infiniband");
  if (devices == nullptr) return false;
  bool all_known = true;
  while (dirent* device = readdir(devices)) {
    if (device->d_name[0] == '.') continue;
    std::string provider = vsock::rdma::provider_for(vsock::rdma::read_device_facts(device->d_name));
    if (provider.empty()) all_known = false;
    else out->insert(provider);
  }
  closedir(devices);
  return all_known;
}

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (!mapped_providers().empty()) {
    fprintf(stderr, "%s: FAIL: providers mapped before the device was opened\n", kProgram);
    return 1;
  }
  int exit_code = 0;
  auto device = vsock::test::open_test_device(kProgram, &exit_code);
  if (!device) return exit_code;
  std::set<std::string> mapped = mapped_providers();
  std::set<std::string> expected;
  bool all_known = expected_providers(&expected);
  std::string names;
  for (const std::string& name : mapped) names += " " + name;
  printf("%s: device %s open; providers mapped:%s\n", kProgram, device.value().name().c_str(), names.c_str());
  if (!all_known) {
    printf("%s: SKIPPED: a device here has no provider the library knows; libibverbs loaded them all\n", kProgram);
    return vsock::test::kExitSkip;
  }
  if (mapped != expected) {
    std::string want;
    for (const std::string& name : expected) want += " " + name;
    fprintf(stderr, "%s: FAIL: expected exactly these providers mapped:%s\n", kProgram, want.c_str());
    return 1;
  }
  printf("%s: ok: only the providers the devices need were loaded\n", kProgram);
  return 0;
}
