#include "tools/vsock_info/config_report.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/setting_text.hpp"

namespace vsock::info {

void print_config(const core::Config& config) {
  std::string file = config.file;
  if (file.empty()) {
    const char* named = std::getenv("VSOCK_CONFIG");
    file = named != nullptr && named[0] != '\0' ? std::string("none (VSOCK_CONFIG=") + named + " cannot be read)"
                                                 : std::string("none (VSOCK_CONFIG unset, no ") + core::kDefaultConfigFile + ")";
  }
  std::printf("configuration (rules file: %s):\n", file.c_str());
  core::for_each_setting_name([&](const char* name) {
    std::string value = core::setting_text(config.settings, name);
    std::printf("  %-19s %-12s %s\n", name, value.empty() ? "-" : value.c_str(),
                core::describe_origin(core::origin_of(config, name)).c_str());
  });
  if (!config.rules.empty()) std::printf("  %zu rule(s); --rules PROGRAM PORT shows those that apply\n", config.rules.size());
  for (const std::string& problem : config.diagnostics) std::printf("  problem: %s\n", problem.c_str());
}

}  // namespace vsock::info
