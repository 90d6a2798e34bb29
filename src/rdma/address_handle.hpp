// AddressHandle: where a UD send goes (ibv_ah). Move-only; destroyed on
// destruction, which the owner orders after every send that uses it has
// completed.
//
// Two ways to get one: from attributes (those a SIDR reply carries, see
// CmUdpResolver, or built by hand), or from a received datagram's
// completion and GRH slot (the reverse path: a reply needs no resolution).
// Both belong to the device and port they were made for: an AH of one
// device is meaningless on another.
#pragma once
#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <cstdint>

#include "core/result.hpp"
#include "rdma/grh.hpp"
#include "rdma/protection_domain.hpp"

namespace vsock::rdma {

class AddressHandle {
 public:
  static core::Result<AddressHandle> create(const ProtectionDomain& pd, const ibv_ah_attr& attr);
  // The path back to the sender of the receive `wc` on `port`; `grh` is the
  // receive buffer's 40-byte GRH slot (ibv_create_ah_from_wc, which reads
  // it in either form, see grh.hpp). EPROTO when the completion has no GRH
  // (IBV_WC_GRH clear) where one is needed, or the slot is neither form.
  static core::Result<AddressHandle> from_completion(const ProtectionDomain& pd, uint8_t port, const ibv_wc& wc,
                                                     const ibv_grh* grh);

  AddressHandle() = default;
  ~AddressHandle();
  AddressHandle(AddressHandle&& other) noexcept;
  AddressHandle& operator=(AddressHandle&& other) noexcept;
  AddressHandle(const AddressHandle&) = delete;
  AddressHandle& operator=(const AddressHandle&) = delete;

  bool valid() const { return ah_ != nullptr; }
  ibv_ah* get() const { return ah_; }

 private:
  void reset();
  ibv_ah* ah_ = nullptr;
};

// The IP address (port 0) the datagram with this GRH slot came from /
// was sent to (parse_grh). Returns the sockaddr's length, 0 when the slot
// is neither form.
socklen_t source_address_of(const ibv_grh& grh, sockaddr_storage* out);
socklen_t destination_address_of(const ibv_grh& grh, sockaddr_storage* out);

}  // namespace vsock::rdma
