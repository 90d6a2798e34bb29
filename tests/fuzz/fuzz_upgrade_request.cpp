// Fuzz target: parse_upgrade_request and the sockaddr conversions around it
// (src/sock/wire/upgrade_request.hpp, endpoint.hpp).
//
// Invariants: a rejection is always EPROTO; an accepted input is at least
// 56 bytes and its first 56 bytes are exactly what encode() writes back
// (one wire form per request, so parse∘encode∘parse is the identity); the
// server's view of the connection the request names matches it; and the
// client's view rebuilds the same (canonical) request.
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "fuzz_check.hpp"
#include "sock/wire/endpoint.hpp"
#include "sock/wire/upgrade_request.hpp"

using namespace vsock::sock::wire;

namespace {

const sockaddr* sa(const sockaddr_storage& storage) { return reinterpret_cast<const sockaddr*>(&storage); }

void check_accepted(const uint8_t* data, size_t size, const UpgradeRequest& request) {
  FUZZ_CHECK(size >= kUpgradeRequestSize);
  FUZZ_CHECK(request.family == kFamilyIpv4 || request.family == kFamilyIpv6);
  FUZZ_CHECK(request.client.port != 0 && request.server.port != 0);

  uint8_t out[kUpgradeRequestSize];
  encode(request, out);
  FUZZ_CHECK(std::memcmp(out, data, kUpgradeRequestSize) == 0);
  vsock::core::Result<UpgradeRequest> again = parse_upgrade_request(out, sizeof out);
  FUZZ_CHECK(again.has_value() && again.value() == request);
  FUZZ_CHECK(!parse_upgrade_request(data, kUpgradeRequestSize - 1).has_value());

  // The kernel sockaddrs of the connection, each end as a socket would see it.
  sockaddr_storage client, server;
  vsock::core::Result<socklen_t> client_len = endpoint_to_sockaddr(request.family, request.client, &client);
  vsock::core::Result<socklen_t> server_len = endpoint_to_sockaddr(request.family, request.server, &server);
  FUZZ_CHECK(client_len.has_value() && server_len.has_value());

  // Server side: local = the request's server end, peer = its client end.
  FUZZ_CHECK(upgrade_request_matches(request, sa(server), server_len.value(), sa(client), client_len.value()));
  FamilyEndpoint canon_client = canonical_endpoint(request.family, request.client);
  FamilyEndpoint canon_server = canonical_endpoint(request.family, request.server);
  bool same_ends = canon_client.family == canon_server.family && canon_client.endpoint == canon_server.endpoint;
  if (!same_ends) {
    FUZZ_CHECK(!upgrade_request_matches(request, sa(client), client_len.value(), sa(server), server_len.value()));
  }

  // Client side: rebuilding from its sockaddrs gives the canonical request,
  // which differs from the parsed one at most by flags and mapped addresses.
  vsock::core::Result<UpgradeRequest> built =
      build_upgrade_request(sa(client), client_len.value(), sa(server), server_len.value(), request.nonce);
  if (canon_client.family != canon_server.family) {
    // One end mapped, the other plain IPv6: no real connection looks so.
    FUZZ_CHECK(!built.has_value() && built.error() == EINVAL);
    return;
  }
  FUZZ_CHECK(built.has_value());
  FUZZ_CHECK(built.value().family == canon_client.family);
  FUZZ_CHECK(built.value().client == canon_client.endpoint && built.value().server == canon_server.endpoint);
  FUZZ_CHECK(built.value().nonce == request.nonce && built.value().flags == 0);
  uint8_t rebuilt[kUpgradeRequestSize];
  encode(built.value(), rebuilt);
  vsock::core::Result<UpgradeRequest> reparsed = parse_upgrade_request(rebuilt, sizeof rebuilt);
  FUZZ_CHECK(reparsed.has_value() && reparsed.value() == built.value());
  FUZZ_CHECK(upgrade_request_matches(built.value(), sa(server), server_len.value(), sa(client), client_len.value()));
}

// The raw input read as a sockaddr of `size` bytes: whatever it holds, the
// conversion reads no byte past `size` (ASan watches) and what it accepts
// converts back to itself.
void check_sockaddr(const uint8_t* data, size_t size) {
  socklen_t len = static_cast<socklen_t>(size > sizeof(sockaddr_storage) ? sizeof(sockaddr_storage) : size);
  vsock::core::Result<FamilyEndpoint> endpoint = endpoint_from_sockaddr(reinterpret_cast<const sockaddr*>(data), len);
  if (!endpoint) {
    FUZZ_CHECK(endpoint.error() == EINVAL || endpoint.error() == EAFNOSUPPORT);
    return;
  }
  const FamilyEndpoint& e = endpoint.value();
  FUZZ_CHECK(e.family == kFamilyIpv4 || e.family == kFamilyIpv6);
  FUZZ_CHECK(!(e.family == kFamilyIpv6 && is_ipv4_mapped(e.endpoint)));  // always reduced
  sockaddr_storage back;
  vsock::core::Result<socklen_t> back_len = endpoint_to_sockaddr(e.family, e.endpoint, &back);
  FUZZ_CHECK(back_len.has_value());
  vsock::core::Result<FamilyEndpoint> again = endpoint_from_sockaddr(sa(back), back_len.value());
  FUZZ_CHECK(again.has_value() && again.value().family == e.family && again.value().endpoint == e.endpoint);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vsock::core::Result<UpgradeRequest> parsed = parse_upgrade_request(data, size);
  if (parsed) {
    check_accepted(data, size, parsed.value());
  } else {
    FUZZ_CHECK(parsed.error() == EPROTO);
  }
  check_sockaddr(data, size);
  return 0;
}
