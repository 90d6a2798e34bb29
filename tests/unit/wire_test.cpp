// The wire messages of docs/protocol.md sections 1 and 2 (src/sock/wire/):
// byte layouts against the document, round trips, every rejection rule,
// padded private data, and the sockaddr conversions for IPv4, IPv6 and
// IPv4-mapped IPv6 connections.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "sock/wire/endpoint.hpp"
#include "sock/wire/ring_field.hpp"
#include "sock/wire/switch_message.hpp"
#include "sock/wire/upgrade_accept.hpp"
#include "sock/wire/upgrade_request.hpp"

namespace vsock::sock::wire {
namespace {

using Bytes = std::vector<uint8_t>;

// --- sockaddr helpers -------------------------------------------------------

sockaddr_storage v4(const char* ip, uint16_t port) {
  sockaddr_storage storage{};
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET, ip, &in.sin_addr), 1) << ip;
  std::memcpy(&storage, &in, sizeof in);
  return storage;
}

sockaddr_storage v6(const char* ip, uint16_t port, uint32_t scope = 0) {
  sockaddr_storage storage{};
  sockaddr_in6 in{};
  in.sin6_family = AF_INET6;
  in.sin6_port = htons(port);
  in.sin6_scope_id = scope;
  EXPECT_EQ(inet_pton(AF_INET6, ip, &in.sin6_addr), 1) << ip;
  std::memcpy(&storage, &in, sizeof in);
  return storage;
}

const sockaddr* sa(const sockaddr_storage& storage) { return reinterpret_cast<const sockaddr*>(&storage); }
constexpr socklen_t kIn4Len = sizeof(sockaddr_in);
constexpr socklen_t kIn6Len = sizeof(sockaddr_in6);

Endpoint endpoint(std::initializer_list<uint8_t> ip, uint16_t port) {
  Endpoint e;
  size_t i = 0;
  for (uint8_t b : ip) e.ip[i++] = b;
  e.port = port;
  return e;
}

// --- sample messages --------------------------------------------------------

UpgradeRequest sample_v4_request() {
  UpgradeRequest r;
  r.family = kFamilyIpv4;
  r.client = endpoint({10, 0, 0, 1}, 40000);
  r.server = endpoint({10, 0, 0, 2}, 8080);
  r.nonce = 0x0123456789abcdefull;
  return r;
}

