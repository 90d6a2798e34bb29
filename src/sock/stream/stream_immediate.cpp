#include "sock/stream/stream_immediate.hpp"

#include <cerrno>

namespace vsock::sock {
namespace {

constexpr int kValueBits = 30;
constexpr uint32_t kValueMask = (uint32_t{1} << kValueBits) - 1;

// The one rule shared by both directions; `error` says whose fault a
// violation is (EINVAL: ours, EPROTO: the peer's).
core::Result<Immediate> check(Immediate immediate, int error) {
  using R = core::Result<Immediate>;
  switch (immediate.type) {
    case ImmediateType::kData:
    case ImmediateType::kCredit:
      // Any position; the receiver checks the distance it implies.
      if (immediate.value > kImmediateValueMax) return R::fail(error);
      return R::ok(immediate);
    case ImmediateType::kControl:
      if (immediate.value != static_cast<uint32_t>(ControlCode::kFin) &&
          immediate.value != static_cast<uint32_t>(ControlCode::kReset) &&
          immediate.value != static_cast<uint32_t>(ControlCode::kClosed))
        return R::fail(error);
      return R::ok(immediate);
  }
  return R::fail(error);  // type 3, or an enum value out of range
}

}  // namespace

core::Result<uint32_t> encode_immediate(Immediate immediate) {
  core::Result<Immediate> checked = check(immediate, EINVAL);
  if (!checked) return core::Result<uint32_t>::fail(checked.error());
  return core::Result<uint32_t>::ok(static_cast<uint32_t>(immediate.type) << kValueBits | immediate.value);
}

core::Result<Immediate> parse_immediate(uint32_t word) {
  uint32_t type = word >> kValueBits;
  if (type > static_cast<uint32_t>(ImmediateType::kControl)) return core::Result<Immediate>::fail(EPROTO);
  return check({static_cast<ImmediateType>(type), word & kValueMask}, EPROTO);
}

// Byte by byte rather than htonl(), so that the function is the same on any
// host and needs no header beyond this one.
uint32_t immediate_to_wire(uint32_t word) {
  uint8_t bytes[4] = {static_cast<uint8_t>(word >> 24), static_cast<uint8_t>(word >> 16),
                      static_cast<uint8_t>(word >> 8), static_cast<uint8_t>(word)};
  uint32_t wire = 0;
  for (int i = 0; i < 4; ++i) reinterpret_cast<uint8_t*>(&wire)[i] = bytes[i];
  return wire;
}

uint32_t immediate_from_wire(uint32_t wire) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(&wire);
  return uint32_t{bytes[0]} << 24 | uint32_t{bytes[1]} << 16 | uint32_t{bytes[2]} << 8 | bytes[3];
}

}  // namespace vsock::sock
