// Reject: the private data of every rdma_reject the server's library sends
// (docs/protocol.md §1). It tells the client why its request was refused,
// so that only a refusal that concerns the peer as a whole is remembered
// (PeerFailureCache), and it carries the redirect of the rendezvous: the
// connection was accepted by another process of the server, which listens
// for this same request on `port` of the same address.
// Layout: the 16-byte message header (magic "VSKJ", version, nonce) then
// reason (1), reserved zero (1), port (2, big-endian): 20 bytes.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/result.hpp"

namespace vsock::sock::wire {

inline constexpr size_t kRejectMessageSize = 20;

enum class RejectReason : uint8_t {
  // Tied to this one connection (a duplicate request, a connection closed
  // or handed off before its upgrade, an expired wait): not remembered.
  kConnection = 1,
  // The server refuses every upgrade from this peer (a version it does not
  // speak, a malformed request): remembered for the cache period.
  kPeer = 2,
  // Ask again at `port` (same address): the process that serves the
  // connection listens there.
  kRedirect = 3,
  // Ask again (same port, with kRequestFlagAfterData) once you have written
  // on TCP: the listener is shared and accepts only connections that
  // carry data (TCP_DEFER_ACCEPT), so no process can claim this one before
  // its first bytes, and a client that waited for the upgrade to write
  // them would wait in vain.
  kAfterData = 4,
};

struct RejectMessage {
  uint64_t nonce = 0;
  RejectReason reason = RejectReason::kConnection;
  uint16_t port = 0;  // kRedirect only (never 0 then); 0 otherwise
};

void encode(const RejectMessage& message, uint8_t out[kRejectMessageSize]);

// Bytes past the message are ignored (the CM pads a REJ to 148 bytes).
// EPROTO for fewer bytes, another magic or version, nonzero reserved bytes,
// an unknown reason, a redirect without a port or a port without a
// redirect.
core::Result<RejectMessage> parse_reject_message(const void* data, size_t len);

}  // namespace vsock::sock::wire
