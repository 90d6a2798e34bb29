// The messages of a parked channel (docs/protocol.md §1.2): a queue pair
// whose connection closed cleanly on both sides stays connected, parked,
// and a later connection between the same two processes takes it with one
// message instead of an rdma_cm round trip.
//
//   Park      "VSKP", 8 bytes: the server parked its side; the client may
//             attach (it never attaches before this came).
//   Attach    "VSKA", 56 bytes: the UpgradeRequest's layout with its own
//             magic: the client asks for the channel for this connection.
//   Attached  "VSKT", 32 bytes: the UpgradeAccept's layout with its own
//             magic: the server's ring, flags, the echoed nonce.
//   A refusal is a Reject ("VSKJ", reject_message.hpp) sent as a message.
//
// Two-sided SENDs on the channel, so each fits its kControlMessageMax (64)
// byte slot. The magics differ from every other message's, so one can never
// be taken for another. Pure functions, fuzzed (fuzz_attach_message).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"
#include "sock/wire/upgrade_accept.hpp"
#include "sock/wire/upgrade_request.hpp"

namespace vsock::sock::wire {

inline constexpr size_t kParkMessageSize = 8;
inline constexpr size_t kAttachMessageSize = kUpgradeRequestSize;
inline constexpr size_t kAttachedMessageSize = kUpgradeAcceptSize;

enum class ParkedMessageKind { kPark, kAttach, kAttached, kReject, kUnknown };

// Which message `data` starts with, by its magic alone (kUnknown for fewer
// than 4 bytes or another magic); its parser decides whether it is whole.
ParkedMessageKind parked_message_kind(const void* data, size_t len);

void encode_park(uint8_t out[kParkMessageSize]);
// EPROTO unless exactly magic "VSKP", our version and three zero bytes;
// bytes past the eighth are ignored, fewer are EPROTO.
core::Result<bool> parse_park(const void* data, size_t len);

void encode_attach(const UpgradeRequest& request, uint8_t out[kAttachMessageSize]);
// The rules of parse_upgrade_request, with magic "VSKA".
core::Result<UpgradeRequest> parse_attach(const void* data, size_t len);

void encode_attached(const UpgradeAccept& accept, uint8_t out[kAttachedMessageSize]);
// The rules of parse_upgrade_accept, with magic "VSKT".
core::Result<UpgradeAccept> parse_attached(const void* data, size_t len);

}  // namespace vsock::sock::wire
