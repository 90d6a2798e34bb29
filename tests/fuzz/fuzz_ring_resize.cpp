// Fuzz target: parse_ring_grow, parse_ring_moved and is_ring_resize_message
// (src/sock/wire/ring_resize.hpp).
//
// Invariants: a rejection is always EPROTO; an accepted input is at least
// the message's size and its first bytes are exactly what encode() writes
// for the parsed message (one wire form), and one byte fewer is refused; a
// RingGrow's ring is one RemoteRing accepts; a refused RingMoved names
// position 0; no input is both messages; whatever parses is a ring resize
// message, and is_ring_resize_message is exactly "one of the two magics".
// libFuzzer hands each input in a buffer of exactly `size` bytes, so ASan
// catches any read past len.
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "fuzz_check.hpp"
#include "rdma/remote_ring.hpp"
#include "sock/wire/byte_order.hpp"
#include "sock/wire/protocol.hpp"
#include "sock/wire/revert_message.hpp"
#include "sock/wire/ring_resize.hpp"
#include "sock/wire/switch_message.hpp"

using namespace vsock::sock::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bool is_resize = is_ring_resize_message(data, size);
  if (size >= 4) {
    const uint32_t magic = load_be32(data);
    FUZZ_CHECK(is_resize == (magic == kRingGrowMagic || magic == kRingMovedMagic));
  } else {
    FUZZ_CHECK(!is_resize);
  }

  vsock::core::Result<RingGrowMessage> grow = parse_ring_grow(data, size);
  if (!grow) {
    FUZZ_CHECK(grow.error() == EPROTO);
  } else {
    FUZZ_CHECK(size >= kRingGrowMessageSize);
    FUZZ_CHECK(is_resize);
    FUZZ_CHECK(vsock::rdma::RemoteRing::create(grow.value().ring).has_value());
    uint8_t out[kRingGrowMessageSize];
    encode(grow.value(), out);
    FUZZ_CHECK(std::memcmp(out, data, kRingGrowMessageSize) == 0);
    FUZZ_CHECK(!parse_ring_grow(data, kRingGrowMessageSize - 1).has_value());
    vsock::core::Result<RingGrowMessage> again = parse_ring_grow(out, sizeof out);
    FUZZ_CHECK(again.has_value() && again.value() == grow.value());
  }

  vsock::core::Result<RingMovedMessage> moved = parse_ring_moved(data, size);
  if (!moved) {
    FUZZ_CHECK(moved.error() == EPROTO);
  } else {
    FUZZ_CHECK(size >= kRingMovedMessageSize);
    FUZZ_CHECK(is_resize);
    FUZZ_CHECK(moved.value().accepted || moved.value().position == 0);
    uint8_t out[kRingMovedMessageSize];
    encode(moved.value(), out);
    FUZZ_CHECK(std::memcmp(out, data, kRingMovedMessageSize) == 0);
    FUZZ_CHECK(!parse_ring_moved(data, kRingMovedMessageSize - 1).has_value());
    vsock::core::Result<RingMovedMessage> again = parse_ring_moved(out, sizeof out);
    FUZZ_CHECK(again.has_value() && again.value() == moved.value());
  }

  FUZZ_CHECK(!(grow && moved));
  if (grow || moved) {
    FUZZ_CHECK(!parse_revert_message(data, size).has_value());
    FUZZ_CHECK(!parse_switch_message(data, size).has_value());
  }
  return 0;
}