UpgradeRequest sample_v6_request() {
  UpgradeRequest r;
  r.family = kFamilyIpv6;
  r.client = endpoint({0x20, 0x01, 0x0d, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 1);
  r.server = endpoint({0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x11, 0x22}, 65535);
  r.nonce = 0xfedcba9876543210ull;
  return r;
}

UpgradeAccept sample_accept() { return {0x1122334455667788ull, {0x00007f0012340000ull, 0xdeadbeef, 1u << 20}}; }

SwitchMessage sample_switch() {
  return {0x1122334455667788ull, 0x0000000100000002ull, {0x00007f0056780000ull, 0x01020304, 65536}};
}

Bytes encoded(const UpgradeRequest& r) {
  Bytes out(kUpgradeRequestSize);
  encode(r, out.data());
  return out;
}
Bytes encoded(const UpgradeAccept& a) {
  Bytes out(kUpgradeAcceptSize);
  encode(a, out.data());
  return out;
}
Bytes encoded(const SwitchMessage& s) {
  Bytes out(kSwitchMessageSize);
  encode(s, out.data());
  return out;
}

int request_error(const Bytes& b) { return parse_upgrade_request(b.data(), b.size()).error(); }
int accept_error(const Bytes& b) { return parse_upgrade_accept(b.data(), b.size()).error(); }
int switch_error(const Bytes& b) { return parse_switch_message(b.data(), b.size()).error(); }

// ============================================================================
// UpgradeRequest

TEST(UpgradeRequest, LayoutMatchesTheDocument) {
  UpgradeRequest r = sample_v4_request();
  r.flags = 0x0102;
  const Bytes want = {
      'V', 'S', 'K', '1',                                      // magic
      4,                                                       // version
      4,                                                       // family
      0x01, 0x02,                                              // flags
      0x9c, 0x40,                                              // client port 40000
      0x1f, 0x90,                                              // server port 8080
      10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,         // client IP
      10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,         // server IP
      0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,          // nonce
      0, 0, 0, 0,                                              // reserved
  };
  ASSERT_EQ(want.size(), kUpgradeRequestSize);
  EXPECT_EQ(encoded(r), want);
}

TEST(UpgradeRequest, RoundTripsIpv4AndIpv6) {
  for (const UpgradeRequest& r : {sample_v4_request(), sample_v6_request()}) {
    Bytes bytes = encoded(r);
    core::Result<UpgradeRequest> parsed = parse_upgrade_request(bytes.data(), bytes.size());
    ASSERT_TRUE(parsed.has_value()) << parsed.error();
    EXPECT_EQ(parsed.value(), r);
    EXPECT_EQ(encoded(parsed.value()), bytes);
  }
}

TEST(UpgradeRequest, EncodeZeroesTheUnusedBytesOfAnIpv4Address) {
  UpgradeRequest r = sample_v4_request();
  r.client.ip[15] = 0xff;  // garbage a caller left behind
  Bytes bytes = encoded(r);
  EXPECT_EQ(bytes[12 + 15], 0);
  EXPECT_TRUE(parse_upgrade_request(bytes.data(), bytes.size()).has_value());
}

TEST(UpgradeRequest, IgnoresTrailingBytesFromTheCm) {
  // An IB CM REQ delivers 56 bytes of private data, other transports pad
  // more; whatever follows the message is not ours to judge.
  Bytes bytes = encoded(sample_v6_request());
  for (size_t extra : {size_t{1}, size_t{140}}) {
    Bytes padded = bytes;
    padded.resize(bytes.size() + extra, 0xa5);
    core::Result<UpgradeRequest> parsed = parse_upgrade_request(padded.data(), padded.size());
    ASSERT_TRUE(parsed.has_value()) << extra;
    EXPECT_EQ(parsed.value(), sample_v6_request());
  }
}

TEST(UpgradeRequest, RejectsShortInput) {
  Bytes bytes = encoded(sample_v4_request());
  for (size_t len = 0; len < kUpgradeRequestSize; ++len)
    EXPECT_EQ(parse_upgrade_request(bytes.data(), len).error(), EPROTO) << len;
  EXPECT_EQ(parse_upgrade_request(nullptr, 0).error(), EPROTO);
  EXPECT_EQ(parse_upgrade_request(nullptr, 100).error(), EPROTO);
}

TEST(UpgradeRequest, RejectsBadMagicAndVersion) {
  Bytes good = encoded(sample_v4_request());
  for (size_t i = 0; i < 4; ++i) {
    Bytes bad = good;
    bad[i] ^= 0x20;
    EXPECT_EQ(request_error(bad), EPROTO) << i;
  }
  Bytes switch_magic = good;
  switch_magic[3] = 'S';  // a Switch message is not a request
  EXPECT_EQ(request_error(switch_magic), EPROTO);
  // 1: before the token; 2: immediates carried lengths; 3: Bound had no count
  for (uint8_t version : {0, 1, 2, 3, 5, 255}) {
    Bytes bad = good;
    bad[4] = version;
    EXPECT_EQ(request_error(bad), EPROTO) << int(version);
  }
}

TEST(UpgradeRequest, RejectsUnknownFamilies) {
  Bytes good = encoded(sample_v6_request());
  for (int family : {0, 1, 2 /* AF_INET */, 5, 7, 10 /* AF_INET6 */, 46, 255}) {
    Bytes bad = good;
    bad[5] = static_cast<uint8_t>(family);
    EXPECT_EQ(request_error(bad), EPROTO) << family;
  }
}

TEST(UpgradeRequest, AcceptsAndKeepsUnknownFlags) {
  Bytes bytes = encoded(sample_v4_request());
  bytes[6] = 0x80;
  bytes[7] = 0x01;
  core::Result<UpgradeRequest> parsed = parse_upgrade_request(bytes.data(), bytes.size());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed.value().flags, 0x8001);
  EXPECT_EQ(encoded(parsed.value()), bytes);
}

TEST(UpgradeRequest, RejectsNonzeroReserved) {
  Bytes good = encoded(sample_v4_request());
  for (size_t i = 52; i < 56; ++i) {
    Bytes bad = good;
    bad[i] = 1;
    EXPECT_EQ(request_error(bad), EPROTO) << i;
  }
}

