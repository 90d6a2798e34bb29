#include "tools/vsock_stat/process_totals.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace vsock::tools {

uint64_t counter_value(const core::SegmentSnapshot& snapshot, const std::string& name) {
  for (size_t i = 0; i < snapshot.counter_names.size() && i < snapshot.counters.size(); ++i)
    if (snapshot.counter_names[i] == name) return snapshot.counters[i];
  return 0;
}

ProcessTotals process_totals(const core::SegmentSnapshot& s) {
  ProcessTotals t;
  t.rdma_bytes_sent = counter_value(s, "rdma_bytes_sent");
  t.rdma_bytes_received = counter_value(s, "rdma_bytes_received");
  t.rdma_messages_sent = counter_value(s, "rdma_sends");
  t.rdma_messages_received = counter_value(s, "rdma_receives");
  t.kernel_bytes_sent = counter_value(s, "tcp_bytes_sent");
  t.kernel_bytes_received = counter_value(s, "tcp_bytes_received");
  t.kernel_messages_sent = counter_value(s, "tcp_sends");
  t.kernel_messages_received = counter_value(s, "tcp_receives");
  t.upgrade_attempts = counter_value(s, "upgrade_attempts");
  t.upgrades_done = counter_value(s, "upgrades_done");
  t.upgrade_resets = counter_value(s, "upgrade_resets");
  t.fallbacks.emplace_back("rule", counter_value(s, "kernel_by_rule"));
  t.fallbacks.emplace_back("no_device", counter_value(s, "kernel_no_device"));
  const std::string prefix = "fallback_";
  for (size_t i = 0; i < s.counter_names.size() && i < s.counters.size(); ++i)
    if (s.counter_names[i].compare(0, prefix.size(), prefix) == 0)
      t.fallbacks.emplace_back(s.counter_names[i].substr(prefix.size()), s.counters[i]);
  return t;
}

std::string endpoint_text(uint8_t family, const uint8_t* address, uint16_t port) {
  char text[INET6_ADDRSTRLEN] = "";
  bool any = port != 0;
  for (int i = 0; i < 16 && !any; ++i) any = address[i] != 0;
  if (!any) return "";
  if (family == AF_INET) {
    inet_ntop(AF_INET, address, text, sizeof text);
    return std::string(text) + ":" + std::to_string(port);
  }
  if (family == AF_INET6) {
    inet_ntop(AF_INET6, address, text, sizeof text);
    return "[" + std::string(text) + "]:" + std::to_string(port);
  }
  return "";
}

const char* role_name(uint8_t role) {
  switch (role) {
    case 1: return "client";
    case 2: return "listener";
    case 3: return "accepted";
    default: return "unknown";
  }
}

const char* protocol_name(uint8_t protocol) {
  return protocol == IPPROTO_TCP ? "tcp" : protocol == IPPROTO_UDP ? "udp" : "other";
}

}  // namespace vsock::tools
