// The 32-bit immediate of the stream data path (docs/protocol.md §3):
// `type:2 | value:30`, sent in network byte order.
//
//   type 0 DATA     value = the stream position where this write ends
//   type 1 CREDIT   value = the stream position up to which the reader has
//                   consumed the ring (the writer's new head)
//   type 2 CONTROL  value = 1 FIN, 2 RESET or 3 CLOSED
//   type 3          reserved: a protocol error
//
// Positions, not lengths (protocol version 3): each is the low 30 bits of
// a direction's byte count on the ring, and the receiver takes the
// distance from where it stands. An immediate delivered twice, late, or in
// place of another then gives a distance of zero or beyond what is in
// flight: refused, never credit the reader did not give. (rxe under packet
// loss took a CREDIT stream whose lengths summed to more than the peer
// posted, in as many messages, and the writer overran the reader's ring.)
// Rings are at most 2^29 bytes, so every genuine distance is below 2^30.
//
// Pure functions, no device: the peer controls every bit of an immediate,
// so parse_immediate() is the gate each one passes before it is acted on
// (fuzzed by tests/fuzz/fuzz_stream_immediate.cpp). It depends on nothing
// but core/result.hpp, so a fuzz target can build it from source.
#pragma once
#include <cstdint>

#include "core/result.hpp"

namespace vsock::sock {

enum class ImmediateType : uint8_t { kData = 0, kCredit = 1, kControl = 2 };

// kClosed follows the FIN when the socket is closed, not only shut down
// for writing: its owner reads nothing more (docs/protocol.md §3, §5.1).
enum class ControlCode : uint32_t { kFin = 1, kReset = 2, kClosed = 3 };

// The largest value one immediate carries; DATA and CREDIT carry a
// position's low 30 bits (wire_position).
inline constexpr uint32_t kImmediateValueMax = (uint32_t{1} << 30) - 1;

// A stream position as DATA and CREDIT carry it.
inline uint32_t wire_position(uint64_t position) { return static_cast<uint32_t>(position) & kImmediateValueMax; }
// How far the carried position `wire` lies ahead of the full position
// `from`: 0 .. 2^30-1.
inline uint64_t distance_to(uint64_t from, uint32_t wire) { return (wire - wire_position(from)) & kImmediateValueMax; }

struct Immediate {
  ImmediateType type = ImmediateType::kData;
  uint32_t value = 0;
};

// The immediate as a host-order word. EINVAL for what a well-behaved sender
// must never produce (a value above kImmediateValueMax, an unknown control
// code or type): a local bug, not the peer's.
core::Result<uint32_t> encode_immediate(Immediate immediate);

// Checks a host-order word from the peer. EPROTO for type 3 or a control
// code other than FIN, RESET and CLOSED. Whether a DATA or CREDIT position
// makes sense is the receiver's to say (distance_to): it knows where it
// stands.
core::Result<Immediate> parse_immediate(uint32_t word);

// ibv_send_wr::imm_data and ibv_wc::imm_data hold the immediate in network
// order; these convert between that and the host-order word.
uint32_t immediate_to_wire(uint32_t word);
uint32_t immediate_from_wire(uint32_t wire);

// Shorthands for the sender, from full stream positions.
inline core::Result<uint32_t> data_immediate(uint64_t end_position) {
  return encode_immediate({ImmediateType::kData, wire_position(end_position)});
}
inline core::Result<uint32_t> credit_immediate(uint64_t consumed_position) {
  return encode_immediate({ImmediateType::kCredit, wire_position(consumed_position)});
}
inline core::Result<uint32_t> control_immediate(ControlCode code) {
  return encode_immediate({ImmediateType::kControl, static_cast<uint32_t>(code)});
}

}  // namespace vsock::sock
