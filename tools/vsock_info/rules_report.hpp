// `vsock-info --rules PROGRAM PORT`: the rules of the rules file that apply
// to sockets of PROGRAM on PORT, in the order the library tries them, and
// what decides when none of them matches.
#pragma once
#include <cstdint>
#include <string>

#include "core/config.hpp"

namespace vsock::info {

void print_rules(const core::Config& config, const std::string& program, uint16_t port);

}  // namespace vsock::info
