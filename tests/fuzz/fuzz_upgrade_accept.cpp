// Fuzz target: parse_upgrade_accept (src/sock/wire/upgrade_accept.hpp).
//
// Invariants: a rejection is always EPROTO; an accepted input is at least
// 32 bytes whose first 32 are exactly what encode() writes back
// (parse∘encode∘parse is the identity); its ring is one RemoteRing accepts,
// lies inside the 64-bit address space, and a first write of the whole ring
// stays inside it.
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "fuzz_check.hpp"
#include "rdma/remote_ring.hpp"
#include "rdma/ring_index.hpp"
#include "sock/wire/switch_message.hpp"
#include "sock/wire/upgrade_accept.hpp"

using namespace vsock::sock::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vsock::core::Result<UpgradeAccept> parsed = parse_upgrade_accept(data, size);
  if (!parsed) {
    FUZZ_CHECK(parsed.error() == EPROTO);
    return 0;
  }
  const UpgradeAccept& accept = parsed.value();
  FUZZ_CHECK(size >= kUpgradeAcceptSize);

  uint8_t out[kUpgradeAcceptSize];
  encode(accept, out);
  FUZZ_CHECK(std::memcmp(out, data, kUpgradeAcceptSize) == 0);
  vsock::core::Result<UpgradeAccept> again = parse_upgrade_accept(out, sizeof out);
  FUZZ_CHECK(again.has_value() && again.value() == accept);
  FUZZ_CHECK(!parse_upgrade_accept(data, kUpgradeAcceptSize - 1).has_value());
  FUZZ_CHECK(!parse_switch_message(data, size).has_value());  // the magics differ

  // The ring, checked here with its own arithmetic rather than the parser's.
  uint64_t capacity = accept.ring.capacity;
  FUZZ_CHECK(capacity != 0 && (capacity & (capacity - 1)) == 0);
  FUZZ_CHECK(capacity <= vsock::rdma::RingIndex::kMaxCapacity);
  FUZZ_CHECK(static_cast<unsigned __int128>(accept.ring.address) + capacity <= UINT64_MAX);
  vsock::core::Result<vsock::rdma::RemoteRing> ring = vsock::rdma::RemoteRing::create(accept.ring);
  FUZZ_CHECK(ring.has_value());
  vsock::core::Result<vsock::rdma::RemoteWrite> all = ring.value().plan(capacity);
  FUZZ_CHECK(all.has_value());
  FUZZ_CHECK(all.value().first.address == accept.ring.address && all.value().first.length == capacity);
  FUZZ_CHECK(all.value().second.length == 0);
  return 0;
}
