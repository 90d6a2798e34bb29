// ReceiveQueue: one datagram socket's queue of datagrams that came over UD
// (DESIGN decision 5), and what recvmsg() does with them: the kernel's
// UDP semantics for one datagram per call.
//
// Budget: as the kernel's UDP receive path, a datagram is queued while
// what is already queued is at most the budget (the socket's SO_RCVBUF), so
// one datagram may always pass an empty queue, however large; else it is
// dropped and counted (SO_RXQ_OVFL reports that count). Each datagram is
// charged its bytes plus kOverheadBytes, as the kernel charges a buffer's
// truesize, so that a flood of empty datagrams is bounded too.
//
// take(): copies the front datagram into the caller's iovecs. A datagram
// longer than them is truncated: the rest is lost, msg_flags gets
// MSG_TRUNC, and the call returns the copied length — or the datagram's
// real length when the caller passed MSG_TRUNC. MSG_PEEK leaves it queued.
// The source address goes to msg_name (truncated to msg_namelen, which is
// set to the full length, as the kernel does); without msg_name,
// msg_namelen is left alone.
//
// Not thread-safe: the owning socket serialises calls.
#pragma once
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sock/dgram/receive_controls.hpp"

namespace vsock::sock::dgram {

struct ReceivedDatagram {
  sockaddr_storage source{};
  socklen_t source_length = 0;
  std::vector<uint8_t> bytes;
  ArrivalFacts arrival;      // for the control messages a receiver asks for
  uint32_t drops_before = 0; // the queue's drops when it was queued (SO_RXQ_OVFL)
};

class ReceiveQueue {
 public:
  static constexpr size_t kOverheadBytes = 256;

  explicit ReceiveQueue(size_t budget_bytes) : budget_(budget_bytes) {}

  void set_budget(size_t budget_bytes) { budget_ = budget_bytes; }
  size_t budget() const { return budget_; }
  // Queues `datagram` if the budget allows (noting the drops so far in
  // it); false (and counted) if not.
  bool push(ReceivedDatagram&& datagram);
  bool empty() const { return count_ == 0; }
  size_t count() const { return count_; }
  // The front datagram's length (FIONREAD); 0 when empty.
  size_t next_length() const { return empty() ? 0 : front().bytes.size(); }
  // Bytes charged against the budget now.
  size_t charged() const { return charged_; }
  // Datagrams dropped because the budget was full, since creation.
  uint64_t drops() const { return drops_; }
  // recvmsg() of the front datagram into msg (see above); the queue must
  // not be empty. Honours MSG_PEEK and MSG_TRUNC in `flags`. Control data
  // is the caller's: msg_controllen is left as it is.
  size_t take(msghdr& msg, int flags);
  // The front datagram (the queue must not be empty): what take() will
  // answer, for the control messages written beside it.
  const ReceivedDatagram& front() const { return ring_[head_]; }
  // Drops everything queued (the socket is closing or goes to the kernel).
  void clear();

 private:
  static size_t charge_of(const ReceivedDatagram& datagram) { return datagram.bytes.size() + kOverheadBytes; }

  // A ring that grows by doubling and never shrinks below its high-water
  // mark: a queue that fills and empties by one (a ping-pong) allocates
  // no node per datagram, as a deque of these large entries did.
  std::vector<ReceivedDatagram> ring_;
  size_t head_ = 0;
  size_t count_ = 0;
  size_t budget_ = 0;
  size_t charged_ = 0;
  uint64_t drops_ = 0;
};

}  // namespace vsock::sock::dgram
