// How the writer cuts staged bytes into RDMA writes: one work request never
// crosses the end of the peer's ring (the bytes after it go to the ring's
// start, a different remote address) and never exceeds max_segment, so a
// large write starts moving before all of it is copied and the reader sees
// it in pieces. Pure; unit-tested.
#pragma once
#include <cstdint>

namespace vsock::sock {

// Length of the next work request for `remaining` bytes starting at stream
// position `position` in a ring of `capacity` bytes (a power of two).
// 0 only when remaining or max_segment is 0.
inline uint64_t next_segment(uint64_t position, uint64_t remaining, uint64_t capacity, uint64_t max_segment) {
  uint64_t to_end = capacity - (position & (capacity - 1));
  uint64_t length = remaining < to_end ? remaining : to_end;
  return length < max_segment ? length : max_segment;
}

}  // namespace vsock::sock