TEST(UpgradeRequest, RejectsIpv4AddressPadding) {
  Bytes good = encoded(sample_v4_request());
  for (size_t field : {size_t{12}, size_t{28}}) {
    for (size_t i = 4; i < 16; ++i) {
      Bytes bad = good;
      bad[field + i] = 0x80;
      EXPECT_EQ(request_error(bad), EPROTO) << field << "+" << i;
    }
  }
  // The same bytes are address bytes for IPv6.
  Bytes six = encoded(sample_v6_request());
  six[12 + 15] = 0x80;
  six[28 + 4] = 0x80;
  EXPECT_TRUE(parse_upgrade_request(six.data(), six.size()).has_value());
}

TEST(UpgradeRequest, RejectsPortZero) {
  UpgradeRequest client_zero = sample_v4_request();
  client_zero.client.port = 0;
  EXPECT_EQ(request_error(encoded(client_zero)), EPROTO);
  UpgradeRequest server_zero = sample_v6_request();
  server_zero.server.port = 0;
  EXPECT_EQ(request_error(encoded(server_zero)), EPROTO);
}

// --- from sockaddrs (client side) -------------------------------------------

TEST(UpgradeRequest, BuildsFromIpv4Sockaddrs) {
  sockaddr_storage local = v4("10.0.0.1", 40000), peer = v4("10.0.0.2", 8080);
  core::Result<UpgradeRequest> r = build_upgrade_request(sa(local), kIn4Len, sa(peer), kIn4Len, 0x0123456789abcdefull);
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r.value(), sample_v4_request());
}

TEST(UpgradeRequest, BuildsFromIpv6Sockaddrs) {
  sockaddr_storage local = v6("2001:db8:102:304:506:708:90a:b0c", 1);
  sockaddr_storage peer = v6("fe80::aabb:ccdd:eeff:1122", 65535, 3);  // the scope id is not carried
  core::Result<UpgradeRequest> r = build_upgrade_request(sa(local), kIn6Len, sa(peer), kIn6Len, 0xfedcba9876543210ull);
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r.value(), sample_v6_request());
}

TEST(UpgradeRequest, MappedAddressesBecomeFamily4) {
  // A dual-stack AF_INET6 client connected to an IPv4 server.
  sockaddr_storage local = v6("::ffff:10.0.0.1", 40000), peer = v6("::ffff:10.0.0.2", 8080);
  core::Result<UpgradeRequest> r = build_upgrade_request(sa(local), kIn6Len, sa(peer), kIn6Len, 0x0123456789abcdefull);
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r.value(), sample_v4_request());
  // Mixed (one AF_INET, one mapped) describes the same connection.
  sockaddr_storage plain_peer = v4("10.0.0.2", 8080);
  r = build_upgrade_request(sa(local), kIn6Len, sa(plain_peer), kIn4Len, 0x0123456789abcdefull);
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r.value(), sample_v4_request());
  // ::10.0.0.1 (IPv4-compatible, deprecated) is not mapped: plain IPv6.
  sockaddr_storage compat = v6("::10.0.0.1", 40000), compat_peer = v6("::10.0.0.2", 8080);
  r = build_upgrade_request(sa(compat), kIn6Len, sa(compat_peer), kIn6Len, 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r.value().family, kFamilyIpv6);
}

TEST(UpgradeRequest, BuildRejectsWhatCannotBeAConnection) {
  sockaddr_storage a4 = v4("10.0.0.1", 1), b4 = v4("10.0.0.2", 2), a6 = v6("2001:db8::1", 1);
  EXPECT_EQ(build_upgrade_request(sa(a4), kIn4Len, sa(a6), kIn6Len, 1).error(), EINVAL);  // families differ
  EXPECT_EQ(build_upgrade_request(sa(a4), kIn4Len - 1, sa(b4), kIn4Len, 1).error(), EINVAL);
  EXPECT_EQ(build_upgrade_request(sa(a4), kIn4Len, sa(a6), kIn6Len - 1, 1).error(), EINVAL);
  EXPECT_EQ(build_upgrade_request(nullptr, 0, sa(b4), kIn4Len, 1).error(), EINVAL);
  EXPECT_EQ(build_upgrade_request(sa(a4), 1, sa(b4), kIn4Len, 1).error(), EINVAL);
  sockaddr_storage zero_port = v4("10.0.0.3", 0);
  EXPECT_EQ(build_upgrade_request(sa(a4), kIn4Len, sa(zero_port), kIn4Len, 1).error(), EINVAL);
  sockaddr_storage unix_addr{};
  unix_addr.ss_family = AF_UNIX;
  EXPECT_EQ(build_upgrade_request(sa(unix_addr), sizeof(sockaddr_un), sa(b4), kIn4Len, 1).error(), EAFNOSUPPORT);
}

