// The 16-byte header UpgradeAccept and Switch share (docs/protocol.md §1–2):
// magic (4), version (1), reserved zero (3), nonce (8).
#pragma once
#include <cstddef>
#include <cstdint>

#include "sock/wire/byte_order.hpp"
#include "sock/wire/protocol.hpp"

namespace vsock::sock::wire {

inline constexpr size_t kMessageHeaderSize = 16;

// Writes the header at out[0..16); the caller has zeroed the message.
inline void encode_message_header(uint8_t* out, uint32_t magic, uint64_t nonce) {
  store_be32(out, magic);
  out[4] = kProtocolVersion;
  store_be64(out + 8, nonce);
}

// False (a protocol error) unless the header carries `magic`, our version
// and zero reserved bytes; then *nonce is set.
inline bool parse_message_header(const uint8_t* in, uint32_t magic, uint64_t* nonce) {
  if (load_be32(in) != magic || in[4] != kProtocolVersion || !all_zero(in + 5, 3)) return false;
  *nonce = load_be64(in + 8);
  return true;
}

}  // namespace vsock::sock::wire
