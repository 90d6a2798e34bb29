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
  queue_.push_back(std::move(datagram));
  return true;
}

size_t ReceiveQueue::take(msghdr& msg, int flags) {
  ReceivedDatagram& front = queue_.front();
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
    queue_.pop_front();
  }
  return (flags & MSG_TRUNC) ? length : copied;
}

void ReceiveQueue::clear() {
  queue_.clear();
  charged_ = 0;
}

}  // namespace vsock::sock::dgram
