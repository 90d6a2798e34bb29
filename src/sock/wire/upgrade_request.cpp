#include "sock/wire/upgrade_request.hpp"

#include <cerrno>
#include <cstring>

#include "sock/wire/byte_order.hpp"
#include "sock/wire/protocol.hpp"

namespace vsock::sock::wire {
namespace {

// Field offsets of docs/protocol.md section 1.
constexpr size_t kOffMagic = 0;
constexpr size_t kOffVersion = 4;
constexpr size_t kOffFamily = 5;
constexpr size_t kOffFlags = 6;
constexpr size_t kOffClientPort = 8;
constexpr size_t kOffServerPort = 10;
constexpr size_t kOffClientIp = 12;
constexpr size_t kOffServerIp = 28;
constexpr size_t kOffNonce = 44;
constexpr size_t kOffReserved = 52;
constexpr int kReservedSize = 4;
static_assert(kOffReserved + kReservedSize == kUpgradeRequestSize);

// The bytes of an address field that the family actually uses.
size_t address_size(uint8_t family) { return family == kFamilyIpv4 ? 4 : 16; }

// An address field: the used bytes, then zero. Rejecting nonzero padding
// keeps one wire form per connection (the server compares bytes).
bool read_address(const uint8_t* in, uint8_t family, uint8_t out[16]) {
  size_t used = address_size(family);
  if (!all_zero(in + used, static_cast<int>(16 - used))) return false;
  std::memcpy(out, in, 16);
  return true;
}

}  // namespace

bool operator==(const UpgradeRequest& a, const UpgradeRequest& b) {
  return a.family == b.family && a.flags == b.flags && a.client == b.client && a.server == b.server &&
         a.nonce == b.nonce;
}

void encode(const UpgradeRequest& request, uint8_t out[kUpgradeRequestSize]) {
  std::memset(out, 0, kUpgradeRequestSize);
  store_be32(out + kOffMagic, kUpgradeMagic);
  out[kOffVersion] = kProtocolVersion;
  out[kOffFamily] = request.family;
  store_be16(out + kOffFlags, request.flags);
  store_be16(out + kOffClientPort, request.client.port);
  store_be16(out + kOffServerPort, request.server.port);
  std::memcpy(out + kOffClientIp, request.client.ip, address_size(request.family));
  std::memcpy(out + kOffServerIp, request.server.ip, address_size(request.family));
  store_be64(out + kOffNonce, request.nonce);
  // Reserved: left zero by the memset.
}

core::Result<UpgradeRequest> parse_upgrade_request(const void* data, size_t len) {
  using R = core::Result<UpgradeRequest>;
  if (data == nullptr || len < kUpgradeRequestSize) return R::fail(EPROTO);
  const uint8_t* in = static_cast<const uint8_t*>(data);
  if (load_be32(in + kOffMagic) != kUpgradeMagic) return R::fail(EPROTO);
  if (in[kOffVersion] != kProtocolVersion) return R::fail(EPROTO);
  UpgradeRequest request;
  request.family = in[kOffFamily];
  if (request.family != kFamilyIpv4 && request.family != kFamilyIpv6) return R::fail(EPROTO);
  // Reserved must be zero (unlike flags): a version-1 receiver cannot know
  // what a sender meant by it, so it refuses rather than guesses.
  if (!all_zero(in + kOffReserved, kReservedSize)) return R::fail(EPROTO);
  request.flags = load_be16(in + kOffFlags);
  request.client.port = load_be16(in + kOffClientPort);
  request.server.port = load_be16(in + kOffServerPort);
  // A connected TCP socket never has port 0 at either end.
  if (request.client.port == 0 || request.server.port == 0) return R::fail(EPROTO);
  if (!read_address(in + kOffClientIp, request.family, request.client.ip)) return R::fail(EPROTO);
  if (!read_address(in + kOffServerIp, request.family, request.server.ip)) return R::fail(EPROTO);
  request.nonce = load_be64(in + kOffNonce);
  return R::ok(request);
}

core::Result<UpgradeRequest> build_upgrade_request(const sockaddr* client, socklen_t client_len,
                                                   const sockaddr* server, socklen_t server_len, uint64_t nonce) {
  using R = core::Result<UpgradeRequest>;
  core::Result<FamilyEndpoint> local = endpoint_from_sockaddr(client, client_len);
  if (!local) return R::fail(local.error());
  core::Result<FamilyEndpoint> peer = endpoint_from_sockaddr(server, server_len);
  if (!peer) return R::fail(peer.error());
  if (local.value().family != peer.value().family) return R::fail(EINVAL);
  UpgradeRequest request;
  request.family = local.value().family;
  request.client = local.value().endpoint;
  request.server = peer.value().endpoint;
  request.nonce = nonce;
  // Not a connected socket's addresses; the peer would refuse the request.
  if (request.client.port == 0 || request.server.port == 0) return R::fail(EINVAL);
  return R::ok(request);
}

bool upgrade_request_matches(const UpgradeRequest& request, const sockaddr* local, socklen_t local_len,
                             const sockaddr* peer, socklen_t peer_len) {
  core::Result<FamilyEndpoint> server_end = endpoint_from_sockaddr(local, local_len);
  core::Result<FamilyEndpoint> client_end = endpoint_from_sockaddr(peer, peer_len);
  if (!server_end || !client_end) return false;
  // The request came from a peer: reduce it the same way, so a family-6
  // request holding mapped addresses still finds its IPv4 connection.
  FamilyEndpoint want_server = canonical_endpoint(request.family, request.server);
  FamilyEndpoint want_client = canonical_endpoint(request.family, request.client);
  return want_server.family == server_end.value().family && want_client.family == client_end.value().family &&
         want_server.endpoint == server_end.value().endpoint && want_client.endpoint == client_end.value().endpoint;
}

}  // namespace vsock::sock::wire
