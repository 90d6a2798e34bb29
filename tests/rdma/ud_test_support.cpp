#include "ud_test_support.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace vsock::test {

int open_ud_side(const char* program, UdSide* side) {
  int rc = open_cm_side(program, &side->cm);
  if (rc != 0) return rc;
  side->mtu_bytes = 128u << side->cm.device.active_mtu();  // IBV_MTU_256 is 1
  auto send_cq = rdma::CompletionQueue::create(side->cm.device, 64, false);
  if (!send_cq) return 1;
  side->send_cq = std::move(send_cq.value());
  rdma::UdQpConfig config;
  config.max_send_wr = 32;
  config.max_recv_wr = UdSide::kSlots;
  config.max_inline_data = 256;
  auto qp = rdma::UdQueuePair::create(side->cm.device, side->cm.pd, side->send_cq, side->cm.cq, config);
  if (!qp) {
    fprintf(stderr, "%s: FAILED: UdQueuePair::create: %s\n", program, strerror(qp.error()));
    return 1;
  }
  side->qp = std::move(qp.value());
  auto recv_buffer = rdma::MemoryRegion::allocate(side->cm.pd, size_t{UdSide::kSlots} * side->slot_size(),
                                                  IBV_ACCESS_LOCAL_WRITE);
  auto send_buffer = rdma::MemoryRegion::allocate(side->cm.pd, 2 * size_t{side->slot_size()}, IBV_ACCESS_LOCAL_WRITE);
  if (!recv_buffer || !send_buffer) {
    fprintf(stderr, "%s: FAILED: registering buffers\n", program);
    return 1;
  }
  side->recv_buffer = std::move(recv_buffer.value());
  side->send_buffer = std::move(send_buffer.value());
  printf("%s: UD QP %u on %s port %u, active MTU %u, inline %u granted\n", program, side->qp.qpn(),
         side->cm.device.name().c_str(), side->cm.device.port(), side->mtu_bytes, side->qp.max_inline_data());
  return 0;
}

bool post_receive_chain(UdSide& side, uint64_t first, uint32_t count) {
  std::vector<ibv_sge> sges(count);
  std::vector<ibv_recv_wr> wrs(count);
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t index = first + i;
    sges[i] = ibv_sge{reinterpret_cast<uintptr_t>(side.slot(index)), side.slot_size(), side.recv_buffer.lkey()};
    wrs[i] = ibv_recv_wr{};
    wrs[i].wr_id = index;
    wrs[i].sg_list = &sges[i];
    wrs[i].num_sge = 1;
    wrs[i].next = i + 1 < count ? &wrs[i + 1] : nullptr;
  }
  return count == 0 || side.qp.post_recv(wrs.data()).has_value();
}

namespace {

bool wait_any(rdma::CompletionQueue& cq, int timeout_ms, ibv_wc* out, const char* what) {
  Deadline deadline(timeout_ms / 1000.0);
  for (long polls = 0;; ++polls) {
    core::Result<int> n = cq.poll(out, 1);
    if (!n) {
      fprintf(stderr, "poll error waiting for %s\n", what);
      return false;
    }
    if (n.value() == 1) return true;
    if ((polls & 255) == 0 && deadline.expired()) {
      fprintf(stderr, "timeout (%d ms) waiting for %s\n", timeout_ms, what);
      return false;
    }
    if (polls > 2000) usleep(200);  // emulated guest: spin briefly, then be kind to the other process
  }
}

}  // namespace

bool wait_receive(UdSide& side, int timeout_ms, ibv_wc* out, const char* what) {
  if (!wait_any(side.cm.cq, timeout_ms, out, what)) return false;
  if (out->status != IBV_WC_SUCCESS || out->opcode != IBV_WC_RECV) {
    fprintf(stderr, "receive completion for %s: %s (opcode %d, byte_len %u)\n", what, ibv_wc_status_str(out->status),
            out->opcode, out->byte_len);
    return false;
  }
  return true;
}

bool wait_send(UdSide& side, int timeout_ms, ibv_wc* out, const char* what) {
  return wait_any(side.send_cq, timeout_ms, out, what);
}

std::string address_text(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (address.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(address).sin_addr, text, sizeof text);
  else if (address.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(address).sin6_addr, text, sizeof text);
  return address.ss_family == AF_INET6 ? "[" + std::string(text) + "]" : std::string(text);
}

bool check_grh_source(const UdSide& side, const ibv_wc& wc, const std::string& ip, const char* what) {
  if (!(wc.wc_flags & IBV_WC_GRH)) {
    fprintf(stderr, "%s: no GRH (wc_flags 0x%x)\n", what, wc.wc_flags);
    return false;
  }
  const uint8_t* grh = side.slot(wc.wr_id);
  core::Result<rdma::GrhInfo> info = rdma::parse_grh(grh, rdma::kGrhSize);
  if (!info) {
    fprintf(stderr, "%s: GRH slot is neither form:", what);
    for (size_t i = 0; i < rdma::kGrhSize; ++i) fprintf(stderr, " %02x", grh[i]);
    fprintf(stderr, "\n");
    return false;
  }
  std::string source = address_text(info.value().source);
  if (source != ip) {
    fprintf(stderr, "%s: GRH source %s, want %s\n", what, source.c_str(), ip.c_str());
    return false;
  }
  return true;
}

bool post_ud_send(UdSide& side, const rdma::AddressHandle& ah, uint32_t qpn, uint32_t offset, uint32_t length,
                  bool inline_data, uint32_t split, uint64_t wr_id) {
  ibv_sge sges[2];
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED | (inline_data ? IBV_SEND_INLINE : 0);
  wr.wr.ud.ah = ah.get();
  wr.wr.ud.remote_qpn = qpn;
  wr.wr.ud.remote_qkey = rdma::kUdQkey;
  uint64_t base = side.send_buffer.address();
  if (length == 0) {
    wr.num_sge = 0;
  } else if (split > 0 && split < length) {
    sges[0] = ibv_sge{base + offset, split, side.send_buffer.lkey()};
    sges[1] = ibv_sge{base + side.slot_size(), length - split, side.send_buffer.lkey()};
    wr.num_sge = 2;
  } else {
    sges[0] = ibv_sge{base + offset, length, side.send_buffer.lkey()};
    wr.num_sge = 1;
  }
  wr.sg_list = length == 0 ? nullptr : sges;
  return side.qp.post_send(&wr).has_value();
}

}  // namespace vsock::test
