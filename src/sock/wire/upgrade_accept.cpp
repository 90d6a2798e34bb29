#include "sock/wire/upgrade_accept.hpp"

#include <cerrno>
#include <cstring>

#include "sock/wire/message_header.hpp"
#include "sock/wire/ring_field.hpp"

namespace vsock::sock::wire {
namespace {

// Field offsets of docs/protocol.md section 1, after the shared header.
constexpr size_t kOffFlags = 5;  // the header's first reserved byte
constexpr size_t kOffRing = kMessageHeaderSize;
static_assert(kOffRing + kRingFieldSize == kUpgradeAcceptSize);

}  // namespace

bool operator==(const UpgradeAccept& a, const UpgradeAccept& b) {
  return a.nonce == b.nonce && a.flags == b.flags && same_ring(a.ring, b.ring);
}

void encode(const UpgradeAccept& accept, uint8_t out[kUpgradeAcceptSize]) {
  std::memset(out, 0, kUpgradeAcceptSize);
  encode_message_header(out, kUpgradeMagic, accept.nonce);
  out[kOffFlags] = accept.flags;
  encode_ring(accept.ring, out + kOffRing);
}

core::Result<UpgradeAccept> parse_upgrade_accept(const void* data, size_t len) {
  using R = core::Result<UpgradeAccept>;
  if (data == nullptr || len < kUpgradeAcceptSize) return R::fail(EPROTO);
  const uint8_t* in = static_cast<const uint8_t*>(data);
  UpgradeAccept accept;
  // The shared header with its flags byte read aside (the rest must be zero).
  uint8_t header[kMessageHeaderSize];
  std::memcpy(header, in, sizeof header);
  accept.flags = header[kOffFlags];
  header[kOffFlags] = 0;
  if (!parse_message_header(header, kUpgradeMagic, &accept.nonce)) return R::fail(EPROTO);
  core::Result<rdma::RingDescriptor> ring = parse_ring(in + kOffRing);
  if (!ring) return R::fail(EPROTO);
  accept.ring = ring.value();
  return R::ok(accept);
}

}  // namespace vsock::sock::wire
