// Fuzz target: parse_switch_message (src/sock/wire/switch_message.hpp).
//
// Invariants: a rejection is always EPROTO; an accepted input is at least
// 40 bytes whose first 40 are exactly what encode() writes back
// (parse∘encode∘parse is the identity); it is never also a valid
// UpgradeAccept or UpgradeRequest; its ring is one RemoteRing accepts and
// lies inside the 64-bit address space.
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "fuzz_check.hpp"
#include "rdma/remote_ring.hpp"
#include "rdma/ring_index.hpp"
#include "sock/wire/switch_message.hpp"
#include "sock/wire/upgrade_accept.hpp"
#include "sock/wire/upgrade_request.hpp"

using namespace vsock::sock::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vsock::core::Result<SwitchMessage> parsed = parse_switch_message(data, size);
  if (!parsed) {
    FUZZ_CHECK(parsed.error() == EPROTO);
    return 0;
  }
  const SwitchMessage& message = parsed.value();
  FUZZ_CHECK(size >= kSwitchMessageSize);

  uint8_t out[kSwitchMessageSize];
  encode(message, out);
  FUZZ_CHECK(std::memcmp(out, data, kSwitchMessageSize) == 0);
  vsock::core::Result<SwitchMessage> again = parse_switch_message(out, sizeof out);
  FUZZ_CHECK(again.has_value() && again.value() == message);
  FUZZ_CHECK(!parse_switch_message(data, kSwitchMessageSize - 1).has_value());
  FUZZ_CHECK(!parse_upgrade_accept(data, size).has_value());
  FUZZ_CHECK(!parse_upgrade_request(data, size).has_value());

  uint64_t capacity = message.ring.capacity;
  FUZZ_CHECK(capacity != 0 && (capacity & (capacity - 1)) == 0);
  FUZZ_CHECK(capacity <= vsock::rdma::RingIndex::kMaxCapacity);
  FUZZ_CHECK(static_cast<unsigned __int128>(message.ring.address) + capacity <= UINT64_MAX);
  FUZZ_CHECK(vsock::rdma::RemoteRing::create(message.ring).has_value());
  return 0;
}
