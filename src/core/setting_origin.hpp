// Where a setting's effective value came from: the built-in default, the
// profile bundle, a `set` line (or `profile` line) of the rules file, or a
// VSOCK_* environment variable. build_config() records one per setting.
#pragma once
#include <string>

namespace vsock::core {

struct SettingOrigin {
  enum class Kind { kDefault, kProfile, kFile, kEnv };
  Kind kind = Kind::kDefault;
  std::string where;  // kProfile: the profile; kFile: "file:line"; kEnv: the variable
};

// "default", "profile latency", "/etc/libvsock.conf:7", "env VSOCK_SPIN_US".
std::string describe_origin(const SettingOrigin& origin);

}  // namespace vsock::core