TEST(UpgradeRequest, WhatIsBuiltAlwaysParses) {
  sockaddr_storage local = v6("::ffff:192.168.1.1", 5000), peer = v6("::ffff:192.168.1.2", 6000);
  core::Result<UpgradeRequest> r = build_upgrade_request(sa(local), kIn6Len, sa(peer), kIn6Len, 0);
  ASSERT_TRUE(r.has_value());
  Bytes bytes = encoded(r.value());
  core::Result<UpgradeRequest> parsed = parse_upgrade_request(bytes.data(), bytes.size());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed.value(), r.value());
}

// --- matching a kernel socket (server side) ---------------------------------

TEST(UpgradeRequest, MatchesTheServersViewOfTheConnection) {
  UpgradeRequest r = sample_v4_request();
  sockaddr_storage local = v4("10.0.0.2", 8080), peer = v4("10.0.0.1", 40000);
  EXPECT_TRUE(upgrade_request_matches(r, sa(local), kIn4Len, sa(peer), kIn4Len));
  // The client's own view, unswapped, is not the server's.
  EXPECT_FALSE(upgrade_request_matches(r, sa(peer), kIn4Len, sa(local), kIn4Len));

  UpgradeRequest r6 = sample_v6_request();
  sockaddr_storage local6 = v6("fe80::aabb:ccdd:eeff:1122", 65535, 2);
  sockaddr_storage peer6 = v6("2001:db8:102:304:506:708:90a:b0c", 1);
  EXPECT_TRUE(upgrade_request_matches(r6, sa(local6), kIn6Len, sa(peer6), kIn6Len));
}

TEST(UpgradeRequest, MatchesIpv4AcrossSocketFamilies) {
  UpgradeRequest r = sample_v4_request();
  // A dual-stack AF_INET6 listener sees the IPv4 client as mapped.
  sockaddr_storage local = v6("::ffff:10.0.0.2", 8080), peer = v6("::ffff:10.0.0.1", 40000);
  EXPECT_TRUE(upgrade_request_matches(r, sa(local), kIn6Len, sa(peer), kIn6Len));
  // A family-6 request holding mapped addresses finds an AF_INET socket.
  UpgradeRequest mapped;
  mapped.family = kFamilyIpv6;
  mapped.client = endpoint({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1}, 40000);
  mapped.server = endpoint({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2}, 8080);
  sockaddr_storage local4 = v4("10.0.0.2", 8080), peer4 = v4("10.0.0.1", 40000);
  EXPECT_TRUE(upgrade_request_matches(mapped, sa(local4), kIn4Len, sa(peer4), kIn4Len));
  EXPECT_TRUE(upgrade_request_matches(mapped, sa(local), kIn6Len, sa(peer), kIn6Len));
}

TEST(UpgradeRequest, AnyDifferenceIsNoMatch) {
  UpgradeRequest r = sample_v4_request();
  const sockaddr_storage local = v4("10.0.0.2", 8080), peer = v4("10.0.0.1", 40000);
  struct Case {
    sockaddr_storage local, peer;
  } cases[] = {
      {v4("10.0.0.2", 8081), peer},  {v4("10.0.0.3", 8080), peer},  {local, v4("10.0.0.1", 40001)},
      {local, v4("10.0.0.9", 40000)}, {local, local},                {peer, peer},
  };
  for (const Case& c : cases) EXPECT_FALSE(upgrade_request_matches(r, sa(c.local), kIn4Len, sa(c.peer), kIn4Len));
  // Same bytes, other family: 10.0.0.2 is not ::a00:2.
  sockaddr_storage local6 = v6("a00:2::", 8080), peer6 = v6("a00:1::", 40000);
  EXPECT_FALSE(upgrade_request_matches(r, sa(local6), kIn6Len, sa(peer6), kIn6Len));
  // Unreadable sockaddrs never match.
  EXPECT_FALSE(upgrade_request_matches(r, sa(local), kIn4Len - 1, sa(peer), kIn4Len));
  EXPECT_FALSE(upgrade_request_matches(r, nullptr, 0, sa(peer), kIn4Len));
}

