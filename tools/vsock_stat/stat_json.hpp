// vsock-stat --json: one JSON document per refresh. Keys are stable (the
// man page lists them); counters appear under their library names.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tools/vsock_stat/segment_scan.hpp"

namespace vsock::tools {

// A JSON string literal (quotes included) of arbitrary bytes: control
// characters and bytes that are not valid UTF-8 are escaped as \u00XX.
std::string json_string(const std::string& text);

std::string render_json(const ScanResult& scan, int64_t now_unix_ns);

}  // namespace vsock::tools
