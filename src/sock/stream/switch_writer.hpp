// SwitchWriter: the send side of the byte-exact switch (docs/protocol.md
// §2). It counts the bytes the kernel accepted on the TCP socket; at a
// moment the caller chooses (once it knows the peer's ring), it switches and
// hands out the count to put into the Switch message. From then on TCP
// writes are refused: the caller routes every byte to the StreamChannel.
//
// Counted is what send() returned, i.e. what the kernel took into its send
// buffer, sent or not: the peer will read exactly those bytes from TCP.
// After a revert (docs/protocol.md §5: ours, when the connection is handed
// to another process, or the peer's) TCP is the only path again, for good.
//
// Pure bookkeeping, not thread-safe (the socket layer serialises writes;
// it must not switch while a TCP send is in progress on another thread).
#pragma once
#include <cstdint>

#include "core/result.hpp"

namespace vsock::sock {

class SwitchWriter {
 public:
  // The kernel accepted `bytes` on TCP. EPIPE once switched (until a revert): a byte on TCP
  // after the Switch's count would be read as garbage by nobody — the peer
  // stops reading TCP at the count — so it is the caller's bug, refused.
  core::Result<bool> on_tcp_written(uint64_t bytes);

  // Stop writing on TCP now; the count for the Switch message. EALREADY
  // if switched before (the count was handed out once; a second Switch is
  // a protocol error at the peer).
  // ECANCELED after a revert: the connection stays on TCP.
  core::Result<uint64_t> switch_now();

  // Writes go to TCP again from now on, switched or not. EALREADY the
  // second time.
  core::Result<bool> revert();

  // Whether a write may go to the kernel socket.
  bool tcp_allowed() const { return !switched_ || reverted_; }
  bool switched() const { return switched_; }
  bool reverted() const { return reverted_; }
  uint64_t tcp_written() const { return tcp_written_; }

 private:
  uint64_t tcp_written_ = 0;
  bool switched_ = false;
  bool reverted_ = false;
};

}  // namespace vsock::sock
