// Park, Attach and Attached (docs/protocol.md §1.2,
// src/sock/wire/attach_message.*): the byte layouts against the document,
// round trips, and that no message parses as another.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "sock/wire/attach_message.hpp"
#include "sock/wire/reject_message.hpp"

namespace vsock::sock::wire {
namespace {

using Bytes = std::vector<uint8_t>;

UpgradeRequest sample_request() {
  sockaddr_in client{}, server{};
  client.sin_family = server.sin_family = AF_INET;
  client.sin_port = htons(40000);
  server.sin_port = htons(80);
  inet_pton(AF_INET, "10.0.0.1", &client.sin_addr);
  inet_pton(AF_INET, "10.0.0.2", &server.sin_addr);
  return build_upgrade_request(reinterpret_cast<sockaddr*>(&client), sizeof client,
                               reinterpret_cast<sockaddr*>(&server), sizeof server, 0x0102030405060708)
      .value();
}

UpgradeAccept sample_accept() {
  UpgradeAccept accept;
  accept.nonce = 0x1122334455667788;
  accept.flags = kAcceptFlagBound;
  accept.ring = rdma::RingDescriptor{0x7F0012340000, 0xDEADBEEF, 1 << 16};
  return accept;
}

TEST(ParkMessage, LayoutMatchesTheDocument) {
  Bytes out(kParkMessageSize);
  encode_park(out.data());
  EXPECT_EQ(out, (Bytes{'V', 'S', 'K', 'P', 4, 0, 0, 0}));
  EXPECT_TRUE(parse_park(out.data(), out.size()).has_value());
  EXPECT_EQ(parked_message_kind(out.data(), out.size()), ParkedMessageKind::kPark);
}

TEST(ParkMessage, RefusesShortOtherVersionAndReservedBytes) {
  Bytes out(kParkMessageSize);
  encode_park(out.data());
  EXPECT_EQ(parse_park(out.data(), out.size() - 1).error(), EPROTO);
  Bytes version = out;
  version[4] = 2;
  EXPECT_EQ(parse_park(version.data(), version.size()).error(), EPROTO);
  for (size_t i = 5; i < 8; ++i) {
    Bytes reserved = out;
    reserved[i] = 1;
    EXPECT_EQ(parse_park(reserved.data(), reserved.size()).error(), EPROTO) << i;
  }
}

TEST(AttachMessage, IsTheRequestLayoutWithItsOwnMagic) {
  UpgradeRequest request = sample_request();
  Bytes attach(kAttachMessageSize), upgrade(kUpgradeRequestSize);
  encode_attach(request, attach.data());
  encode(request, upgrade.data());
  EXPECT_EQ(Bytes(attach.begin(), attach.begin() + 4), (Bytes{'V', 'S', 'K', 'A'}));
  EXPECT_EQ(Bytes(attach.begin() + 4, attach.end()), Bytes(upgrade.begin() + 4, upgrade.end()));
  core::Result<UpgradeRequest> parsed = parse_attach(attach.data(), attach.size());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed.value(), request);
  EXPECT_EQ(parked_message_kind(attach.data(), attach.size()), ParkedMessageKind::kAttach);
  // Neither parses as the other.
  EXPECT_EQ(parse_upgrade_request(attach.data(), attach.size()).error(), EPROTO);
  EXPECT_EQ(parse_attach(upgrade.data(), upgrade.size()).error(), EPROTO);
  EXPECT_EQ(parse_attach(attach.data(), attach.size() - 1).error(), EPROTO);
}

TEST(AttachedMessage, IsTheAcceptLayoutWithItsOwnMagic) {
  UpgradeAccept accept = sample_accept();
  Bytes attached(kAttachedMessageSize), upgrade(kUpgradeAcceptSize);
  encode_attached(accept, attached.data());
  encode(accept, upgrade.data());
  EXPECT_EQ(Bytes(attached.begin(), attached.begin() + 4), (Bytes{'V', 'S', 'K', 'T'}));
  EXPECT_EQ(Bytes(attached.begin() + 4, attached.end()), Bytes(upgrade.begin() + 4, upgrade.end()));
  core::Result<UpgradeAccept> parsed = parse_attached(attached.data(), attached.size());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed.value(), accept);
  EXPECT_EQ(parse_upgrade_accept(attached.data(), attached.size()).error(), EPROTO);
  // A bad ring is refused as in UpgradeAccept.
  UpgradeAccept bad = accept;
  bad.ring.capacity = 3000;
  encode_attached(bad, attached.data());
  EXPECT_EQ(parse_attached(attached.data(), attached.size()).error(), EPROTO);
}

TEST(ParkedMessageKind, NamesEachMagicAndNothingElse) {
  RejectMessage reject;
  reject.nonce = 9;
  reject.reason = RejectReason::kConnection;
  Bytes bytes(kRejectMessageSize);
  encode(reject, bytes.data());
  EXPECT_EQ(parked_message_kind(bytes.data(), bytes.size()), ParkedMessageKind::kReject);
  Bytes upgrade(kUpgradeRequestSize);
  encode(sample_request(), upgrade.data());
  EXPECT_EQ(parked_message_kind(upgrade.data(), upgrade.size()), ParkedMessageKind::kUnknown);
  EXPECT_EQ(parked_message_kind(bytes.data(), 3), ParkedMessageKind::kUnknown);
  EXPECT_EQ(parked_message_kind(nullptr, 8), ParkedMessageKind::kUnknown);
}

}  // namespace
}  // namespace vsock::sock::wire
