// parse_grh (src/rdma/grh.hpp): the 40-byte GRH slot of a UD receive in
// both of its forms, built by hand: the IPv6 form (an IB GRH or a RoCE v2
// IPv6 header, with IPv4-mapped and plain IPv6 GIDs) and the RoCE v2 IPv4
// form (20 reserved bytes, then the IPv4 header), the ambiguous case
// rdma-core settles with the IPv4 checksum, and every rejection. No device.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "rdma/grh.hpp"

namespace vsock::rdma {
namespace {

struct Slot {
  uint8_t bytes[kGrhSize] = {};
};

// The IPv6 form: version 6, traffic class, flow label, next header, hop
// limit, source and destination GIDs.
Slot ipv6_form(uint8_t traffic_class, uint32_t flow, uint8_t next, uint8_t hop, const uint8_t* sgid,
               const uint8_t* dgid) {
  Slot s;
  uint32_t first = (6u << 28) | (uint32_t{traffic_class} << 20) | (flow & 0xfffff);
  s.bytes[0] = static_cast<uint8_t>(first >> 24);
  s.bytes[1] = static_cast<uint8_t>(first >> 16);
  s.bytes[2] = static_cast<uint8_t>(first >> 8);
  s.bytes[3] = static_cast<uint8_t>(first);
  s.bytes[4] = 0;
  s.bytes[5] = 64;  // payload length: not read
  s.bytes[6] = next;
  s.bytes[7] = hop;
  std::memcpy(s.bytes + 8, sgid, 16);
  std::memcpy(s.bytes + 24, dgid, 16);
  return s;
}

void mapped_gid(const char* ipv4, uint8_t* gid) {
  std::memset(gid, 0, 16);
  gid[10] = gid[11] = 0xff;
  ASSERT_EQ(inet_pton(AF_INET, ipv4, gid + 12), 1);
}

// The RoCE v2 IPv4 form: 20 zero bytes, then the IPv4 header with a
// correct checksum.
Slot ipv4_form(uint8_t tos, uint8_t ttl, const char* source, const char* destination) {
  Slot s;
  uint8_t* h = s.bytes + kGrhIpv4Offset;
  h[0] = 0x45;
  h[1] = tos;
  h[2] = 0;
  h[3] = 84;  // total length: not read
  h[8] = ttl;
  h[9] = 17;  // UDP
  EXPECT_EQ(inet_pton(AF_INET, source, h + 12), 1);
  EXPECT_EQ(inet_pton(AF_INET, destination, h + 16), 1);
  uint16_t sum = ipv4_header_checksum(h);
  h[10] = static_cast<uint8_t>(sum >> 8);
  h[11] = static_cast<uint8_t>(sum);
  return s;
}

std::string text_of(const sockaddr_storage& a) {
  char out[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, out, sizeof out);
  else if (a.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, out, sizeof out);
  else
    return "none";
  return (a.ss_family == AF_INET ? "4:" : "6:") + std::string(out);
}

TEST(RdmaGrh, Ipv4FormAsRxeWritesIt) {
  Slot s = ipv4_form(0xB8, 63, "192.168.77.1", "192.168.77.2");
  auto info = parse_grh(s.bytes, sizeof s.bytes);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info.value().form, GrhForm::kIpv4);
  EXPECT_EQ(text_of(info.value().source), "4:192.168.77.1");
  EXPECT_EQ(text_of(info.value().destination), "4:192.168.77.2");
  EXPECT_EQ(info.value().hop_limit, 63);
  EXPECT_EQ(info.value().traffic_class, 0xB8);
  EXPECT_EQ(info.value().flow_label, 0u);
  EXPECT_EQ(info.value().next_header, 17);
  EXPECT_EQ(grh_address_length(info.value().source), sizeof(sockaddr_in));
  EXPECT_EQ(reinterpret_cast<const sockaddr_in&>(info.value().source).sin_port, 0);
}

TEST(RdmaGrh, Ipv4FormIgnoresTheReservedBytesUnlessTheyReadAsVersion6) {
  Slot s = ipv4_form(0, 64, "10.0.0.1", "10.0.0.2");
  s.bytes[0] = 0x45;  // whatever a device left there, not version 6
  s.bytes[7] = 0xAA;
  auto info = parse_grh(s.bytes, sizeof s.bytes);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info.value().form, GrhForm::kIpv4);
  EXPECT_EQ(text_of(info.value().source), "4:10.0.0.1");
}

TEST(RdmaGrh, Version6WithAValidIpv4HeaderBehindIsTheIpv4Form) {
  // rdma-core's rule: a checksum-correct IPv4 header at byte 20 wins.
  Slot s = ipv4_form(0, 64, "10.0.0.1", "10.0.0.2");
  s.bytes[0] = 0x60;
  auto info = parse_grh(s.bytes, sizeof s.bytes);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info.value().form, GrhForm::kIpv4);
  // One bit off in the checksum: then it is an IPv6 header.
  s.bytes[kGrhIpv4Offset + 11] ^= 1;
  info = parse_grh(s.bytes, sizeof s.bytes);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info.value().form, GrhForm::kIpv6);
}

