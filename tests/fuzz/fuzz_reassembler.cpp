// libFuzzer target: Reassembler (src/sock/dgram/reassembler.cpp), which
// holds the fragments peers send until their datagrams are whole.
//
// Input: 3 bytes of limits (byte budget in units of 64, datagrams in
// progress 0-8, age in ms), then records; the first byte picks:
//   0: a fragment, 6 more bytes: the key (sender, cookie and id from one
//      byte), the total length (2 bytes: mostly below 4096, or any 16-bit
//      value), the count, the index (scaled to 0..count, so also one past
//      the end) and the length (mostly the span's, or a raw byte). Its
//      payload is a function of (key, total, offset), so a datagram put
//      together from the wrong bytes shows;
//   1: time passes; 2: expire(); 3: time goes back (now_ms decreases).
// Invariants (trap):
//   - held bytes never exceed the budget, datagrams in progress never the
//     maximum; nothing held means no bytes held;
//   - a fragment is refused as a bad layout exactly when the protocol's
//     layout refuses it; each verdict bumps exactly its counter;
//   - a complete datagram has its declared length and exactly the bytes
//     its fragments carried; each key completes at most once per `count`
//     fragments it had held since its last completion (never more
//     datagrams out than were completed).
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "fuzz_check.hpp"
#include "sock/dgram/reassembler.hpp"
#include "sock/wire/fragment_layout.hpp"

using vsock::sock::dgram::DatagramKey;
using vsock::sock::dgram::FragmentFields;
using vsock::sock::dgram::FragmentVerdict;
using vsock::sock::dgram::Reassembler;
using vsock::sock::dgram::ReassemblyCounters;
using vsock::sock::dgram::ReassemblyLimits;

namespace {

uint8_t content(uint8_t key_byte, uint32_t total, uint32_t offset) {
  return static_cast<uint8_t>(key_byte * 29 + total * 7 + offset * 13 + (offset >> 8));
}

uint64_t drops(const ReassemblyCounters& c) { return c.bad_layout + c.duplicates + c.mismatched + c.too_large; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  ReassemblyLimits limits;
  limits.byte_budget = size_t{data[0]} * 64;
  limits.max_datagrams = data[1] % 9;
  limits.max_age_ms = data[2];
  Reassembler reassembler(limits);
  uint64_t now = 1000;
  uint64_t completed = 0;
  std::map<uint8_t, uint64_t> held_since_completion;  // per key byte
  static std::vector<uint8_t> payload(vsock::sock::wire::kMaxDatagramSize);  // once, not per input
  std::vector<uint8_t> out;

  size_t at = 3;
  while (at < size) {
    const uint8_t op = data[at++] % 4;
    if (op == 0) {
      if (at + 6 > size) break;
      const uint8_t k = data[at];
      const uint16_t raw_total = static_cast<uint16_t>(data[at + 1] << 8 | data[at + 2]);
      const uint32_t total = data[at + 1] & 0x80 ? raw_total : raw_total % 4096;
      const uint8_t c = data[at + 3];
      const uint32_t count = c & 0x80 ? (c & 0x7F) * 8u : c;  // up to 1016: past the maximum
      const uint32_t index = (data[at + 4] * (count + 1)) >> 8;
      const uint8_t length_byte = data[at + 5];
      at += 6;

      DatagramKey key;
      key.source = k & 3;
      key.source_cookie = 1 + (k >> 2 & 3);
      key.datagram_id = k >> 4;
      FragmentFields fields;
      fields.total_length = total;
      fields.count = count;
      fields.index = index;
      vsock::core::Result<vsock::sock::wire::FragmentSpan> span =
          vsock::sock::wire::fragment_span(total, count, index);
      size_t length = length_byte;
      uint32_t offset = 0;
      if (span && length_byte % 4 != 0) length = span.value().length;
      if (span) offset = span.value().offset;
      for (size_t i = 0; i < length; ++i) payload[i] = content(k, total, offset + static_cast<uint32_t>(i));
      const bool layout_ok = span && span.value().length == length;

      const ReassemblyCounters before = reassembler.counters();
      out.clear();
      const FragmentVerdict verdict = reassembler.add(key, fields, payload.data(), length, now, &out);
      const ReassemblyCounters& after = reassembler.counters();
      FUZZ_CHECK((verdict == FragmentVerdict::kBadLayout) == !layout_ok);
      switch (verdict) {
        case FragmentVerdict::kComplete: {
          FUZZ_CHECK(after.completed == before.completed + 1 && drops(after) == drops(before));
          FUZZ_CHECK(out.size() == total);
          for (uint32_t o = 0; o < total; ++o) FUZZ_CHECK(out[o] == content(k, total, o));
          FUZZ_CHECK(held_since_completion[k] + 1 >= count);
          held_since_completion[k] = 0;
          ++completed;
          break;
        }
        case FragmentVerdict::kHeld:
          FUZZ_CHECK(after.completed == before.completed && drops(after) == drops(before));
          FUZZ_CHECK(out.empty() && count > 1);
          ++held_since_completion[k];
          break;
        case FragmentVerdict::kBadLayout:
          FUZZ_CHECK(after.bad_layout == before.bad_layout + 1 && drops(after) == drops(before) + 1);
          break;
        case FragmentVerdict::kDuplicate:
          FUZZ_CHECK(after.duplicates == before.duplicates + 1 && drops(after) == drops(before) + 1);
          break;
        case FragmentVerdict::kMismatch:
          FUZZ_CHECK(after.mismatched == before.mismatched + 1 && drops(after) == drops(before) + 1);
          break;
        case FragmentVerdict::kTooLarge:
          FUZZ_CHECK(after.too_large == before.too_large + 1 && drops(after) == drops(before) + 1);
          FUZZ_CHECK(total > limits.byte_budget || limits.max_datagrams == 0);
          break;
      }
      if (verdict != FragmentVerdict::kComplete) FUZZ_CHECK(out.empty());
    } else if (op == 1) {
      if (at >= size) break;
      now += data[at++];
    } else if (op == 2) {
      const uint64_t timed_out = reassembler.counters().timed_out;
      const size_t dropped = reassembler.expire(now);
      FUZZ_CHECK(reassembler.counters().timed_out == timed_out + dropped);
    } else {
      if (at >= size) break;
      const uint64_t back = data[at++] % 64;
      now = now > back ? now - back : 0;
    }
    FUZZ_CHECK(reassembler.held_bytes() <= limits.byte_budget);
    FUZZ_CHECK(reassembler.in_progress() <= limits.max_datagrams);
    FUZZ_CHECK(reassembler.in_progress() != 0 || reassembler.held_bytes() == 0);
    FUZZ_CHECK(reassembler.counters().completed == completed);
  }
  return 0;
}