TEST(Endpoint, ConvertsBackToSockaddrs) {
  for (const sockaddr_storage& original : {v4("192.0.2.7", 443), v6("2001:db8::42", 22)}) {
    socklen_t len = original.ss_family == AF_INET ? kIn4Len : kIn6Len;
    core::Result<FamilyEndpoint> e = endpoint_from_sockaddr(sa(original), len);
    ASSERT_TRUE(e.has_value());
    sockaddr_storage back;
    core::Result<socklen_t> back_len = endpoint_to_sockaddr(e.value().family, e.value().endpoint, &back);
    ASSERT_TRUE(back_len.has_value());
    EXPECT_EQ(back_len.value(), len);
    EXPECT_EQ(std::memcmp(&back, &original, len), 0);
  }
  sockaddr_storage out;
  EXPECT_EQ(endpoint_to_sockaddr(5, Endpoint{}, &out).error(), EAFNOSUPPORT);
}

TEST(Endpoint, ReadsUnalignedSockaddrs) {
  // getsockname may fill any buffer; the conversion copies, never casts.
  sockaddr_storage in6 = v6("2001:db8::1", 9);
  alignas(16) uint8_t buffer[sizeof(sockaddr_in6) + 1];
  std::memcpy(buffer + 1, &in6, sizeof(sockaddr_in6));
  core::Result<FamilyEndpoint> e = endpoint_from_sockaddr(reinterpret_cast<const sockaddr*>(buffer + 1), kIn6Len);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e.value().endpoint.port, 9);
}

// ============================================================================
// UpgradeAccept

TEST(UpgradeAccept, LayoutMatchesTheDocument) {
  const Bytes want = {
      'V', 'S', 'K', '1', 4, 0, 0, 0,                  // magic, version, reserved
      0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // nonce
      0x00, 0x00, 0x7f, 0x00, 0x12, 0x34, 0x00, 0x00,  // ring address
      0xde, 0xad, 0xbe, 0xef,                          // rkey
      0x00, 0x10, 0x00, 0x00,                          // capacity 1 MiB
  };
  ASSERT_EQ(want.size(), kUpgradeAcceptSize);
  EXPECT_EQ(encoded(sample_accept()), want);
}

TEST(UpgradeAccept, RoundTripsAndIgnoresTrailingBytes) {
  Bytes bytes = encoded(sample_accept());
  core::Result<UpgradeAccept> parsed = parse_upgrade_accept(bytes.data(), bytes.size());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed.value(), sample_accept());
  bytes.resize(196, 0xff);  // an IB CM REP's private data
  parsed = parse_upgrade_accept(bytes.data(), bytes.size());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed.value(), sample_accept());
}

TEST(UpgradeAccept, RejectsShortInputMagicVersionReserved) {
  Bytes good = encoded(sample_accept());
  for (size_t len = 0; len < kUpgradeAcceptSize; ++len)
    EXPECT_EQ(parse_upgrade_accept(good.data(), len).error(), EPROTO) << len;
  EXPECT_EQ(parse_upgrade_accept(nullptr, 64).error(), EPROTO);
  for (size_t i = 0; i < 8; ++i) {  // magic, version, reserved (byte 5 is the flags)
    if (i == 5) continue;
    Bytes bad = good;
    bad[i] ^= 0x01;
    EXPECT_EQ(accept_error(bad), EPROTO) << i;
  }
  Bytes switch_magic = good;
  switch_magic[3] = 'S';
  EXPECT_EQ(accept_error(switch_magic), EPROTO);
}

TEST(UpgradeAccept, CarriesItsFlagsAndKeepsUnknownBits) {
  for (uint8_t flags : {uint8_t{0}, kAcceptFlagBound, uint8_t{0x81}}) {
    UpgradeAccept accept = sample_accept();
    accept.flags = flags;
    Bytes bytes = encoded(accept);
    EXPECT_EQ(bytes[5], flags);
    core::Result<UpgradeAccept> parsed = parse_upgrade_accept(bytes.data(), bytes.size());
    ASSERT_TRUE(parsed);
    EXPECT_EQ(parsed.value().flags, flags);
    EXPECT_TRUE(parsed.value() == accept);
  }
}