TEST(RdmaGrh, Ipv6FormWithIpv4MappedGidsGivesIpv4Addresses) {
  uint8_t sgid[16], dgid[16];
  mapped_gid("192.168.77.1", sgid);
  mapped_gid("224.1.2.3", dgid);
  Slot s = ipv6_form(0x2C, 0xABCDE, 0x1B, 5, sgid, dgid);
  auto info = parse_grh(s.bytes, sizeof s.bytes);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info.value().form, GrhForm::kIpv6);
  EXPECT_EQ(text_of(info.value().source), "4:192.168.77.1");
  EXPECT_EQ(text_of(info.value().destination), "4:224.1.2.3");
  EXPECT_EQ(info.value().traffic_class, 0x2C);
  EXPECT_EQ(info.value().flow_label, 0xABCDEu);
  EXPECT_EQ(info.value().hop_limit, 5);
  EXPECT_EQ(info.value().next_header, 0x1B);
}

TEST(RdmaGrh, Ipv6FormWithIpv6Gids) {
  uint8_t sgid[16], dgid[16];
  ASSERT_EQ(inet_pton(AF_INET6, "fe80::1:2ff:fe03:405", sgid), 1);
  ASSERT_EQ(inet_pton(AF_INET6, "2001:db8::7", dgid), 1);
  Slot s = ipv6_form(0, 0, 17, 255, sgid, dgid);
  auto info = parse_grh(s.bytes, sizeof s.bytes);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(text_of(info.value().source), "6:fe80::1:2ff:fe03:405");
  EXPECT_EQ(text_of(info.value().destination), "6:2001:db8::7");
  EXPECT_EQ(grh_address_length(info.value().source), sizeof(sockaddr_in6));
  EXPECT_EQ(info.value().hop_limit, 255);
}

TEST(RdmaGrh, Rejections) {
  Slot zero;
  EXPECT_EQ(parse_grh(zero.bytes, sizeof zero.bytes).error(), EPROTO);  // neither form
  Slot s = ipv4_form(0, 64, "10.0.0.1", "10.0.0.2");
  EXPECT_EQ(parse_grh(s.bytes, kGrhSize - 1).error(), EPROTO);  // too short
  EXPECT_EQ(parse_grh(nullptr, kGrhSize).error(), EPROTO);
  s.bytes[kGrhIpv4Offset] = 0x46;  // IHL 6: options would not fit
  EXPECT_EQ(parse_grh(s.bytes, sizeof s.bytes).error(), EPROTO);
  s.bytes[kGrhIpv4Offset] = 0x55;  // version 5
  EXPECT_EQ(parse_grh(s.bytes, sizeof s.bytes).error(), EPROTO);
  s.bytes[0] = 0x70;  // version 7, nothing behind
  EXPECT_EQ(parse_grh(s.bytes, sizeof s.bytes).error(), EPROTO);
}

TEST(RdmaGrh, LongerBuffersReadOnlyTheSlot) {
  uint8_t buffer[kGrhSize + 8];
  Slot s = ipv4_form(0, 1, "1.2.3.4", "5.6.7.8");
  std::memcpy(buffer, s.bytes, kGrhSize);
  std::memset(buffer + kGrhSize, 0xFF, 8);
  auto info = parse_grh(buffer, sizeof buffer);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(text_of(info.value().destination), "4:5.6.7.8");
}

// grh_with_destination: a multicast arrival's slot as if sent to this host.
TEST(RdmaGrh, WithDestinationRewritesEitherFormAndKeepsTheRest) {
  in_addr local{};
  ASSERT_EQ(inet_pton(AF_INET, "192.168.77.2", &local), 1);
  Slot v4 = ipv4_form(0x10, 1, "192.168.77.1", "239.255.7.7");
  uint8_t out[kGrhSize];
  grh_with_destination(v4.bytes, GrhForm::kIpv4, local.s_addr, out);
  auto info = parse_grh(out, sizeof out);
  ASSERT_TRUE(info.has_value());  // the checksum is right again: still the IPv4 form
  EXPECT_EQ(info.value().form, GrhForm::kIpv4);
  EXPECT_EQ(text_of(info.value().source), "4:192.168.77.1");
  EXPECT_EQ(text_of(info.value().destination), "4:192.168.77.2");
  EXPECT_EQ(info.value().hop_limit, 1);
  EXPECT_EQ(info.value().traffic_class, 0x10);

  uint8_t sgid[16], dgid[16];
  mapped_gid("192.168.77.1", sgid);
  mapped_gid("239.255.7.7", dgid);
  Slot v6 = ipv6_form(0, 7, 17, 1, sgid, dgid);
  grh_with_destination(v6.bytes, GrhForm::kIpv6, local.s_addr, out);
  info = parse_grh(out, sizeof out);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info.value().form, GrhForm::kIpv6);
  EXPECT_EQ(text_of(info.value().source), "4:192.168.77.1");
  EXPECT_EQ(text_of(info.value().destination), "4:192.168.77.2");
  EXPECT_EQ(info.value().flow_label, 7u);
  EXPECT_EQ(std::memcmp(out, v6.bytes, 24), 0);  // everything before the destination as it was
}

TEST(RdmaGrh, ChecksumOfAKnownHeader) {
  // The RFC 1071 example header 4500 0073 0000 4000 4011 [b861] c0a8 0001 c0a8 00c7.
  const uint8_t header[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                              0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  EXPECT_EQ(ipv4_header_checksum(header), 0xb861);
}

}  // namespace
}  // namespace vsock::rdma
