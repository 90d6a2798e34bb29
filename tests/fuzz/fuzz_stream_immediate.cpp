// libFuzzer target: the stream immediates a peer sends (docs/protocol.md §3)
// and the receive-side bookkeeping they drive.
//
// Input: byte 0 picks the ring capacity (2^0 .. 2^29); then records of
// 5 bytes: 4 bytes of immediate exactly as they come off the wire, 1 byte
// saying how much of the ring the application consumes afterwards. Each
// immediate goes through parse_immediate() and, if accepted, is applied the
// way StreamChannel applies it (DATA to the receive ring, CREDIT to the
// writer's view of the peer's ring, the credit-return policy alongside).
// Invariants (trap on violation):
//   - a parsed immediate has a type 0..2 and a value in range, and encodes
//     back to the same word;
//   - DATA (the position its write ends at, version 3) is accepted exactly
//     when the distance from the ring's tail is not zero and fits the
//     writer's possible credit (the ring minus its contents minus
//     consumed-but-unreported bytes), which is never more than the ring's
//     free space; the ring never holds more than its capacity and every
//     readable span lies inside it;
//   - a CREDIT (the position the reader consumed to) is accepted exactly
//     when the distance from the writer's head is not zero and does not
//     exceed what is in flight;
//   - the credit policy never returns more than was consumed, never more
//     than one immediate carries, and never leaves a writer without credit
//     while consumed bytes are unreported.
//
// Sources: src/sock/stream/stream_immediate.cpp src/sock/stream/stream_credit.cpp
//          src/rdma/ring_index.cpp (all pure; include path: src/)
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "rdma/ring_index.hpp"
#include "sock/stream/stream_credit.hpp"
#include "sock/stream/stream_immediate.hpp"

namespace {

using vsock::rdma::RingIndex;
using vsock::rdma::RingSpans;
using vsock::sock::CreditReturn;
using vsock::sock::Immediate;
using vsock::sock::ImmediateType;
using vsock::sock::kImmediateValueMax;

void check(bool condition) {
  if (!condition) __builtin_trap();
}

void check_spans_inside(const RingIndex& ring, const RingSpans& spans) {
  check(spans.first.length == 0 || ring.contains(spans.first.offset, spans.first.length));
  check(spans.second.length == 0 || (spans.second.offset == 0 && ring.contains(0, spans.second.length)));
  check(spans.total() == ring.used());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint64_t capacity = uint64_t{1} << (data[0] % 30);
  vsock::core::Result<RingIndex> made_ring = RingIndex::create(capacity);
  vsock::core::Result<RingIndex> made_remote = RingIndex::create(capacity);
  check(made_ring.has_value() && made_remote.has_value());
  RingIndex ring = made_ring.value();      // our receive ring: the peer's DATA goes here
  RingIndex remote = made_remote.value();  // the peer's ring as our writer sees it
  CreditReturn credit(capacity);
  // Our writer has written this much into the peer's ring (so CREDIT up to
  // it is legal): derived from the input too, so both outcomes happen.
  remote.produce(capacity / 2);
  uint64_t consumed_total = 0, returned_total = 0;

  for (size_t at = 1; at + 5 <= size; at += 5) {
    uint32_t wire;
    std::memcpy(&wire, data + at, 4);
    const uint8_t consume_hint = data[at + 4];
    const uint32_t word = vsock::sock::immediate_from_wire(wire);
    check(vsock::sock::immediate_to_wire(word) == wire);

    vsock::core::Result<Immediate> parsed = vsock::sock::parse_immediate(word);
    if (parsed.has_value()) {
      const Immediate imm = parsed.value();
      check(static_cast<uint32_t>(imm.type) <= 2);
      check(imm.value <= kImmediateValueMax);
      vsock::core::Result<uint32_t> again = vsock::sock::encode_immediate(imm);
      check(again.has_value() && again.value() == word);
      if (imm.type == ImmediateType::kData) {
        const uint64_t length = vsock::sock::distance_to(ring.tail(), imm.value);
        check(length <= kImmediateValueMax);
        const bool fits = length != 0 && length + ring.used() + credit.unreported() <= capacity;
        check(length == 0 || credit.accepts_write(ring.used(), length) == fits);
        check(!fits || length <= ring.space());
        const uint64_t before = ring.used();
        if (fits) {  // as StreamChannel: credit check first, then the ring
          check(ring.produce(length).has_value());
          credit.on_peer_wrote(ring.used());
        }
        check(ring.used() == (fits ? before + length : before));
      } else if (imm.type == ImmediateType::kCredit) {
        const uint64_t returned = vsock::sock::distance_to(remote.head(), imm.value);
        if (returned != 0) {  // as StreamChannel: no distance is refused before the ring is asked
          const bool legal = returned <= remote.used();
          check(remote.consume(returned).has_value() == legal);
        }
      } else {
        check(imm.value >= 1 && imm.value <= 3);  // FIN, RESET, CLOSED
      }
    } else {
      const uint32_t type = word >> 30, value = word & kImmediateValueMax;
      // Refused only for what §3 forbids.
      check(type == 3 || (type == 2 && (value == 0 || value > 3)));
    }
    check(ring.used() <= ring.capacity());
    check_spans_inside(ring, ring.readable_all());

    // The application reads some of the ring; credit goes back per policy.
    uint64_t take = ring.used() == 0 ? 0 : (consume_hint * (ring.used() + 1)) / 256;
    if (take > ring.used()) take = ring.used();
    vsock::core::Result<RingSpans> spans = ring.readable(take);
    check(spans.has_value() && spans.value().total() == take);
    check(ring.consume(take).has_value());
    credit.on_consumed(take);
    consumed_total += take;
    const uint64_t due = credit.due();
    check(due <= credit.unreported() && due <= kImmediateValueMax);
    if (due != 0) {
      credit.on_returned(due);
      returned_total += due;
    }
    check(returned_total + credit.unreported() == consumed_total);
    check(credit.returned() == returned_total);
    // The writer's credit as we know it: capacity - in ring - unreported.
    // If it is exhausted and anything is unreported, the credit must be due.
    if (ring.used() + credit.unreported() >= capacity && credit.unreported() > 0) check(credit.due() != 0);
  }
  return 0;
}
