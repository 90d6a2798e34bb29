#include "sock/dgram/receive_queue.hpp"

#include <cstring>

namespace vsock::sock::dgram {

bool ReceiveQueue::push(ReceivedDatagram&& datagram) {
  if (charged_ > budget_) {
    ++drops_;
    return false;
  }
  charged_ += charge_of(datagram);
  datagram.drops_before = static_cast<uint32_t>(drops_);
  if (count_ == ring_.size()) {
    std::vector<ReceivedDatagram> bigger(ring_.empty() ? 8 : ring_.size() * 2);
    for (size_t i = 0; i < count_; ++i) bigger[i] = std::move(ring_[(head_ + i) % ring_.size()]);
    ring_.swap(bigger);
    head_ = 0;
  }
  ring_[(head_ + count_) % ring_.size()] = std::move(datagram);
  ++count_;
  return true;
}

size_t ReceiveQueue::take(msghdr& msg, int flags) {
  ReceivedDatagram& front = ring_[head_];
  const size_t length = front.bytes.size();
  size_t copied = 0;
  for (size_t i = 0; i < msg.msg_iovlen && copied < length; ++i) {
    size_t piece = msg.msg_iov[i].iov_len;
    if (piece > length - copied) piece = length - copied;
    if (piece > 0) std::memcpy(msg.msg_iov[i].iov_base, front.bytes.data() + copied, piece);
    copied += piece;
  }
  msg.msg_flags = copied < length ? MSG_TRUNC : 0;
  // As the kernel: without msg_name, msg_namelen is left alone.
  if (msg.msg_name != nullptr) {
    socklen_t room = msg.msg_namelen < front.source_length ? msg.msg_namelen : front.source_length;
    std::memcpy(msg.msg_name, &front.source, room);
    msg.msg_namelen = front.source_length;
  }
  if (!(flags & MSG_PEEK)) {
    charged_ -= charge_of(front);
    std::vector<uint8_t>().swap(front.bytes);  // its memory goes now, not when the slot is reused
    head_ = (head_ + 1) % ring_.size();
    --count_;
  }
  return (flags & MSG_TRUNC) ? length : copied;
}

void ReceiveQueue::clear() {
  std::vector<ReceivedDatagram>().swap(ring_);
  head_ = 0;
  count_ = 0;
  charged_ = 0;
}

}  // namespace vsock::sock::dgram
