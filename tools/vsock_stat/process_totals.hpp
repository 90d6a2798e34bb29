// The per-process summary vsock-stat shows, derived from a segment's
// counters by their names (so it needs no table compiled from the library).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/stats_segment.hpp"

namespace vsock::tools {

struct ProcessTotals {
  uint64_t rdma_bytes_sent = 0, rdma_bytes_received = 0, rdma_messages_sent = 0, rdma_messages_received = 0;
  uint64_t kernel_bytes_sent = 0, kernel_bytes_received = 0, kernel_messages_sent = 0, kernel_messages_received = 0;
  uint64_t upgrade_attempts = 0, upgrades_done = 0, upgrade_resets = 0;
  // Why connections stayed on (or went back to) the kernel, by reason, in
  // counter order: "rule", "no_device", then every fallback_* counter.
  std::vector<std::pair<std::string, uint64_t>> fallbacks;
};

// The value of the counter called `name`, or 0 if the segment has none.
uint64_t counter_value(const core::SegmentSnapshot& snapshot, const std::string& name);

ProcessTotals process_totals(const core::SegmentSnapshot& snapshot);

// "1.2.3.4:80" / "[::1]:80" of a row's address, "" for none (port 0, all zero).
std::string endpoint_text(uint8_t family, const uint8_t* address, uint16_t port);
const char* role_name(uint8_t role);
const char* protocol_name(uint8_t protocol);

// A fixed-size text field of the header, up to its NUL or its end (the
// file is another process's: it may lack the NUL).
template <size_t N>
std::string fixed_text(const char (&field)[N]) {
  return std::string(field, strnlen(field, N));
}

}  // namespace vsock::tools
