// libFuzzer target: SwitchReader (src/sock/stream/switch_reader.cpp), which takes
// the peer's Switch count (docs/protocol.md §2), its Revert count (§5),
// the kernel's deliveries and the ring's.
//
// Input: records of 9 bytes: an operation byte and a 64-bit operand (the
// Switch count, a delivery size, a read length, or the kernel's and the
// ring's available bytes, as the peer could make them). Invariants (trap):
//   - once the Switch is known, the bytes read from TCP never exceed its
//     count, and a refused report (EPROTO/ECONNRESET) changes nothing;
//   - the count is accepted only if it is the first, at least what was
//     read, and exactly what was read after an end of file;
//   - a plan's pieces add up to the read; its TCP piece never reaches past
//     the count; a ring piece exists only after the Switch, right at it;
//     MSG_WAITALL reaches the kernel only when the Switch bounds the piece;
//   - readable_bytes never counts ring bytes behind a TCP gap, nor kernel
//     bytes past the count before a Revert says where the ring part ends;
//   - a Revert is accepted once, only with a count at least the ring bytes
//     read (0 without a Switch); ring reads never pass it; after the ring
//     part every read plans TCP only;
//   - the server's token (a Switch with token_follows): no ring piece and
//     no on_ring() while it is pending, nor readable bytes past the count;
//     on_token() only right at the count; forget_switch() only while it is
//     pending and nothing of the ring was read, and then all is TCP's.
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fuzz_check.hpp"
#include "sock/stream/switch_reader.hpp"

