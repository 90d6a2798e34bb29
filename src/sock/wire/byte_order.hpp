// Big-endian loads and stores for the wire messages (docs/protocol.md: all
// integers on the wire are big-endian). Byte by byte, so they need no
// alignment and behave the same on any host.
#pragma once
#include <cstdint>

namespace vsock::sock::wire {

inline void store_be16(uint8_t* out, uint16_t value) {
  out[0] = static_cast<uint8_t>(value >> 8);
  out[1] = static_cast<uint8_t>(value);
}

inline void store_be32(uint8_t* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(value >> (24 - 8 * i));
}

inline void store_be64(uint8_t* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(value >> (56 - 8 * i));
}

inline uint16_t load_be16(const uint8_t* in) { return static_cast<uint16_t>(in[0] << 8 | in[1]); }

inline uint32_t load_be32(const uint8_t* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value = value << 8 | in[i];
  return value;
}

inline uint64_t load_be64(const uint8_t* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = value << 8 | in[i];
  return value;
}

// True if the `len` bytes at `in` are all zero (reserved fields, padding).
inline bool all_zero(const uint8_t* in, int len) {
  uint8_t any = 0;
  for (int i = 0; i < len; ++i) any |= in[i];
  return any == 0;
}

}  // namespace vsock::sock::wire
