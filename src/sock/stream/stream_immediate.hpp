// The 32-bit immediate of the stream data path (docs/protocol.md §3):
// `type:2 | value:30`, sent in network byte order.
//
//   type 0 DATA     value = bytes written by this work request (1 .. 2^30-1)
//   type 1 CREDIT   value = bytes consumed since the last credit (1 .. 2^30-1)
//   type 2 CONTROL  value = 1 FIN or 2 RESET
//   type 3          reserved: a protocol error
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

// The largest DATA length or CREDIT count one immediate can carry.
inline constexpr uint32_t kImmediateValueMax = (uint32_t{1} << 30) - 1;

struct Immediate {
  ImmediateType type = ImmediateType::kData;
  uint32_t value = 0;
};

// The immediate as a host-order word. EINVAL for what a well-behaved sender
// must never produce (DATA or CREDIT of 0 or above kImmediateValueMax, an
// unknown control code or type): a local bug, not the peer's.
core::Result<uint32_t> encode_immediate(Immediate immediate);

// Checks a host-order word from the peer. EPROTO for type 3, a zero DATA or
// CREDIT, or a control code other than FIN and RESET.
core::Result<Immediate> parse_immediate(uint32_t word);

// ibv_send_wr::imm_data and ibv_wc::imm_data hold the immediate in network
// order; these convert between that and the host-order word.
uint32_t immediate_to_wire(uint32_t word);
uint32_t immediate_from_wire(uint32_t wire);

// Shorthands for the sender; lengths and counts outside 1 .. kImmediateValueMax
// are the caller's bug and fail like encode_immediate().
inline core::Result<uint32_t> data_immediate(uint32_t length) {
  return encode_immediate({ImmediateType::kData, length});
}
inline core::Result<uint32_t> credit_immediate(uint32_t bytes) {
  return encode_immediate({ImmediateType::kCredit, bytes});
}
inline core::Result<uint32_t> control_immediate(ControlCode code) {
  return encode_immediate({ImmediateType::kControl, static_cast<uint32_t>(code)});
}

}  // namespace vsock::sock
