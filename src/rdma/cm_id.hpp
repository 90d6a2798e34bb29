// CmId: owns one rdma_cm_id; rdma_destroy_id() on destruction.
//
// Destroying an id makes the kernel drop its queued events and answer for
// it (a pending request is rejected, a connection is sent a disconnect
// request), so an id that is not wanted any more is simply destroyed.
// rdma_destroy_id() waits until every event of the id that was handed out
// is acknowledged; CmEventChannel acknowledges at once, so it never waits.
#pragma once
#include <rdma/rdma_cma.h>

#include <cstdint>
#include <string>

#include "core/result.hpp"

namespace vsock::rdma {

class CmEventChannel;

class CmId {
 public:
  // A new id on `channel` in RDMA_PS_TCP (reliable connected QPs).
  static core::Result<CmId> create_tcp(CmEventChannel& channel);
  // A new id on `channel` in RDMA_PS_UDP (UD QPs): SIDR, the service ID
  // resolution that tells a requester a listener's UD QPN and qkey
  // (CmUdpListener, CmUdpResolver), and multicast joins.
  static core::Result<CmId> create_udp(CmEventChannel& channel);
  // Takes ownership of an id rdma_cm made (the id of a CONNECT_REQUEST).
  static CmId adopt(rdma_cm_id* id) { return CmId(id); }

  CmId() = default;
  ~CmId();
  CmId(CmId&& other) noexcept;
  CmId& operator=(CmId&& other) noexcept;
  CmId(const CmId&) = delete;
  CmId& operator=(const CmId&) = delete;

  bool valid() const { return id_ != nullptr; }
  rdma_cm_id* get() const { return id_; }
  // Destroys the id now (no-op when empty).
  void reset();
  // The name of the verbs device the id is bound to ("" before that), and
  // its port: set once the address is resolved, or for a request at once.
  std::string device_name() const;
  uint8_t port() const { return id_ ? id_->port_num : 0; }

 private:
  explicit CmId(rdma_cm_id* id) : id_(id) {}
  rdma_cm_id* id_ = nullptr;
};

// The address and port of the other end of `id` (rdma_get_peer_addr),
// copied into `out`; its length, 0 for no id or an address that is not IP.
socklen_t cm_peer_address(rdma_cm_id* id, sockaddr_storage* out);

}  // namespace vsock::rdma
