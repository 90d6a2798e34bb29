// CmMulticast: the process's rdma_cm multicast joins (DESIGN decision 5):
// one RDMA_PS_UDP id bound to the device's address, on an event channel of
// its own, that joins and leaves IPv4 groups. A join waits for its outcome
// on the caller's thread, bounded by the caller's timeout: on RoCE the
// kernel reports it at once (no subnet administrator to ask; it sends the
// IGMP report itself for a full join), on InfiniBand the SA answers.
//
// What a join gives is how to send to the group (address handle
// attributes, QP number 0xFFFFFF, qkey) and the group's GID and LID,
// which a UD QP attaches to (UdQueuePair::attach_multicast) to receive.
// A send-only join (RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) makes no
// IGMP membership: a sender that is not a receiver.
//
// Not thread-safe: the caller serializes joins and leaves.
#pragma once
#include <netinet/in.h>

#include <cstdint>
#include <map>

#include "core/result.hpp"
#include "rdma/cm_event_channel.hpp"
#include "rdma/cm_id.hpp"
#include "rdma/status.hpp"

namespace vsock::rdma {

struct MulticastPath {
  ibv_ah_attr ah_attr{};  // dgid: the group's GID; dlid its LID
  uint32_t qpn = 0;       // 0xFFFFFF
  uint32_t qkey = 0;
  ibv_gid gid() const { return ah_attr.grh.dgid; }
  uint16_t lid() const { return ah_attr.dlid; }
};

class CmMulticast {
 public:
  // An id bound to `device_address` (an IPv4 address of the RDMA device).
  static core::Result<CmMulticast> create(const sockaddr_in& device_address);

  CmMulticast() = default;
  CmMulticast(CmMulticast&&) noexcept = default;
  CmMulticast& operator=(CmMulticast&&) noexcept = default;
  ~CmMulticast();

  // Joins `group` (full member, or send-only) and waits at most timeout_ms
  // for rdma_cm's answer. ETIMEDOUT without one; the event's status (or
  // EPROTO) for a MULTICAST_ERROR; a join of a group this id joined
  // already is EALREADY (leave it first).
  core::Result<MulticastPath> join(in_addr group, bool send_only, int timeout_ms);
  // Leaves `group` (joined by join()); nothing if it was not.
  void leave(in_addr group);
  bool joined(in_addr group) const { return joined_.count(group.s_addr) != 0; }

 private:
  // The channel outlives the id (destroyed after it: members in reverse).
  CmEventChannel channel_;
  CmId id_;
  // Groups joined (network order), each with the context its join named.
  std::map<uint32_t, uintptr_t> joined_;
  uintptr_t next_context_ = 1;
};

}  // namespace vsock::rdma
