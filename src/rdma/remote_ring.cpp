#include "rdma/remote_ring.hpp"

#include <cerrno>

namespace vsock::rdma {

core::Result<RemoteRing> RemoteRing::create(const RingDescriptor& peer) {
  using R = core::Result<RemoteRing>;
  core::Result<RingIndex> index = RingIndex::create(peer.capacity);
  if (!index) return R::fail(EPROTO);
  if (peer.address > UINT64_MAX - peer.capacity) return R::fail(EPROTO);
  RemoteRing ring;
  ring.base_ = peer.address;
  ring.rkey_ = peer.rkey;
  ring.index_ = index.value();
  return R::ok(ring);
}

core::Result<RemoteRing> RemoteRing::moved_to(const RingDescriptor& bigger) const {
  using R = core::Result<RemoteRing>;
  if (bigger.capacity <= index_.capacity()) return R::fail(EPROTO);
  core::Result<RemoteRing> ring = create(bigger);
  if (!ring) return ring;
  core::Result<RingIndex> index = index_.resized(bigger.capacity);
  if (!index) return R::fail(EPROTO);
  ring.value().index_ = index.value();
  return ring;
}

core::Result<RemoteWrite> RemoteRing::plan(uint64_t length) const {
  core::Result<RingSpans> spans = index_.writable(length);
  if (!spans) return core::Result<RemoteWrite>::fail(spans.error());
  RemoteWrite write;
  write.first = {base_ + spans.value().first.offset, spans.value().first.length};
  write.second = {base_ + spans.value().second.offset, spans.value().second.length};
  return core::Result<RemoteWrite>::ok(write);
}

Status RemoteRing::commit(uint64_t length) { return index_.produce(length); }

Status RemoteRing::on_credit(uint64_t length) {
  Status consumed = index_.consume(length);
  if (!consumed) return Status::fail(EPROTO);
  return consumed;
}

}  // namespace vsock::rdma
