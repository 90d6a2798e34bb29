// The effective configuration as the library would load it in this
// process's environment: each setting, its value and where it came from,
// and the problems the library would report.
#pragma once
#include "core/config.hpp"

namespace vsock::info {

void print_config(const core::Config& config);

}  // namespace vsock::info