// The ring rules are rdma::RemoteRing::create's; both messages share them.
struct RingCase {
  uint64_t address;
  uint32_t capacity;
  bool valid;
};
const RingCase kRingCases[] = {
    {0x10000, 0, false},
    {0x10000, 1, true},
    {0x10000, 3, false},
    {0x10000, 4096, true},
    {0x10000, 4097, false},
    {0x10000, 0x80000000u, true},  // 2^31: the largest an immediate can describe
    {0x10000, 0xc0000000u, false},
    {0x10000, 0xffffffffu, false},
    {0, 4096, true},
    {UINT64_MAX - 100, 4096, false},         // wraps the address space
    {UINT64_MAX - 4096 + 1, 4096, false},    // ends exactly at 2^64: its end is not representable
    {UINT64_MAX - 4096, 4096, true},         // ends at 2^64 - 1
    {UINT64_MAX - 0x80000000u, 0x80000000u, true},
    {UINT64_MAX - 0x7fffffffu, 0x80000000u, false},
};

TEST(UpgradeAccept, ValidatesTheRingLikeRemoteRing) {
  for (const RingCase& c : kRingCases) {
    UpgradeAccept a = sample_accept();
    a.ring.address = c.address;
    a.ring.capacity = c.capacity;
    Bytes bytes = encoded(a);
    core::Result<UpgradeAccept> parsed = parse_upgrade_accept(bytes.data(), bytes.size());
    EXPECT_EQ(parsed.has_value(), c.valid) << c.address << " " << c.capacity;
    EXPECT_EQ(rdma::RemoteRing::create(a.ring).has_value(), c.valid) << c.address << " " << c.capacity;
    if (!c.valid) {
      EXPECT_EQ(parsed.error(), EPROTO);
    }
  }
}

// ============================================================================
// Switch

TEST(SwitchMessage, LayoutMatchesTheDocument) {
  const Bytes want = {
      'V', 'S', 'K', 'S', 4, 0, 0, 0,                  // magic, version, reserved
      0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // nonce
      0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02,  // bytes written on TCP
      0x00, 0x00, 0x7f, 0x00, 0x56, 0x78, 0x00, 0x00,  // ring address
      0x01, 0x02, 0x03, 0x04,                          // rkey
      0x00, 0x01, 0x00, 0x00,                          // capacity 64 KiB
  };
  ASSERT_EQ(want.size(), kSwitchMessageSize);
  EXPECT_EQ(encoded(sample_switch()), want);
}

TEST(SwitchMessage, RoundTripsAndIgnoresTrailingBytes) {
  for (uint64_t tcp_bytes : {uint64_t{0}, uint64_t{1}, UINT64_MAX}) {
    SwitchMessage s = sample_switch();
    s.tcp_bytes = tcp_bytes;
    Bytes bytes = encoded(s);
    bytes.resize(bytes.size() + 24, 0x5a);
    core::Result<SwitchMessage> parsed = parse_switch_message(bytes.data(), bytes.size());
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(parsed.value(), s);
  }
}

TEST(SwitchMessage, RejectsShortInputMagicVersionReserved) {
  Bytes good = encoded(sample_switch());
  for (size_t len = 0; len < kSwitchMessageSize; ++len)
    EXPECT_EQ(parse_switch_message(good.data(), len).error(), EPROTO) << len;
  EXPECT_EQ(parse_switch_message(nullptr, 64).error(), EPROTO);
  for (size_t i = 0; i < 8; ++i) {
    Bytes bad = good;
    bad[i] ^= 0x01;
    EXPECT_EQ(switch_error(bad), EPROTO) << i;
  }
  // An UpgradeAccept is not a Switch, even with the length of one.
  Bytes accept = encoded(sample_accept());
  accept.resize(kSwitchMessageSize);
  EXPECT_EQ(switch_error(accept), EPROTO);
}

TEST(SwitchMessage, ValidatesTheRingLikeRemoteRing) {
  for (const RingCase& c : kRingCases) {
    SwitchMessage s = sample_switch();
    s.ring.address = c.address;
    s.ring.capacity = c.capacity;
    Bytes bytes = encoded(s);
    core::Result<SwitchMessage> parsed = parse_switch_message(bytes.data(), bytes.size());
    EXPECT_EQ(parsed.has_value(), c.valid) << c.address << " " << c.capacity;
    if (!c.valid) {
      EXPECT_EQ(parsed.error(), EPROTO);
    }
  }
}

}  // namespace
}  // namespace vsock::sock::wire
