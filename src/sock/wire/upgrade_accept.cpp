#include "sock/wire/upgrade_accept.hpp"

#include <cerrno>
#include <cstring>

#include "sock/wire/byte_order.hpp"
#include "sock/wire/protocol.hpp"
#include "sock/wire/ring_field.hpp"

namespace vsock::sock::wire {
namespace {

// Field offsets of docs/protocol.md section 1.
constexpr size_t kOffMagic = 0;
constexpr size_t kOffVersion = 4;
constexpr size_t kOffReserved = 5;
constexpr int kReservedSize = 3;
constexpr size_t kOffNonce = 8;
constexpr size_t kOffRing = 16;
static_assert(kOffRing + kRingFieldSize == kUpgradeAcceptSize);

}  // namespace

bool operator==(const UpgradeAccept& a, const UpgradeAccept& b) {
  return a.nonce == b.nonce && same_ring(a.ring, b.ring);
}

void encode(const UpgradeAccept& accept, uint8_t out[kUpgradeAcceptSize]) {
  std::memset(out, 0, kUpgradeAcceptSize);
  store_be32(out + kOffMagic, kUpgradeMagic);
  out[kOffVersion] = kProtocolVersion;
  store_be64(out + kOffNonce, accept.nonce);
  encode_ring(accept.ring, out + kOffRing);
}

core::Result<UpgradeAccept> parse_upgrade_accept(const void* data, size_t len) {
  using R = core::Result<UpgradeAccept>;
  if (data == nullptr || len < kUpgradeAcceptSize) return R::fail(EPROTO);
  const uint8_t* in = static_cast<const uint8_t*>(data);
  if (load_be32(in + kOffMagic) != kUpgradeMagic) return R::fail(EPROTO);
  if (in[kOffVersion] != kProtocolVersion) return R::fail(EPROTO);
  if (!all_zero(in + kOffReserved, kReservedSize)) return R::fail(EPROTO);
  core::Result<rdma::RingDescriptor> ring = parse_ring(in + kOffRing);
  if (!ring) return R::fail(EPROTO);
  UpgradeAccept accept;
  accept.nonce = load_be64(in + kOffNonce);
  accept.ring = ring.value();
  return R::ok(accept);
}

}  // namespace vsock::sock::wire
