// Fuzz target: parse_datagram_header (src/sock/wire/datagram_header.hpp),
// the first thing every UD message a peer sends goes through.
//
// Invariants: a rejection is always EPROTO; an accepted input is exactly
// the 40-byte header plus the payload_length it declares (one byte less is
// refused), and its header bytes are exactly what encode() writes for the
// parsed header (one wire form); the fragment's span lies inside the
// declared datagram and is as long as the payload; DATA names its sockets
// (a destination cookie exactly when unicast), control messages carry no
// payload, flags or fragments, UNREACH and ANNOUNCE name their socket,
// REVOKE and ANNOUNCE carry no datagram id; no other message of the
// protocol parses.
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "fuzz_check.hpp"
#include "sock/wire/datagram_header.hpp"
#include "sock/wire/fragment_layout.hpp"
#include "sock/wire/revert_message.hpp"
#include "sock/wire/switch_message.hpp"

using namespace vsock::sock::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vsock::core::Result<DatagramHeader> parsed = parse_datagram_header(data, size);
  if (!parsed) {
    FUZZ_CHECK(parsed.error() == EPROTO);
    return 0;
  }
  const DatagramHeader& h = parsed.value();
  FUZZ_CHECK(size == kDatagramHeaderSize + h.payload_length);
  FUZZ_CHECK(!parse_datagram_header(data, size - 1).has_value());

  uint8_t out[kDatagramHeaderSize];
  encode(h, out);
  FUZZ_CHECK(std::memcmp(out, data, kDatagramHeaderSize) == 0);

  vsock::core::Result<FragmentSpan> span = fragment_span(h.total_length, h.fragment_count, h.fragment_index);
  FUZZ_CHECK(span.has_value());
  FUZZ_CHECK(span.value().length == h.payload_length);
  FUZZ_CHECK(span.value().offset + span.value().length <= h.total_length);
  FUZZ_CHECK(h.total_length <= kMaxDatagramSize && h.fragment_count <= kMaxDatagramFragments);
  FUZZ_CHECK((h.flags & ~kDatagramKnownFlags) == 0);
  FUZZ_CHECK(h.source_cookie != 0 && h.source_port != 0);

  if (h.type == DatagramType::kData) {
    const bool multicast = h.flags & kDatagramFlagMulticast;
    FUZZ_CHECK(multicast == (h.destination_cookie == 0));
    FUZZ_CHECK(multicast || !(h.flags & kDatagramFlagNoLoop));
    FUZZ_CHECK(h.destination_port != 0);
  } else {
    FUZZ_CHECK(h.type == DatagramType::kUnreach || h.type == DatagramType::kRevoke ||
               h.type == DatagramType::kAnnounce);
    FUZZ_CHECK(h.flags == 0 && h.payload_length == 0 && h.total_length == 0);
    FUZZ_CHECK(h.fragment_count == 1 && h.fragment_index == 0);
    if (h.type != DatagramType::kRevoke) FUZZ_CHECK(h.destination_port != 0 && h.destination_cookie != 0);
    if (h.type != DatagramType::kUnreach) FUZZ_CHECK(h.datagram_id == 0);
  }

  FUZZ_CHECK(!parse_revert_message(data, size).has_value());
  FUZZ_CHECK(!parse_switch_message(data, size).has_value());
  return 0;
}
