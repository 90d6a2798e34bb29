#include "rdma/grh.hpp"

#include <cerrno>
#include <cstring>

namespace vsock::rdma {
namespace {

constexpr size_t kIpv4HeaderSize = 20;
constexpr size_t kSourceGidOffset = 8;
constexpr size_t kDestinationGidOffset = 24;

uint32_t get_be32(const uint8_t* in) {
  return (uint32_t{in[0]} << 24) | (uint32_t{in[1]} << 16) | (uint32_t{in[2]} << 8) | uint32_t{in[3]};
}

bool is_ipv4_mapped(const uint8_t* gid) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid, kPrefix, sizeof kPrefix) == 0;
}

void put_ipv4(const uint8_t* address, sockaddr_storage* out) {
  std::memset(out, 0, sizeof *out);
  auto* in = reinterpret_cast<sockaddr_in*>(out);
  in->sin_family = AF_INET;
  std::memcpy(&in->sin_addr, address, 4);
}

// A GID as an address: IPv4-mapped ones as AF_INET.
void put_gid(const uint8_t* gid, sockaddr_storage* out) {
  if (is_ipv4_mapped(gid)) {
    put_ipv4(gid + 12, out);
    return;
  }
  std::memset(out, 0, sizeof *out);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(out);
  in6->sin6_family = AF_INET6;
  std::memcpy(&in6->sin6_addr, gid, 16);
}

bool ipv4_version_and_ihl_ok(const uint8_t* header) { return header[0] == 0x45; }

bool ipv4_checksum_ok(const uint8_t* header) {
  uint16_t stored = static_cast<uint16_t>((header[10] << 8) | header[11]);
  return ipv4_header_checksum(header) == stored;
}

GrhInfo parse_ipv4_form(const uint8_t* header) {
  GrhInfo info;
  info.form = GrhForm::kIpv4;
  info.traffic_class = header[1];
  info.hop_limit = header[8];
  info.next_header = header[9];
  put_ipv4(header + 12, &info.source);
  put_ipv4(header + 16, &info.destination);
  return info;
}

GrhInfo parse_ipv6_form(const uint8_t* grh) {
  GrhInfo info;
  info.form = GrhForm::kIpv6;
  uint32_t first = get_be32(grh);
  info.traffic_class = static_cast<uint8_t>((first >> 20) & 0xff);
  info.flow_label = first & 0xfffff;
  info.next_header = grh[6];
  info.hop_limit = grh[7];
  put_gid(grh + kSourceGidOffset, &info.source);
  put_gid(grh + kDestinationGidOffset, &info.destination);
  return info;
}

}  // namespace

uint16_t ipv4_header_checksum(const uint8_t* header) {
  uint32_t sum = 0;
  for (size_t i = 0; i < kIpv4HeaderSize; i += 2) {
    if (i == 10) continue;  // the checksum field itself
    sum += static_cast<uint32_t>((header[i] << 8) | header[i + 1]);
  }
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum & 0xffff);
}

core::Result<GrhInfo> parse_grh(const uint8_t* grh, size_t length) {
  using R = core::Result<GrhInfo>;
  if (grh == nullptr || length < kGrhSize) return R::fail(EPROTO);
  const uint8_t* ipv4 = grh + kGrhIpv4Offset;
  if ((grh[0] >> 4) != 6) {
    // Not an IPv6 header: only the IPv4 form is left.
    if (!ipv4_version_and_ihl_ok(ipv4)) return R::fail(EPROTO);
    return R::ok(parse_ipv4_form(ipv4));
  }
  // Version 6 in byte 0 may still be the IPv4 form with non-zero reserved
  // bytes; believe an IPv4 header only when its checksum is right.
  if (ipv4_version_and_ihl_ok(ipv4) && ipv4_checksum_ok(ipv4)) return R::ok(parse_ipv4_form(ipv4));
  return R::ok(parse_ipv6_form(grh));
}

void grh_with_destination(const uint8_t* grh, GrhForm form, uint32_t local, uint8_t* out) {
  std::memcpy(out, grh, kGrhSize);
  if (form == GrhForm::kIpv4) {
    uint8_t* ipv4 = out + kGrhIpv4Offset;
    std::memcpy(ipv4 + 16, &local, 4);
    const uint16_t checksum = ipv4_header_checksum(ipv4);
    ipv4[10] = static_cast<uint8_t>(checksum >> 8);
    ipv4[11] = static_cast<uint8_t>(checksum & 0xff);
    return;
  }
  static constexpr uint8_t kMappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  std::memcpy(out + kDestinationGidOffset, kMappedPrefix, sizeof kMappedPrefix);
  std::memcpy(out + kDestinationGidOffset + 12, &local, 4);
}

socklen_t grh_address_length(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) return sizeof(sockaddr_in);
  if (address.ss_family == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

}  // namespace vsock::rdma
