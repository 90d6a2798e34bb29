// Helpers of the UD tests (rdma_ud_pingpong, rdma_cm_sidr): one side's UD
// QP with its own send CQ, receive buffers in slots of kGrhSize + MTU
// posted as one chain, bounded waits for a receive or a send completion,
// and the GRH source check. Test code: it calls libc freely.
#pragma once
#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "cm_test_support.hpp"
#include "rdma/address_handle.hpp"
#include "rdma/grh.hpp"
#include "rdma/memory_region.hpp"
#include "rdma/ud_queue_pair.hpp"

namespace vsock::test {

// One side: device, PD, receive CQ (side.cm.cq) and rdma_cm channel from
// open_cm_side, plus a send CQ, the UD QP and its buffers.
struct UdSide {
  static constexpr uint32_t kSlots = 64;
  CmSide cm;
  rdma::CompletionQueue send_cq;
  rdma::UdQueuePair qp;
  rdma::MemoryRegion recv_buffer;  // kSlots slots of slot_size()
  rdma::MemoryRegion send_buffer;  // 2 * slot_size()
  uint32_t mtu_bytes = 0;          // the active MTU: the largest UD payload

  uint32_t slot_size() const { return static_cast<uint32_t>(rdma::kGrhSize) + mtu_bytes; }
  uint8_t* slot(uint64_t index) const { return recv_buffer.data() + (index % kSlots) * slot_size(); }
};
// 0, or the exit code (77: no device).
int open_ud_side(const char* program, UdSide* side);

// Posts receives into slots first .. first + count - 1 (wr_id = slot
// number) as one chain: one ibv_post_recv call.
bool post_receive_chain(UdSide& side, uint64_t first, uint32_t count);
// Waits (bounded) for the next receive completion; false (and a message)
// on timeout or on a completion error.
bool wait_receive(UdSide& side, int timeout_ms, ibv_wc* out, const char* what);
// The same for a (signalled) send completion; its status is returned in
// out->status, not judged.
bool wait_send(UdSide& side, int timeout_ms, ibv_wc* out, const char* what);

// Checks that the receive `wc` had a GRH whose source is `ip` (IPv4);
// prints what it found otherwise.
bool check_grh_source(const UdSide& side, const ibv_wc& wc, const std::string& ip, const char* what);

// "a.b.c.d" or "[v6]" of a parsed address.
std::string address_text(const sockaddr_storage& address);

// A UD send of the `length` bytes at send_buffer + offset to qpn through
// `ah`, signalled, with wr_id; `inline_data` adds IBV_SEND_INLINE;
// `split` > 0 sends it as two SGEs (the first `split` bytes from offset,
// the rest from the second half of the send buffer).
bool post_ud_send(UdSide& side, const rdma::AddressHandle& ah, uint32_t qpn, uint32_t offset, uint32_t length,
                  bool inline_data, uint32_t split, uint64_t wr_id);

}  // namespace vsock::test
