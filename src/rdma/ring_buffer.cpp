#include "rdma/ring_buffer.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace vsock::rdma {

core::Result<ReceiveRing> ReceiveRing::create(const ProtectionDomain& pd, uint64_t capacity) {
  using R = core::Result<ReceiveRing>;
  long page = ::sysconf(_SC_PAGESIZE);
  core::Result<RingIndex> index = RingIndex::create(capacity);
  if (!index || page <= 0 || capacity % static_cast<uint64_t>(page) != 0)
    return R::fail(report_error(EINVAL, "ReceiveRing: capacity %llu is not a power-of-two number of pages",
                                static_cast<unsigned long long>(capacity)));
  // Remote write needs local write too (verbs rule); no remote read, ever.
  core::Result<MemoryRegion> memory =
      MemoryRegion::allocate(pd, capacity, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!memory) return R::fail(memory.error());
  ReceiveRing ring;
  ring.memory_ = std::move(memory.value());
  ring.index_ = index.value();
  return R::ok(std::move(ring));
}

RingDescriptor ReceiveRing::descriptor() const {
  RingDescriptor descriptor;
  descriptor.address = memory_.address();
  descriptor.rkey = memory_.rkey();
  descriptor.capacity = static_cast<uint32_t>(index_.capacity());
  return descriptor;
}

Status ReceiveRing::on_peer_write(uint64_t length) {
  Status accepted = index_.produce(length);
  if (!accepted) return Status::fail(EPROTO);
  return accepted;
}

Status ReceiveRing::take_unread_from(const ReceiveRing& old) {
  core::Result<RingIndex> index = old.index_.resized(index_.capacity());
  if (!index) return Status::fail(index.error());
  // Position by position: the two rings wrap at different places.
  const RingIndex& from = old.index_;
  const RingIndex& to = index.value();
  for (uint64_t position = from.head(); position != from.tail();) {
    const uint64_t in = from.offset_of(position);
    const uint64_t out = to.offset_of(position);
    const uint64_t piece =
        std::min({from.tail() - position, from.capacity() - in, to.capacity() - out});
    std::memcpy(memory_.data() + out, old.memory_.data() + in, piece);
    position += piece;
  }
  index_ = index.value();
  return ok_status();
}

size_t ReceiveRing::read(void* out, size_t max) {
  uint64_t length = index_.used() < max ? index_.used() : max;
  if (length == 0) return 0;
  RingSpans spans = index_.readable(length).value();  // length <= used: cannot fail
  auto* dst = static_cast<uint8_t*>(out);
  std::memcpy(dst, memory_.data() + spans.first.offset, spans.first.length);
  if (spans.second.length != 0) std::memcpy(dst + spans.first.length, memory_.data(), spans.second.length);
  index_.consume(length);
  return static_cast<size_t>(length);
}

}  // namespace vsock::rdma