using vsock::sock::ReadPlan;
using vsock::sock::SwitchReader;
using vsock::sock::TcpEnd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SwitchReader reader;
  for (size_t at = 0; at + 9 <= size; at += 9) {
    const uint8_t op = data[at];
    uint64_t operand;
    std::memcpy(&operand, data + at + 1, 8);
    // Small operands are where the interesting boundaries are; keep them
    // likely while still trying huge ones.
    if (op & 0x80) operand &= 0xff;
    const SwitchReader before = reader;
    switch (op % 9) {
      case 0: {  // the peer's Switch (the server's reader: a token follows)
        const bool token = (op & 0x40) != 0;
        vsock::core::Result<bool> r = reader.on_switch(operand, token);
        const bool legal = !before.switch_known() && operand >= before.tcp_read() &&
                           (!before.tcp_ended() || operand == before.tcp_read());
        FUZZ_CHECK(r.has_value() == legal);
        if (legal) {
          FUZZ_CHECK(reader.switch_known() && reader.switch_count() == operand && reader.token_pending() == token);
        } else {
          FUZZ_CHECK(r.error() == EPROTO || r.error() == ECONNRESET);
          FUZZ_CHECK(reader.switch_known() == before.switch_known() &&
                     reader.switch_count() == before.switch_count());
        }
        break;
      }
      case 1: {  // the kernel delivered bytes
        vsock::core::Result<bool> r = reader.on_tcp_read(operand);
        if (before.switch_known() && before.tcp_again()) {
          FUZZ_CHECK(r.has_value() && reader.tcp_read() == before.tcp_read());
        } else if (before.switch_known()) {
          FUZZ_CHECK(r.has_value() == (operand <= before.switch_count() - before.tcp_read()));
        } else {
          FUZZ_CHECK(r.has_value());
        }
        if (!r) FUZZ_CHECK(r.error() == EPROTO && reader.tcp_read() == before.tcp_read());
        break;
      }
      case 2: {  // end of file
        vsock::core::Result<TcpEnd> r = reader.on_tcp_eof();
        const bool short_of_count =
            before.switch_known() && (before.tcp_read() < before.switch_count() || before.token_pending());
        FUZZ_CHECK(r.has_value() == !short_of_count);
        if (r)
          FUZZ_CHECK(r.value() == (before.switch_known() && !before.tcp_again() ? TcpEnd::kAfterSwitch
                                                                                 : TcpEnd::kEndOfStream));
        else FUZZ_CHECK(r.error() == ECONNRESET && reader.tcp_ended() == before.tcp_ended());
        break;
      }
      case 3: {  // plan a read
        const int flags = (operand & 1 ? MSG_PEEK : 0) | (operand & 2 ? MSG_WAITALL : 0);
        const size_t length = static_cast<size_t>(operand >> 2);
        const ReadPlan plan = reader.plan(length, flags);
        FUZZ_CHECK(plan.total() >= plan.tcp_length && plan.total() <= length);
        FUZZ_CHECK(plan.total() == length || (reader.reverted() && plan.ring_length == reader.ring_left()) ||
                   reader.token_pending());
        if (reader.token_pending()) FUZZ_CHECK(plan.ring_length == 0);
        FUZZ_CHECK(plan.consume == !(flags & MSG_PEEK));
        FUZZ_CHECK((plan.tcp_flags & MSG_PEEK) == (flags & MSG_PEEK));
        FUZZ_CHECK(plan.tcp_bounded == (reader.switch_known() || reader.reverted()));
        if (reader.tcp_again()) {
          FUZZ_CHECK(plan.ring_length == 0 && plan.tcp_length == length && plan.tcp_flags == flags);
        } else if (!reader.switch_known()) {
          FUZZ_CHECK(plan.ring_length == 0 && (plan.tcp_flags & MSG_WAITALL) == 0);
        } else {
          FUZZ_CHECK(plan.tcp_length <= reader.switch_count() - reader.tcp_read());
          if (plan.ring_length > 0) FUZZ_CHECK(reader.tcp_read() + plan.tcp_length == reader.switch_count());
        }
        break;
      }
      case 4: {  // FIONREAD: operand halves are the kernel's and the ring's bytes
        const uint64_t kernel = operand >> 32, ring = operand & 0xffffffff;
        vsock::core::Result<uint64_t> r = reader.readable_bytes(kernel, ring);
        FUZZ_CHECK(r.has_value());
        if (!reader.switch_known() || reader.tcp_again()) {
          FUZZ_CHECK(r.value() == kernel);
        } else {
          const uint64_t remaining = reader.switch_count() - reader.tcp_read();
          if (kernel < remaining) {
            FUZZ_CHECK(r.value() == kernel);
          } else if (reader.token_pending()) {
            FUZZ_CHECK(r.value() == remaining);
          } else if (!reader.reverted()) {
            FUZZ_CHECK(r.value() == remaining + ring || r.value() == UINT64_MAX);
          } else {
            const uint64_t part = ring < reader.ring_left() ? ring : reader.ring_left();
            FUZZ_CHECK(r.value() >= remaining + part || r.value() == UINT64_MAX);
            if (part < reader.ring_left()) FUZZ_CHECK(r.value() == remaining + part);
          }
        }
        break;
      }
      case 5: {  // the peer's Revert
        vsock::core::Result<bool> r = reader.on_revert(operand);
        const bool legal = !before.reverted() && operand >= before.ring_read() &&
                           (before.switch_known() || operand == 0);
        FUZZ_CHECK(r.has_value() == legal);
        FUZZ_CHECK(reader.reverted() == (legal || before.reverted()));
        if (!legal) FUZZ_CHECK(r.error() == EPROTO && reader.ring_left() == before.ring_left());
        break;
      }
      case 6: {  // the token was found at the count
        vsock::core::Result<bool> r = reader.on_token();
        FUZZ_CHECK(r.has_value() == before.token_due());
        FUZZ_CHECK(!reader.token_pending() || !r);
        break;
      }
      case 7: {  // the Switch's token did not come
        vsock::core::Result<bool> r = reader.forget_switch();
        const bool legal = before.token_pending() && before.ring_read() == 0 && !before.reverted();
        FUZZ_CHECK(r.has_value() == legal);
        if (legal) FUZZ_CHECK(!reader.switch_known() && !reader.token_pending() && reader.tcp_read() == before.tcp_read());
        else FUZZ_CHECK(reader.switch_known() == before.switch_known());
        break;
      }
      default: {  // the application consumed ring bytes
        vsock::core::Result<bool> r = reader.on_ring_read(operand);
        FUZZ_CHECK(r.has_value() == (!before.reverted() || operand <= before.ring_left()));
        if (!r) FUZZ_CHECK(r.error() == EPROTO && reader.ring_read() == before.ring_read());
        break;
      }
    }
    if (reader.switch_known()) FUZZ_CHECK(reader.tcp_read() <= reader.switch_count());
    if (reader.reverted()) FUZZ_CHECK(reader.ring_left() <= UINT64_MAX - reader.ring_read());
    FUZZ_CHECK(reader.on_ring() == (reader.switch_known() && !reader.token_pending() &&
                                    reader.tcp_read() == reader.switch_count() && !reader.tcp_again()));
  }
  return 0;
}
