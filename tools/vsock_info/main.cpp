// vsock-info: can this machine offload, and if not, why not. Shows the verbs
// devices and ports, RLIMIT_MEMLOCK against the profile's needs, the
// effective configuration with the origin of each value, optionally whether
// rdma_cm resolves a peer (--check) and which rules apply to a program and
// port (--rules). Exit status 0 only when offload is possible.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/config.hpp"
#include "tools/vsock_info/config_report.hpp"
#include "tools/vsock_info/device_report.hpp"
#include "tools/vsock_info/memlock_report.hpp"
#include "tools/vsock_info/route_check.hpp"
#include "tools/vsock_info/rules_report.hpp"

namespace vsock::info {
namespace {

constexpr int kExitPossible = 0;
constexpr int kExitNotPossible = 1;
constexpr int kExitUsage = 2;
constexpr int kDefaultTimeoutMs = 2000;

struct Options {
  std::string check;  // ADDR:PORT
  int timeout_ms = kDefaultTimeoutMs;
  std::string rules_program;
  int rules_port = -1;
};

void usage(FILE* out) {
  std::fprintf(out,
               "Usage: vsock-info [--check ADDR:PORT [--timeout MS]] [--rules PROGRAM PORT]\n"
               "\n"
               "Says whether libvsock can offload on this machine, and why not: verbs\n"
               "devices and ports, RLIMIT_MEMLOCK against the profile's needs, and the\n"
               "effective configuration (each setting, its value and where it came from).\n"
               "\n"
               "  --check ADDR:PORT  also ask rdma_cm to resolve the address and a route to it\n"
               "                     ([v6addr]:port for IPv6); part of the verdict\n"
               "  --timeout MS       bound for each rdma_cm step (default %d)\n"
               "  --rules PROG PORT  list the rules that apply to PROG's sockets on PORT\n"
               "  -h, --help         this text;  --version  the version\n"
               "\n"
               "Exit status: 0 offload possible, 1 not possible (the last line says why),\n"
               "2 bad usage.\n",
               kDefaultTimeoutMs);
}

bool parse_number(const char* text, int max, int* out) {
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 0 || value > max) return false;
  *out = static_cast<int>(value);
  return true;
}

int usage_error(const std::string& why) {
  std::fprintf(stderr, "vsock-info: %s\nTry 'vsock-info --help'.\n", why.c_str());
  return kExitUsage;
}

// Returns -1 when the options are good, else the exit status.
int parse_options(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    }
    if (arg == "--version") {
      std::printf("vsock-info %s\n", VSOCK_INFO_VERSION);
      return 0;
    }
    if (arg == "--check") {
      std::string host, port;
      if (i + 1 >= argc || !split_host_port(argv[i + 1], &host, &port))
        return usage_error("--check needs ADDR:PORT ([ADDR]:PORT for IPv6)");
      options->check = argv[++i];
    } else if (arg == "--timeout") {
      if (i + 1 >= argc || !parse_number(argv[i + 1], 600000, &options->timeout_ms) || options->timeout_ms == 0)
        return usage_error("--timeout needs a number of milliseconds (1-600000)");
      ++i;
    } else if (arg == "--rules") {
      if (i + 2 >= argc || !parse_number(argv[i + 2], 65535, &options->rules_port))
        return usage_error("--rules needs PROGRAM and a PORT (0-65535)");
      const char* slash = std::strrchr(argv[i + 1], '/');
      options->rules_program = slash ? slash + 1 : argv[i + 1];
      i += 2;
    } else {
      return usage_error("unknown argument '" + arg + "'");
    }
  }
  return -1;
}

// The first ACTIVE port with a usable GID, or null with *why set.
const PortInfo* usable_port(const DeviceScan& scan, std::string* why) {
  if (scan.device_count == 0) {
    *why = scan.error;
    return nullptr;
  }
  const PortInfo* active_without_gid = nullptr;
  for (const PortInfo& port : scan.ports) {
    if (port.active && port.usable_gid >= 0) return &port;
    if (port.active && active_without_gid == nullptr) active_without_gid = &port;
  }
  if (active_without_gid != nullptr)
    *why = active_without_gid->device + " port " + std::to_string(active_without_gid->port) +
           " is ACTIVE but has no usable GID (no IP address on its network interface?)";
  else if (scan.ports.empty())
    *why = "the verbs devices have no ports";
  else
    *why = "no ACTIVE port (" + scan.ports.front().device + " port " + std::to_string(scan.ports.front().port) +
           " is " + scan.ports.front().state + ")";
  return nullptr;
}

std::string bytes_text(uint64_t bytes) { return std::to_string(bytes / 1024) + " KiB"; }

int run(const Options& options) {
  const core::Config& config = core::config();
  std::printf("libvsock %s\n", VSOCK_INFO_VERSION);
  DeviceScan scan = scan_devices(config.settings.device);
  print_devices(scan);
  MemlockCheck memlock = check_memlock(config.settings);
  print_memlock(memlock, config.settings);
  print_config(config);
  if (options.rules_port >= 0) print_rules(config, options.rules_program, static_cast<uint16_t>(options.rules_port));

  std::string why;
  const PortInfo* port = usable_port(scan, &why);
  if (port != nullptr && !memlock.enough)
    why = "RLIMIT_MEMLOCK (" + bytes_text(memlock.limit) + ") is less than one connection pins (" +
          bytes_text(memlock.per_connection) + "): raise it (ulimit -l, limits.conf) or lower ring_size";
  if (port != nullptr && memlock.enough && !options.check.empty()) {
    std::string host, service;
    split_host_port(options.check, &host, &service);  // checked by parse_options
    RouteCheck route = check_route(host, service, options.timeout_ms);
    print_route(route, options.check);
    if (!route.ok) why = "rdma_cm cannot reach " + options.check + ": " + route.reason;
  }
  std::fflush(stdout);
  if (port == nullptr || !why.empty()) {
    std::fprintf(stderr, "vsock-info: offload not possible: %s\n", why.c_str());
    return kExitNotPossible;
  }
  const GidInfo& gid = port->gids[static_cast<size_t>(port->usable_gid)];
  std::printf("vsock-info: offload possible: %s port %d, GID %d (%s, %s), MTU %d\n", port->device.c_str(), port->port,
              gid.index, gid.address.c_str(), gid.type.c_str(), port->active_mtu);
  return kExitPossible;
}

}  // namespace
}  // namespace vsock::info

int main(int argc, char** argv) {
  vsock::info::Options options;
  int status = vsock::info::parse_options(argc, argv, &options);
  if (status >= 0) return status;
  return vsock::info::run(options);
}
