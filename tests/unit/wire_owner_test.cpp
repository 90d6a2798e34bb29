// The owner request a fork child sends to the process that owns a
// connection's RDMA path, and its answer (docs/protocol.md §5.2,
// src/sock/wire/owner_request.*): the layout against the document, the
// round trip, and every rejection rule.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "sock/wire/owner_request.hpp"
#include "sock/wire/revert_message.hpp"

namespace vsock::sock::wire {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes encoded(uint64_t nonce) {
  Bytes out(kOwnerRequestSize);
  encode(OwnerRequest{nonce}, out.data());
  return out;
}

TEST(OwnerRequest, LayoutMatchesTheDocument) {
  const Bytes want = {
      'V', 'S', 'K', 'O', 4, 0, 0, 0,                  // magic, version, reserved
      0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // the connection's nonce
  };
  EXPECT_EQ(encoded(0x1122334455667788), want);
  core::Result<OwnerRequest> parsed = parse_owner_request(want.data(), want.size());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed.value().nonce, 0x1122334455667788u);
}

TEST(OwnerRequest, OnlyExactlySixteenBytesParse) {
  Bytes bytes = encoded(42);
  EXPECT_EQ(parse_owner_request(bytes.data(), bytes.size() - 1).error(), EPROTO);
  bytes.push_back(0);
  EXPECT_EQ(parse_owner_request(bytes.data(), bytes.size()).error(), EPROTO);
  EXPECT_EQ(parse_owner_request(nullptr, kOwnerRequestSize).error(), EPROTO);
}

TEST(OwnerRequest, RefusesAnotherMagicVersionReservedBytesOrNonceZero) {
  for (size_t index : {0u, 3u, 4u, 5u, 7u}) {
    Bytes bytes = encoded(42);
    bytes[index] ^= 0x40;
    EXPECT_EQ(parse_owner_request(bytes.data(), bytes.size()).error(), EPROTO) << "byte " << index;
  }
  Bytes zero = encoded(0);
  EXPECT_EQ(parse_owner_request(zero.data(), zero.size()).error(), EPROTO);
  // A Revert's first 16 bytes are not a request.
  uint8_t revert[kRevertMessageSize];
  encode(RevertMessage{42, 1, 2}, revert);
  EXPECT_EQ(parse_owner_request(revert, kOwnerRequestSize).error(), EPROTO);
}

TEST(OwnerAnswer, OneByteOfAKnownValue) {
  for (OwnerAnswer answer : {OwnerAnswer::kOnTcp, OwnerAnswer::kReset, OwnerAnswer::kNotHere}) {
    const uint8_t byte = static_cast<uint8_t>(answer);
    core::Result<OwnerAnswer> parsed = parse_owner_answer(&byte, 1);
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(parsed.value(), answer);
  }
  for (uint8_t byte : {0, 4, 255}) EXPECT_EQ(parse_owner_answer(&byte, 1).error(), EPROTO) << int(byte);
  const uint8_t two[2] = {1, 1};
  EXPECT_EQ(parse_owner_answer(two, 2).error(), EPROTO);
  EXPECT_EQ(parse_owner_answer(two, 0).error(), EPROTO);
}

}  // namespace
}  // namespace vsock::sock::wire
