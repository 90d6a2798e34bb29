// SwitchReader: the receive side of the byte-exact switch (docs/protocol.md
// §2). It counts the bytes read from the kernel TCP socket and, once the
// peer's Switch(count) has arrived, knows where the TCP stream ends and the
// ring begins. For each read it plans where the bytes come from: up to two
// pieces, TCP first, then the ring — a read may straddle the boundary.
//
// The server's reader: after the client's TCP part comes its token (16
// bytes the library takes out of the stream: §2, "Who may switch"), and
// only then the ring. on_switch(count, true) says a token follows; until
// on_token() nothing is planned from the ring and the stream is not
// on_ring(); forget_switch() undoes a Switch whose token never came (it was
// forged): the stream is TCP's alone again.
//
// After a Revert from the peer (docs/protocol.md §5: it handed the
// connection to another process) the stream has a third part: TCP up to
// the Switch's count, the ring up to the Revert's count, then TCP again
// to the end. A Revert without a Switch before it means the peer never
// switched: everything is on TCP.
//
// Pure bookkeeping, no I/O: the caller performs the plan and reports what
// the kernel delivered. The peer chooses `count`, so every report is checked
// against it: a count below what was already read, a Switch after TCP ended
// short of it, or TCP bytes beyond it mean the peer is broken (EPROTO) or
// the connection is (ECONNRESET). Not thread-safe: the socket layer
// serialises reads. Depends only on core/result.hpp (fuzzed from source).
#pragma once
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

#include "core/result.hpp"

namespace vsock::sock {

// One read of `length` bytes, as pieces. Perform them in order:
//   1. recv up to tcp_length bytes from the kernel socket with tcp_flags;
//   2. only if that delivered all tcp_length bytes, read up to ring_length
//      bytes from the ring (peek if !consume). A short TCP piece ends the
//      read there: the ring's bytes come after the missing TCP ones.
// Report consumed TCP bytes with on_tcp_read() and ring bytes with
// on_ring_read() (not when peeking). After a Revert a read that reaches the
// end of the ring part ends there (a short read); the next one plans TCP.
struct ReadPlan {
  size_t tcp_length = 0;
  int tcp_flags = 0;
  size_t ring_length = 0;
  bool consume = true;  // false for MSG_PEEK: nothing may be reported as read
  // The TCP piece is promised by the peer's Switch, so a blocking kernel
  // read (or MSG_WAITALL, which tcp_flags then keeps) cannot wait for bytes
  // that will never come on TCP. Before the Switch is known that is not so:
  // the peer may switch at any moment and send the rest to the ring, so
  // tcp_flags never carries MSG_WAITALL then, and a blocking caller must
  // wait on the socket and the channel together, re-planning after each
  // piece, until the read is satisfied.
  bool tcp_bounded = false;

  size_t total() const { return tcp_length + ring_length; }
};

// What an end of file on the kernel socket means.
enum class TcpEnd : uint8_t {
  // No Switch yet: the stream may end here. (If an upgrade is under way,
  // the peer's Switch may still be in flight on the queue pair: drain the
  // channel before reporting end of stream; a Switch that arrives later
  // must then name exactly the bytes read, or on_switch() fails.)
  kEndOfStream,
  // After the Switch, with all `count` bytes read: the TCP part is
  // complete and the stream goes on in the ring; the peer closed its socket.
  kAfterSwitch,
};

class SwitchReader {
 public:
  // For a recv of `length` bytes with `flags` (MSG_PEEK, MSG_WAITALL are
  // interpreted; MSG_WAITALL is dropped from tcp_flags before the Switch,
  // other flags pass through to the kernel piece).
  ReadPlan plan(size_t length, int flags) const;

  // The kernel delivered `bytes` (consumed, not peeked). EPROTO if that
  // goes beyond the Switch's count: the peer wrote on TCP after it said it
  // had stopped. Nothing is counted then.
  core::Result<bool> on_tcp_read(uint64_t bytes);

  // The peer's Switch arrived, saying it wrote `count` bytes on TCP in all.
  // EPROTO for a second Switch or for a count below the bytes already read
  // (the peer lied; the kernel delivered them). ECONNRESET if the kernel
  // socket already reached end of file short of `count`: those bytes will
  // never come. Nothing changes on failure.
  core::Result<bool> on_switch(uint64_t count, bool token_follows = false);

  // The token after the TCP part was found and taken (the server's
  // reader). EPROTO unless one is due now (token_due()).
  core::Result<bool> on_token();
  // A Switch whose token did not come: the stream is TCP's alone, as if no
  // Switch had come. EPROTO unless a token is still pending and nothing of
  // the ring was read (nor a Revert taken).
  core::Result<bool> forget_switch();

  // The application consumed `bytes` from the ring. EPROTO after a Revert
  // if that goes beyond its count (nothing is counted then).
  core::Result<bool> on_ring_read(uint64_t bytes);

  // The peer's Revert arrived: it wrote `ring_total` bytes into the ring
  // in all and writes on TCP from now on. EPROTO for a second Revert, a
  // nonzero count without a Switch before it, or a count below the ring
  // bytes already consumed. Nothing changes on failure.
  core::Result<bool> on_revert(uint64_t ring_total);

  // The kernel recv returned 0 (end of file). ECONNRESET after the Switch
  // if fewer than `count` bytes were read: the stream is broken.
  core::Result<TcpEnd> on_tcp_eof();

  // FIONREAD / readability: the bytes one read could return now, given
  // what the kernel socket and the ring hold. TCP bytes count up to the
  // switch point; the ring's only once every TCP byte before them is
  // available (a read cannot skip a gap). Kernel bytes past the count
  // count only once a Revert has said where the ring part ends (they are
  // the peer's writes after it, and may arrive before the Revert does).
  // Before the Switch, the kernel's alone.
  core::Result<uint64_t> readable_bytes(uint64_t kernel_available, uint64_t ring_available) const;

  bool switch_known() const { return switch_known_; }
  uint64_t tcp_read() const { return tcp_read_; }
  // The peer's count; meaningful once switch_known().
  uint64_t switch_count() const { return switch_count_; }
  // TCP bytes still to come: count - read after the Switch, UINT64_MAX before.
  uint64_t tcp_remaining() const;
  // A token is still to come after the TCP part.
  bool token_pending() const { return token_pending_; }
  // The TCP part is read and the token comes next.
  bool token_due() const { return token_pending_ && tcp_read_ == switch_count_; }
  // Every read now comes from the ring.
  bool on_ring() const { return switch_known_ && !token_pending_ && tcp_read_ == switch_count_ && !tcp_again(); }
  bool tcp_ended() const { return tcp_eof_; }
  bool reverted() const { return reverted_; }
  uint64_t ring_read() const { return ring_read_; }
  // Ring bytes still to read after a Revert; UINT64_MAX before one.
  uint64_t ring_left() const { return reverted_ ? ring_total_ - ring_read_ : UINT64_MAX; }
  // After a Revert, once the TCP part and the ring part are read: every
  // read comes from TCP again, to the end of the stream.
  bool tcp_again() const {
    return reverted_ && ring_read_ == ring_total_ && (!switch_known_ || (tcp_read_ == switch_count_ && !token_pending_));
  }

 private:
  uint64_t tcp_read_ = 0;
  uint64_t switch_count_ = 0;
  uint64_t ring_read_ = 0;
  uint64_t ring_total_ = 0;  // the Revert's count
  bool switch_known_ = false;
  bool token_pending_ = false;
  bool reverted_ = false;
  bool tcp_eof_ = false;
};

}  // namespace vsock::sock
