#include "core/setting_origin.hpp"

namespace vsock::core {

std::string describe_origin(const SettingOrigin& origin) {
  switch (origin.kind) {
    case SettingOrigin::Kind::kProfile: return "profile " + origin.where;
    case SettingOrigin::Kind::kFile: return origin.where;
    case SettingOrigin::Kind::kEnv: return "env " + origin.where;
    case SettingOrigin::Kind::kDefault: break;
  }
  return "default";
}

}  // namespace vsock::core
