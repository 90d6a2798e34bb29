// The text of a setting's current value, in the form apply_setting() reads
// back ("2097152", "on", "latency", "stderr"), for tools that show the
// effective configuration (vsock-info).
#pragma once
#include <string>
#include <string_view>

#include "core/settings.hpp"

namespace vsock::core {

// The value of the setting called `name`; empty if the name is unknown.
std::string setting_text(const Settings& settings, std::string_view name);

}  // namespace vsock::core
