// Big-endian loads and stores for the wire messages (docs/protocol.md: all
// integers on the wire are big-endian). Through memcpy, so they need no
// alignment, and the byte swap of <endian.h>, so they behave the same on
// any host (one load and one bswap each, where a byte loop was eight
// loads and shifts: these run for every message).
#pragma once
#include <endian.h>

#include <cstdint>
#include <cstring>

namespace vsock::sock::wire {

inline void store_be16(uint8_t* out, uint16_t value) {
  value = htobe16(value);
  std::memcpy(out, &value, sizeof value);
}

inline void store_be32(uint8_t* out, uint32_t value) {
  value = htobe32(value);
  std::memcpy(out, &value, sizeof value);
}

inline void store_be64(uint8_t* out, uint64_t value) {
  value = htobe64(value);
  std::memcpy(out, &value, sizeof value);
}

inline uint16_t load_be16(const uint8_t* in) {
  uint16_t value;
  std::memcpy(&value, in, sizeof value);
  return be16toh(value);
}

inline uint32_t load_be32(const uint8_t* in) {
  uint32_t value;
  std::memcpy(&value, in, sizeof value);
  return be32toh(value);
}

inline uint64_t load_be64(const uint8_t* in) {
  uint64_t value;
  std::memcpy(&value, in, sizeof value);
  return be64toh(value);
}

// True if the `len` bytes at `in` are all zero (reserved fields, padding).
inline bool all_zero(const uint8_t* in, int len) {
  uint8_t any = 0;
  for (int i = 0; i < len; ++i) any |= in[i];
  return any == 0;
}

}  // namespace vsock::sock::wire
