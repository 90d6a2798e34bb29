#include "sock/wire/attach_message.hpp"

#include <cerrno>
#include <cstring>

#include "sock/wire/byte_order.hpp"
#include "sock/wire/protocol.hpp"

namespace vsock::sock::wire {
namespace {

// Each layout is the other message's with its own magic: the bytes are
// copied with the borrowed message's magic in place and parsed by its parser.
template <size_t kSize, typename Parsed, typename Parse>
core::Result<Parsed> parse_as(const void* data, size_t len, uint32_t own_magic, uint32_t borrowed_magic,
                              Parse parse) {
  if (data == nullptr || len < kSize) return core::Result<Parsed>::fail(EPROTO);
  uint8_t copy[kSize];
  std::memcpy(copy, data, kSize);
  if (load_be32(copy) != own_magic) return core::Result<Parsed>::fail(EPROTO);
  store_be32(copy, borrowed_magic);
  return parse(copy, kSize);
}

}  // namespace

ParkedMessageKind parked_message_kind(const void* data, size_t len) {
  if (data == nullptr || len < 4) return ParkedMessageKind::kUnknown;
  switch (load_be32(static_cast<const uint8_t*>(data))) {
    case kParkMagic: return ParkedMessageKind::kPark;
    case kAttachMagic: return ParkedMessageKind::kAttach;
    case kAttachedMagic: return ParkedMessageKind::kAttached;
    case kRejectMagic: return ParkedMessageKind::kReject;
    default: return ParkedMessageKind::kUnknown;
  }
}

void encode_park(uint8_t out[kParkMessageSize]) {
  std::memset(out, 0, kParkMessageSize);
  store_be32(out, kParkMagic);
  out[4] = kProtocolVersion;
}

core::Result<bool> parse_park(const void* data, size_t len) {
  using R = core::Result<bool>;
  if (data == nullptr || len < kParkMessageSize) return R::fail(EPROTO);
  const uint8_t* in = static_cast<const uint8_t*>(data);
  if (load_be32(in) != kParkMagic || in[4] != kProtocolVersion || !all_zero(in + 5, 3)) return R::fail(EPROTO);
  return R::ok(true);
}

void encode_attach(const UpgradeRequest& request, uint8_t out[kAttachMessageSize]) {
  encode(request, out);
  store_be32(out, kAttachMagic);
}

core::Result<UpgradeRequest> parse_attach(const void* data, size_t len) {
  return parse_as<kAttachMessageSize, UpgradeRequest>(data, len, kAttachMagic, kUpgradeMagic,
                                                      parse_upgrade_request);
}

void encode_attached(const UpgradeAccept& accept, uint8_t out[kAttachedMessageSize]) {
  encode(accept, out);
  store_be32(out, kAttachedMagic);
}

core::Result<UpgradeAccept> parse_attached(const void* data, size_t len) {
  return parse_as<kAttachedMessageSize, UpgradeAccept>(data, len, kAttachedMagic, kUpgradeMagic,
                                                       parse_upgrade_accept);
}

}  // namespace vsock::sock::wire
