// rdma_ud_pingpong: two processes' UdQueuePairs on the Soft-RoCE device
// exchange datagrams of 0, 1, 64 bytes, the granted inline size, 300
// bytes in two SGEs and the full MTU (alone and in two SGEs), as the
// library's one UD QP per process will. The client learns the server's QP
// through SIDR (its AH from the SIDR reply's attributes); the server
// answers every datagram through an AH made from the first one's
// completion and GRH (the reverse path). Both sides check the bytes,
// byte_len = 40 + payload, the sender's QPN and that the GRH's source is
// the device's IPv4 address; receives are posted as one chain.
//
// Then what rxe does with a datagram one byte over the MTU (recorded, not
// assumed: the server reports what arrives next), a SEND_WITH_IMM, and
// whether a multicast attach and detach are taken.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "rdma/cm_udp_listener.hpp"
#include "rdma/cm_udp_resolver.hpp"
#include "ud_test_support.hpp"

namespace vsock::test {
namespace {

constexpr const char* kProgram = "rdma_ud_pingpong";
constexpr int kStepMs = 20000;
constexpr int kRounds = 20;
constexpr uint32_t kMarkerBytes = 8;
constexpr uint32_t kImmBytes = 16;
constexpr uint32_t kImmediate = 0xC0DE;
constexpr int kOversizeWaitMs = 2000;  // how long the server lets an oversized datagram arrive

struct Case {
  uint32_t size;
  bool inline_data;
  uint32_t split;  // > 0: two SGEs, the first this long
};

std::vector<Case> cases(const UdSide& side) {
  uint32_t inline_max = std::min<uint32_t>(side.qp.max_inline_data(), side.mtu_bytes);
  std::vector<Case> out = {{0, false, 0}, {1, true, 0}, {64, true, 0}, {300, false, 100},
                           {side.mtu_bytes, false, 0}, {side.mtu_bytes, false, 512}};
  if (inline_max > 0) out.push_back({inline_max, true, 0});
  return out;
}

uint64_t seed_of(int round, size_t index) { return 0x5550 + static_cast<uint64_t>(round) * 16 + index; }

struct Hello {
  uint16_t port;
  uint32_t qpn;
};

// What the server saw after the oversized send.
struct Report {
  uint32_t first_byte_len;  // of the first datagram after it (the marker if it was dropped)
  uint32_t first_src_qp;
  uint32_t imm_flags;       // wc_flags of the SEND_WITH_IMM's receive
  uint32_t imm_data;        // host order
  uint32_t imm_byte_len;
  uint32_t ok;
};

bool check_payload(const UdSide& side, const ibv_wc& wc, uint32_t size, uint64_t seed, uint32_t src_qp,
                   const std::string& ip, const char* what) {
  const uint8_t* payload = side.slot(wc.wr_id) + rdma::kGrhSize;
  size_t bad = find_mismatch(payload, size, seed, 0);
  if (wc.byte_len != rdma::kGrhSize + size || wc.src_qp != src_qp || bad != size) {
    fprintf(stderr, "%s: FAILED: %s: byte_len %u (want %zu), src_qp %u (want %u), first bad byte %zu of %u\n",
            kProgram, what, wc.byte_len, rdma::kGrhSize + size, wc.src_qp, src_qp, bad, size);
    return false;
  }
  return check_grh_source(side, wc, ip, what);
}

int server(int control) {
  UdSide side;
  int rc = open_ud_side(kProgram, &side);
  if (rc != 0) return rc;
  std::string ip = rdma_test_address();
  sockaddr_storage address;
  if (!make_address(ip, 0, &address)) return 1;
  auto listener = rdma::CmUdpListener::create(side.cm.channel, reinterpret_cast<sockaddr*>(&address));
  if (!listener) return 1;
  // Every receive of the test in one chain, before anyone can send.
  if (!post_receive_chain(side, 0, UdSide::kSlots)) return 1;
  Hello hello{listener.value().port(), side.qp.qpn()};
  if (!send_all(control, &hello, sizeof hello, kStepMs)) return 1;
  uint32_t client_qpn = 0;
  if (!recv_all(control, &client_qpn, sizeof client_qpn, kStepMs)) return 1;
  rdma::CmEvent request;
  if (!next_cm_event(side.cm.channel, kStepMs, &request, "the SIDR request") ||
      request.type != RDMA_CM_EVENT_CONNECT_REQUEST || !listener.value().owns(request) ||
      !listener.value().answer(request, side.qp.qpn(), rdma::kUdQkey, nullptr, 0)) {
    fprintf(stderr, "%s: FAILED: SIDR request / answer\n", kProgram);
    return 1;
  }

  // Attaching the QP to a multicast group (the IPv4-mapped GID of
  // 239.255.77.1, as rdma_join_multicast would give on RoCE) and detaching
  // it: only that the device takes both (no datagram is sent to it).
  ibv_gid group{};
  group.raw[10] = group.raw[11] = 0xff;
  inet_pton(AF_INET, "239.255.77.1", group.raw + 12);
  auto attached = side.qp.attach_multicast(group, 0);
  auto detached = attached ? side.qp.detach_multicast(group, 0) : attached;
  printf("MEASURED: attach_multicast(::ffff:239.255.77.1) %s, detach %s\n",
         attached ? "ok" : strerror(attached.error()), detached ? "ok" : strerror(detached.error()));
  if (!attached || !detached) return 1;

  rdma::AddressHandle back;
  std::vector<Case> all = cases(side);
  uint64_t received = 0;
  for (int round = 0; round < kRounds; ++round) {
    for (size_t i = 0; i < all.size(); ++i) {
      ibv_wc wc{};
      if (!wait_receive(side, kStepMs, &wc, "a datagram")) return 1;
      ++received;
      if (!check_payload(side, wc, all[i].size, seed_of(round, i), client_qpn, ip, "server receive")) return 1;
      if (!back.valid()) {
        const auto* grh = reinterpret_cast<const ibv_grh*>(side.slot(wc.wr_id));
        auto made = rdma::AddressHandle::from_completion(side.cm.pd, side.cm.device.port(), wc, grh);
        if (!made) {
          fprintf(stderr, "%s: FAILED: AddressHandle::from_completion: %s\n", kProgram, strerror(made.error()));
          return 1;
        }
        back = std::move(made.value());
        sockaddr_storage source, destination;
        rdma::source_address_of(*grh, &source);
        rdma::destination_address_of(*grh, &destination);
        auto info = rdma::parse_grh(side.slot(wc.wr_id), rdma::kGrhSize);
        printf("MEASURED: GRH slot of a received datagram: %s form, source %s, destination %s, ttl %u, tos 0x%02x, "
               "protocol %u; first 20 bytes %s\n",
               info.value().form == rdma::GrhForm::kIpv4 ? "IPv4 (RoCE v2)" : "IPv6", address_text(source).c_str(),
               address_text(destination).c_str(), info.value().hop_limit, info.value().traffic_class,
               info.value().next_header,
               std::all_of(side.slot(wc.wr_id), side.slot(wc.wr_id) + 20, [](uint8_t b) { return b == 0; })
                   ? "all zero"
                   : "not zero");
        if (address_text(destination) != ip) {
          fprintf(stderr, "%s: FAILED: GRH destination %s\n", kProgram, address_text(destination).c_str());
          return 1;
        }
      }
      // Echo the same bytes back through the AH made from the completion.
      std::memcpy(side.send_buffer.data(), side.slot(wc.wr_id) + rdma::kGrhSize, all[i].size);
      if (!post_receive_chain(side, wc.wr_id, 1)) return 1;
      if (!post_ud_send(side, back, wc.src_qp, 0, all[i].size, false, 0, received)) return 1;
      ibv_wc sent{};
      if (!wait_send(side, kStepMs, &sent, "the echo's send completion") || sent.status != IBV_WC_SUCCESS) {
        fprintf(stderr, "%s: FAILED: echo send: %s\n", kProgram, ibv_wc_status_str(sent.status));
        return 1;
      }
    }
  }
  printf("%s: server received and echoed %llu datagrams\n", kProgram, static_cast<unsigned long long>(received));

  // The client now sends MTU + 1 bytes, then an 8-byte marker, then a
  // SEND_WITH_IMM: report what comes.
  Report report{};
  ibv_wc wc{};
  if (wait_receive(side, kStepMs, &wc, "the datagram after the oversized one")) {
    report.first_byte_len = wc.byte_len;
    report.first_src_qp = wc.src_qp;
    post_receive_chain(side, wc.wr_id, 1);
    ibv_wc imm{};
    if (wait_receive(side, kStepMs, &imm, "the SEND_WITH_IMM")) {
      report.imm_flags = imm.wc_flags;
      report.imm_data = ntohl(imm.imm_data);
      report.imm_byte_len = imm.byte_len;
      report.ok = 1;
    }
  }
  // Nothing else may be in the CQ (a late oversized datagram would be).
  usleep(kOversizeWaitMs * 1000);
  ibv_wc extra{};
  core::Result<int> more = side.cm.cq.poll(&extra, 1);
  if (more && more.value() > 0) {
    fprintf(stderr, "%s: FAILED: an extra completion: %s, byte_len %u\n", kProgram, ibv_wc_status_str(extra.status),
            extra.byte_len);
    report.ok = 0;
  }
  if (!send_all(control, &report, sizeof report, kStepMs)) return 1;
  return report.ok ? 0 : 1;
}

int client(int control) {
  UdSide side;
  int rc = open_ud_side(kProgram, &side);
  if (rc != 0) return rc;
  std::string ip = rdma_test_address();
  if (!post_receive_chain(side, 0, UdSide::kSlots)) return 1;
  Hello hello{};
  if (!recv_all(control, &hello, sizeof hello, kStepMs)) return 1;
  uint32_t qpn = side.qp.qpn();
  if (!send_all(control, &qpn, sizeof qpn, kStepMs)) return 1;
  sockaddr_storage destination;
  if (!make_address(ip, hello.port, &destination)) return 1;
  auto resolved = rdma::sidr_resolve_blocking(side.cm.channel, reinterpret_cast<sockaddr*>(&destination), nullptr,
                                              10000, nullptr, 0);
  if (!resolved || resolved.value().outcome() != rdma::SidrOutcome::kResolved) {
    fprintf(stderr, "%s: FAILED: SIDR: %s\n", kProgram,
                resolved ? rdma::sidr_outcome_name(resolved.value().outcome()) : strerror(resolved.error()));
    return 1;
  }
  const rdma::SidrResult& peer = resolved.value().result();
  if (peer.qpn != hello.qpn || peer.device_name != side.cm.device.name()) {
    fprintf(stderr, "%s: FAILED: SIDR gave QP %u on %s\n", kProgram, peer.qpn, peer.device_name.c_str());
    return 1;
  }
  auto ah = rdma::AddressHandle::create(side.cm.pd, peer.ah_attr);
  if (!ah) return 1;

  std::vector<Case> all = cases(side);
  std::vector<double> rtt_us(all.size(), 0.0);
  for (int round = 0; round < kRounds; ++round) {
    for (size_t i = 0; i < all.size(); ++i) {
      const Case& c = all[i];
      uint64_t seed = seed_of(round, i);
      if (c.split > 0) {
        fill_pattern(side.send_buffer.data(), c.split, seed, 0);
        fill_pattern(side.send_buffer.data() + side.slot_size(), c.size - c.split, seed, c.split);
      } else {
        fill_pattern(side.send_buffer.data(), c.size, seed, 0);
      }
      double start = now_seconds();
      if (!post_ud_send(side, ah.value(), peer.qpn, 0, c.size, c.inline_data, c.split, i)) {
        fprintf(stderr, "%s: FAILED: post_send of %u bytes (inline %d, split %u)\n", kProgram, c.size, c.inline_data,
                c.split);
        return 1;
      }
      ibv_wc sent{};
      if (!wait_send(side, kStepMs, &sent, "a send completion") || sent.status != IBV_WC_SUCCESS) {
        fprintf(stderr, "%s: FAILED: send of %u bytes: %s\n", kProgram, c.size, ibv_wc_status_str(sent.status));
        return 1;
      }
      ibv_wc wc{};
      if (!wait_receive(side, kStepMs, &wc, "an echo")) return 1;
      rtt_us[i] += (now_seconds() - start) * 1e6;
      if (!check_payload(side, wc, c.size, seed, peer.qpn, ip, "client receive")) return 1;
      if (!post_receive_chain(side, wc.wr_id, 1)) return 1;
    }
  }
  for (size_t i = 0; i < all.size(); ++i)
    printf("MEASURED: %u bytes%s%s: mean round trip %.0f us over %d\n", all[i].size,
           all[i].inline_data ? " inline" : "", all[i].split ? " (2 SGEs)" : "", rtt_us[i] / kRounds, kRounds);

  // One byte over the MTU: refused at post, failed, or dropped?
  fill_pattern(side.send_buffer.data(), side.mtu_bytes + 1, 0x4F56, 0);
  bool posted = post_ud_send(side, ah.value(), peer.qpn, 0, side.mtu_bytes + 1, false, 0, 100);
  ibv_wc sent{};
  const char* completion = "none";
  if (posted)
    completion = wait_send(side, kStepMs, &sent, "the oversized send") ? ibv_wc_status_str(sent.status) : "timeout";
  fill_pattern(side.send_buffer.data(), kMarkerBytes, 0x4D4B, 0);
  if (!post_ud_send(side, ah.value(), peer.qpn, 0, kMarkerBytes, false, 0, 101) ||
      !wait_send(side, kStepMs, &sent, "the marker") || sent.status != IBV_WC_SUCCESS)
    return 1;
  // SEND_WITH_IMM (what udaddy sends).
  ibv_sge sge{side.send_buffer.address(), kImmBytes, side.send_buffer.lkey()};
  ibv_send_wr wr{};
  wr.wr_id = 102;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(kImmediate);
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = ah.value().get();
  wr.wr.ud.remote_qpn = peer.qpn;
  wr.wr.ud.remote_qkey = rdma::kUdQkey;
  if (!side.qp.post_send(&wr) || !wait_send(side, kStepMs, &sent, "the SEND_WITH_IMM") || sent.status != IBV_WC_SUCCESS)
    return 1;
  Report report{};
  if (!recv_all(control, &report, sizeof report, kStepMs + kOversizeWaitMs + 5000)) return 1;
  const bool dropped = report.first_byte_len == rdma::kGrhSize + kMarkerBytes;
  printf("MEASURED: a %u-byte UD send (MTU %u + 1): post_send %s, completion %s; at the peer %s (next arrival: "
         "byte_len %u)\n",
         side.mtu_bytes + 1, side.mtu_bytes, posted ? "accepted" : "refused", completion,
         dropped ? "nothing arrived (silently dropped)" : "something else arrived", report.first_byte_len);
  printf("MEASURED: SEND_WITH_IMM over UD: byte_len %u, IBV_WC_WITH_IMM %s, imm 0x%x\n", report.imm_byte_len,
         (report.imm_flags & IBV_WC_WITH_IMM) ? "set" : "clear", report.imm_data);
  if (!report.ok || !dropped || report.imm_data != kImmediate || report.imm_byte_len != rdma::kGrhSize + kImmBytes) {
    fprintf(stderr, "%s: FAILED: oversize or immediate check\n", kProgram);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace vsock::test

int main() {
  using namespace vsock::test;
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (rdma_test_address().empty()) {
    printf("SKIPPED: rdma_ud_pingpong needs RXE_VM_IPADDR (the Soft-RoCE VM) or VSOCK_TEST_RDMA_ADDR\n");
    return kExitSkip;
  }
  int rc = run_pair(server, client, 120);
  printf("rdma_ud_pingpong: %s\n", rc == 0 ? "PASSED" : rc == kExitSkip ? "SKIPPED" : "FAILED");
  return rc;
}
