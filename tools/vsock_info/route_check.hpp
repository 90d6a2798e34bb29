// `vsock-info --check ADDR:PORT`: can rdma_cm resolve this peer's address
// and a route to it, within a bounded time? The same two steps the
// library's side band takes before it asks a peer to upgrade.
#pragma once
#include <string>

namespace vsock::info {

struct RouteCheck {
  bool ok = false;
  std::string device;  // the device and port rdma_cm chose
  int port = 0;
  std::string source;  // our address on that path
  std::string reason;  // why not, when !ok
  int elapsed_ms = 0;
};

// Splits "192.0.2.7:6379", "[fd00::1]:6379" or "host:6379". False on bad input.
bool split_host_port(const std::string& text, std::string* host, std::string* port);

// Resolves the address, then the route, each bounded by timeout_ms.
RouteCheck check_route(const std::string& host, const std::string& port, int timeout_ms);

void print_route(const RouteCheck& check, const std::string& target);

}  // namespace vsock::info
