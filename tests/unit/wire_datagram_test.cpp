// The UD datagram header (docs/protocol.md §6, src/sock/wire/datagram_header.*)
// and the fragment layout it relies on (wire/fragment_layout.*): the byte
// layout against the document, round trips of every type, the limits, and
// each rejection rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <vector>

#include "sock/wire/datagram_header.hpp"
#include "sock/wire/fragment_layout.hpp"
#include "sock/wire/revert_message.hpp"

namespace vsock::sock::wire {
namespace {

using Bytes = std::vector<uint8_t>;

DatagramHeader sample_data() {
  DatagramHeader h;
  h.type = DatagramType::kData;
  h.source_port = 0x1234;
  h.destination_port = 0x5678;
  h.datagram_id = 0x9ABCDEF0;
  h.destination_cookie = 0x1122334455667788;
  h.source_cookie = 0x99AABBCCDDEEFF00;
  h.fragment_index = 1;
  h.fragment_count = 3;
  h.total_length = 10;  // spans 0..4, 4..7, 7..10
  h.payload_length = 3;
  return h;
}

DatagramHeader sample_unreach() {
  DatagramHeader h;
  h.type = DatagramType::kUnreach;
  h.source_port = 5678;
  h.destination_port = 1234;
  h.datagram_id = 77;
  h.destination_cookie = 0x10;
  h.source_cookie = 0x20;
  return h;
}

DatagramHeader sample_revoke() {
  DatagramHeader h;
  h.type = DatagramType::kRevoke;
  h.source_port = 5678;
  h.source_cookie = 0x20;
  return h;
}

DatagramHeader sample_announce() {
  DatagramHeader h;
  h.type = DatagramType::kAnnounce;
  h.source_port = 40000;
  h.source_cookie = 0x20;
  h.destination_port = 5201;
  h.destination_cookie = 0x10;
  return h;
}

// The header followed by its payload_length bytes, as a receive delivers it
// once the GRH is taken off.
Bytes message(const DatagramHeader& h) {
  Bytes out(kDatagramHeaderSize + h.payload_length, 0xA5);
  encode(h, out.data());
  return out;
}

int parse_error(const Bytes& bytes) { return parse_datagram_header(bytes.data(), bytes.size()).error(); }
int parse_error(const DatagramHeader& h) { return parse_error(message(h)); }

// --- fragment layout --------------------------------------------------------

TEST(FragmentLayout, SpansAreEvenContiguousAndCoverTheDatagram) {
  for (uint32_t total : {1u, 2u, 7u, 10u, 216u, 1000u, 4056u, 65507u}) {
    for (uint32_t count = 1; count <= std::min(total, 40u); ++count) {
      uint32_t next = 0;
      for (uint32_t i = 0; i < count; ++i) {
        core::Result<FragmentSpan> span = fragment_span(total, count, i);
        ASSERT_TRUE(span.has_value()) << total << " " << count << " " << i;
        EXPECT_EQ(span.value().offset, next);
        EXPECT_GE(span.value().length, total / count);
        EXPECT_LE(span.value().length, total / count + 1);
        next += span.value().length;
      }
      EXPECT_EQ(next, total) << total << " " << count;
    }
  }
}

TEST(FragmentLayout, TheLongerFragmentsComeFirst) {
  // 10 bytes in 3: 4, 3, 3.
  EXPECT_EQ(fragment_span(10, 3, 0).value().length, 4u);
  EXPECT_EQ(fragment_span(10, 3, 1).value().offset, 4u);
  EXPECT_EQ(fragment_span(10, 3, 1).value().length, 3u);
  EXPECT_EQ(fragment_span(10, 3, 2).value().offset, 7u);
  EXPECT_EQ(fragment_span(10, 3, 2).value().length, 3u);
}

TEST(FragmentLayout, EmptyDatagramIsOneEmptyFragment) {
  ASSERT_TRUE(fragment_span(0, 1, 0).has_value());
  EXPECT_EQ(fragment_span(0, 1, 0).value().length, 0u);
  EXPECT_EQ(fragment_span(0, 2, 0).error(), EPROTO);
}

TEST(FragmentLayout, Limits) {
  EXPECT_TRUE(fragment_layout_valid(kMaxDatagramSize, 1));
  EXPECT_TRUE(fragment_layout_valid(kMaxDatagramSize, kMaxDatagramFragments));
  EXPECT_FALSE(fragment_layout_valid(kMaxDatagramSize + 1, 1));
  EXPECT_FALSE(fragment_layout_valid(kMaxDatagramSize, kMaxDatagramFragments + 1));
  EXPECT_FALSE(fragment_layout_valid(100, 0));
  EXPECT_FALSE(fragment_layout_valid(3, 4));  // an empty fragment
  EXPECT_TRUE(fragment_layout_valid(4, 4));
  EXPECT_EQ(fragment_span(10, 3, 3).error(), EPROTO);
  EXPECT_EQ(fragment_span(10, 3, UINT32_MAX).error(), EPROTO);
  // The last fragment of the largest datagram in the most fragments ends
  // exactly at its end.
  FragmentSpan last = fragment_span(kMaxDatagramSize, kMaxDatagramFragments, kMaxDatagramFragments - 1).value();
  EXPECT_EQ(last.offset + last.length, kMaxDatagramSize);
}

// --- header layout and round trips ---------------------------------------------

TEST(DatagramHeader, LayoutMatchesTheDocument) {
  DatagramHeader h = sample_data();
  h.flags = 0;
  const Bytes want = {
      'V',  'S',  'K',  'D',  4,    1,    0,    0,     // magic, version, type DATA, flags, reserved
      0x12, 0x34, 0x56, 0x78,                          // source port, destination port
      0x9A, 0xBC, 0xDE, 0xF0,                          // datagram id
      0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // destination cookie
      0x99, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF, 0x00,  // source cookie
      0x00, 0x01, 0x00, 0x03,                          // fragment index, fragment count
      0x00, 0x0A, 0x00, 0x03,                          // total length, payload length
  };
  ASSERT_EQ(want.size(), kDatagramHeaderSize);
  Bytes out(kDatagramHeaderSize);
  encode(h, out.data());
  EXPECT_EQ(out, want);
}

TEST(DatagramHeader, EveryTypeRoundTrips) {
  DatagramHeader multicast = sample_data();
  multicast.flags = kDatagramFlagMulticast | kDatagramFlagNoLoop;
  multicast.destination_cookie = 0;
  DatagramHeader broadcast_revoke = sample_revoke();
  DatagramHeader addressed_revoke = sample_revoke();
  addressed_revoke.destination_port = 1234;
  addressed_revoke.destination_cookie = 0x10;
  for (const DatagramHeader& h :
       {sample_data(), multicast, sample_unreach(), broadcast_revoke, addressed_revoke, sample_announce()}) {
    Bytes bytes = message(h);
    core::Result<DatagramHeader> parsed = parse_datagram_header(bytes.data(), bytes.size());
    ASSERT_TRUE(parsed.has_value()) << static_cast<int>(h.type);
    EXPECT_EQ(parsed.value(), h);
    Bytes again(kDatagramHeaderSize);
    encode(parsed.value(), again.data());
    EXPECT_TRUE(std::equal(again.begin(), again.end(), bytes.begin()));
  }
}

TEST(DatagramHeader, LargestAndEmptyDatagramsRoundTrip) {
  DatagramHeader whole = sample_data();
  whole.fragment_index = 0;
  whole.fragment_count = 1;
  whole.total_length = kMaxDatagramSize;
  whole.payload_length = kMaxDatagramSize;
  DatagramHeader empty = whole;
  empty.total_length = 0;
  empty.payload_length = 0;
  DatagramHeader last = whole;  // the last of the most fragments
  last.fragment_count = kMaxDatagramFragments;
  last.fragment_index = kMaxDatagramFragments - 1;
  last.payload_length = kMaxDatagramSize / kMaxDatagramFragments;
  for (const DatagramHeader& h : {whole, empty, last}) {
    Bytes bytes = message(h);
    core::Result<DatagramHeader> parsed = parse_datagram_header(bytes.data(), bytes.size());
    ASSERT_TRUE(parsed.has_value()) << h.total_length << " " << h.fragment_count;
    EXPECT_EQ(parsed.value(), h);
  }
}

// --- rejections ---------------------------------------------------------------

TEST(DatagramHeader, RejectsShortOrMislengthedInput) {
  Bytes good = message(sample_data());
  for (size_t len = 0; len < good.size(); ++len)
    EXPECT_EQ(parse_datagram_header(good.data(), len).error(), EPROTO) << len;
  Bytes longer = good;
  longer.push_back(0);  // one byte the header does not account for
  EXPECT_EQ(parse_error(longer), EPROTO);
  EXPECT_EQ(parse_datagram_header(nullptr, good.size()).error(), EPROTO);
  EXPECT_TRUE(parse_datagram_header(good.data(), good.size()).has_value());
}

TEST(DatagramHeader, RejectsMagicVersionTypeReserved) {
  Bytes good = message(sample_data());
  for (size_t i : {0, 1, 2, 3, 4, 7}) {  // each magic byte, version, reserved
    Bytes bad = good;
    bad[i] ^= 0x01;
    EXPECT_EQ(parse_error(bad), EPROTO) << i;
  }
  for (int type : {0, 5, 0x81, 0xFF}) {
    Bytes bad = good;
    bad[5] = static_cast<uint8_t>(type);
    EXPECT_EQ(parse_error(bad), EPROTO) << type;
  }
  // Another message of the protocol is not a datagram header.
  Bytes revert(kDatagramHeaderSize);
  encode(RevertMessage{1, 2, 3}, revert.data());
  EXPECT_EQ(parse_error(revert), EPROTO);
}

TEST(DatagramHeader, RejectsUnknownFlagsAndNoLoopWithoutMulticast) {
  DatagramHeader multicast = sample_data();
  multicast.destination_cookie = 0;
  for (int bit = 2; bit < 8; ++bit) {
    DatagramHeader h = multicast;
    h.flags = static_cast<uint8_t>(kDatagramFlagMulticast | 1 << bit);
    EXPECT_EQ(parse_error(h), EPROTO) << bit;
  }
  DatagramHeader no_loop = sample_data();
  no_loop.flags = kDatagramFlagNoLoop;
  EXPECT_EQ(parse_error(no_loop), EPROTO);
}

TEST(DatagramHeader, RejectsBadFragmentLayout) {
  auto with = [](uint16_t index, uint16_t count, uint16_t total, uint16_t payload) {
    DatagramHeader h = sample_data();
    h.fragment_index = index;
    h.fragment_count = count;
    h.total_length = total;
    h.payload_length = payload;
    return h;
  };
  EXPECT_EQ(parse_error(with(0, 0, 10, 10)), EPROTO);   // count 0
  EXPECT_EQ(parse_error(with(3, 3, 10, 3)), EPROTO);    // index == count
  EXPECT_EQ(parse_error(with(9, 3, 10, 3)), EPROTO);    // index > count
  EXPECT_EQ(parse_error(with(0, kMaxDatagramFragments + 1, 60000, 117)), EPROTO);  // above the maximum
  EXPECT_EQ(parse_error(with(0, 1, kMaxDatagramSize + 1, kMaxDatagramSize + 1)), EPROTO);  // above 65,507
  EXPECT_EQ(parse_error(with(0, 4, 3, 1)), EPROTO);     // more fragments than bytes
  EXPECT_EQ(parse_error(with(0, 3, 10, 3)), EPROTO);    // fragment 0 holds 4, not 3
  EXPECT_EQ(parse_error(with(1, 3, 10, 4)), EPROTO);    // fragment 1 holds 3, not 4
  EXPECT_EQ(parse_error(with(0, 1, 10, 9)), EPROTO);    // one fragment must hold it all
  EXPECT_EQ(parse_error(with(0, 1, 0, 1)), EPROTO);     // an empty datagram has no payload
  EXPECT_TRUE(parse_datagram_header(message(with(0, 3, 10, 4)).data(), kDatagramHeaderSize + 4).has_value());

  // A payload_length consistent with the layout, but not with the bytes
  // received: a truncated or padded receive.
  Bytes bytes = message(with(0, 3, 10, 4));
  EXPECT_EQ(parse_datagram_header(bytes.data(), bytes.size() - 1).error(), EPROTO);
}

TEST(DatagramHeader, RejectsDataWithoutAddressing) {
  DatagramHeader h = sample_data();
  h.source_port = 0;
  EXPECT_EQ(parse_error(h), EPROTO);
  h = sample_data();
  h.destination_port = 0;
  EXPECT_EQ(parse_error(h), EPROTO);
  h = sample_data();
  h.source_cookie = 0;
  EXPECT_EQ(parse_error(h), EPROTO);
  h = sample_data();
  h.destination_cookie = 0;  // unicast names its socket
  EXPECT_EQ(parse_error(h), EPROTO);
  h = sample_data();
  h.flags = kDatagramFlagMulticast;  // multicast names none
  EXPECT_EQ(parse_error(h), EPROTO);
  h.destination_cookie = 0;
  EXPECT_TRUE(parse_datagram_header(message(h).data(), message(h).size()).has_value());
}

TEST(DatagramHeader, RejectsControlMessagesThatClaimPayloadOrFragments) {
  for (const DatagramHeader& control : {sample_unreach(), sample_revoke(), sample_announce()}) {
    DatagramHeader h = control;
    h.total_length = 5;
    h.payload_length = 5;
    EXPECT_EQ(parse_error(h), EPROTO);
    h = control;
    h.total_length = 5;
    h.fragment_count = 5;
    h.fragment_index = 4;
    h.payload_length = 1;
    EXPECT_EQ(parse_error(h), EPROTO);
    h = control;
    Bytes padded = message(h);
    padded.push_back(0);  // payload bytes the header does not declare
    EXPECT_EQ(parse_error(padded), EPROTO);
    h = control;
    h.flags = kDatagramFlagMulticast;
    EXPECT_EQ(parse_error(h), EPROTO);
    h = control;
    h.source_cookie = 0;
    EXPECT_EQ(parse_error(h), EPROTO);
    h = control;
    h.source_port = 0;
    EXPECT_EQ(parse_error(h), EPROTO);
  }
}

TEST(DatagramHeader, RejectsUnreachAndRevokeWithoutTheirFields) {
  DatagramHeader h = sample_unreach();
  h.destination_cookie = 0;
  EXPECT_EQ(parse_error(h), EPROTO);
  h = sample_unreach();
  h.destination_port = 0;
  EXPECT_EQ(parse_error(h), EPROTO);
  h = sample_revoke();
  h.datagram_id = 1;
  EXPECT_EQ(parse_error(h), EPROTO);
  h = sample_revoke();
  h.destination_port = 1234;  // a port without a cookie
  EXPECT_EQ(parse_error(h), EPROTO);
  h = sample_revoke();
  h.destination_cookie = 0x10;  // a cookie without a port
  EXPECT_EQ(parse_error(h), EPROTO);
}

TEST(DatagramHeader, AnnounceLayoutMatchesTheDocument) {
  const Bytes want = {
      'V',  'S',  'K',  'D',  4,    4,    0,    0,     // magic, version, type ANNOUNCE, flags, reserved
      0x9C, 0x40, 0x14, 0x51,                          // source port 40000, destination port 5201
      0,    0,    0,    0,                             // datagram id 0
      0,    0,    0,    0,    0,    0,    0,    0x10,  // destination cookie
      0,    0,    0,    0,    0,    0,    0,    0x20,  // source cookie
      0,    0,    0,    1,                             // fragment 0 of 1
      0,    0,    0,    0,                             // no datagram, no payload
  };
  Bytes out(kDatagramHeaderSize);
  encode(sample_announce(), out.data());
  EXPECT_EQ(out, want);
}

TEST(DatagramHeader, RejectsAnnounceWithoutItsFields) {
  // It names the socket it is for (the one the resolution answered with),
  // and carries no datagram id.
  DatagramHeader h = sample_announce();
  h.destination_cookie = 0;
  EXPECT_EQ(parse_error(h), EPROTO);
  h = sample_announce();
  h.destination_port = 0;
  EXPECT_EQ(parse_error(h), EPROTO);
  h = sample_announce();
  h.destination_port = 0;
  h.destination_cookie = 0;  // no "every socket" form, unlike REVOKE
  EXPECT_EQ(parse_error(h), EPROTO);
  h = sample_announce();
  h.datagram_id = 1;
  EXPECT_EQ(parse_error(h), EPROTO);
  h = sample_announce();
  h.flags = kDatagramFlagMulticast | kDatagramFlagNoLoop;  // never to a group
  EXPECT_EQ(parse_error(h), EPROTO);
  h = sample_announce();
  h.total_length = 1;  // an announcement that claims a datagram
  h.payload_length = 1;
  EXPECT_EQ(parse_error(h), EPROTO);
  EXPECT_TRUE(parse_datagram_header(message(sample_announce()).data(), kDatagramHeaderSize).has_value());
}

}  // namespace
}  // namespace vsock::sock::wire
