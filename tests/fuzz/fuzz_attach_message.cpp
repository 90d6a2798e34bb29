// Fuzz target: the parked channel's messages (src/sock/wire/attach_message.hpp).
//
// Invariants: a rejection is always EPROTO; at most one of the parsers
// accepts an input, and it is the one parked_message_kind() names; an
// accepted input is at least its message's size, and its first bytes are
// exactly what the encoder writes back (parse∘encode∘parse is the
// identity); an Attached ring is one RemoteRing accepts.
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "fuzz_check.hpp"
#include "rdma/remote_ring.hpp"
#include "sock/wire/attach_message.hpp"
#include "sock/wire/reject_message.hpp"

using namespace vsock::sock::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vsock::core::Result<bool> park = parse_park(data, size);
  vsock::core::Result<UpgradeRequest> attach = parse_attach(data, size);
  vsock::core::Result<UpgradeAccept> attached = parse_attached(data, size);
  int accepted = 0;
  for (int error : {park ? 0 : park.error(), attach ? 0 : attach.error(), attached ? 0 : attached.error()}) {
    FUZZ_CHECK(error == 0 || error == EPROTO);
    accepted += error == 0;
  }
  FUZZ_CHECK(accepted <= 1);
  const ParkedMessageKind kind = parked_message_kind(data, size);
  if (park) {
    FUZZ_CHECK(kind == ParkedMessageKind::kPark && size >= kParkMessageSize);
    uint8_t out[kParkMessageSize];
    encode_park(out);
    FUZZ_CHECK(std::memcmp(out, data, sizeof out) == 0);
  }
  if (attach) {
    FUZZ_CHECK(kind == ParkedMessageKind::kAttach && size >= kAttachMessageSize);
    uint8_t out[kAttachMessageSize];
    encode_attach(attach.value(), out);
    FUZZ_CHECK(std::memcmp(out, data, sizeof out) == 0);
    vsock::core::Result<UpgradeRequest> again = parse_attach(out, sizeof out);
    FUZZ_CHECK(again.has_value() && again.value() == attach.value());
    FUZZ_CHECK(!parse_upgrade_request(data, size).has_value());  // the magics differ
  }
  if (attached) {
    FUZZ_CHECK(kind == ParkedMessageKind::kAttached && size >= kAttachedMessageSize);
    uint8_t out[kAttachedMessageSize];
    encode_attached(attached.value(), out);
    FUZZ_CHECK(std::memcmp(out, data, sizeof out) == 0);
    vsock::core::Result<UpgradeAccept> again = parse_attached(out, sizeof out);
    FUZZ_CHECK(again.has_value() && again.value() == attached.value());
    FUZZ_CHECK(!parse_upgrade_accept(data, size).has_value());
    FUZZ_CHECK(vsock::rdma::RemoteRing::create(attached.value().ring).has_value());
  }
  if (kind == ParkedMessageKind::kReject) FUZZ_CHECK(accepted == 0);
  return 0;
}
