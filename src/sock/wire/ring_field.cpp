#include "sock/wire/ring_field.hpp"

#include <cerrno>

#include "sock/wire/byte_order.hpp"

namespace vsock::sock::wire {

void encode_ring(const rdma::RingDescriptor& ring, uint8_t* out) {
  store_be64(out, ring.address);
  store_be32(out + 8, ring.rkey);
  store_be32(out + 12, ring.capacity);
}

core::Result<rdma::RingDescriptor> parse_ring(const uint8_t* in) {
  using R = core::Result<rdma::RingDescriptor>;
  rdma::RingDescriptor ring;
  ring.address = load_be64(in);
  ring.rkey = load_be32(in + 8);
  ring.capacity = load_be32(in + 12);
  // Call it rather than restate its rules: the parser and the sender can
  // then never disagree on what a valid ring is.
  if (!rdma::RemoteRing::create(ring)) return R::fail(EPROTO);
  return R::ok(ring);
}

bool same_ring(const rdma::RingDescriptor& a, const rdma::RingDescriptor& b) {
  return a.address == b.address && a.rkey == b.rkey && a.capacity == b.capacity;
}

}  // namespace vsock::sock::wire
