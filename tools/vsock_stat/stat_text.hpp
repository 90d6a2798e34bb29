// vsock-stat's table for people: per process the totals, then a line per
// socket.
#pragma once
#include <cstdint>
#include <string>

#include "tools/vsock_stat/segment_scan.hpp"

namespace vsock::tools {

std::string render_text(const ScanResult& scan, int64_t now_unix_ns);

// 1234567 -> "1.2M" (decimal units, as the kernel's tools print rates).
std::string short_count(uint64_t value);

}  // namespace vsock::tools
