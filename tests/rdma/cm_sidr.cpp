// rdma_cm_sidr: SIDR (rdma_cm RDMA_PS_UDP service ID resolution) end to
// end, in two processes on the Soft-RoCE address. The server has a real UD
// QP and a CmUdpListener on $RXE_VM_IPADDR, on a port rdma_cm picks. The
// client, in this order:
//   A: 180 bytes of request private data (the SIDR maximum), answered with
//      16 bytes: kResolved with the server's QPN, kUdQkey and the 16 bytes
//      byte-exact; then a UD datagram through the resolved AH arrives at
//      the server's QP, from our QPN and address;
//   B: answered with 136 bytes (the SIDR REP maximum), all checked;
//   C: refused: kRefused (SIDR status 2);
//   F: answered with a qkey a SIDR reply cannot carry: answer() fails with
//      EINVAL and refuses, so the client sees kRefused;
//   G: four resolvers at once on one channel (events routed by owns()),
//      each answered with its own index: all kResolved, none crossed;
//   D: a port nobody listens on: kNoListener (status 1), what rxe gives;
//   E: an unused address on the subnet (no host answers): our bound ends it
//      (kTimeout), or an address/route error; VSOCK_TEST_SIDR_UNUSED_BOUND_MS
//      (e.g. 120000) shows what the kernel's CM does on its own.
// Every wait is bounded; prints MEASURED lines (times, sizes).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rdma/cm_udp_listener.hpp"
#include "rdma/cm_udp_resolver.hpp"
#include "ud_test_support.hpp"

namespace vsock::test {
namespace {

using rdma::Status;

constexpr const char* kProgram = "rdma_cm_sidr";
constexpr int kStepMs = 20000;
constexpr int kResolveTimeoutMs = 10000;
constexpr uint64_t kRequestSeed = 0x5351;
constexpr uint64_t kAnswerSeed = 0x5341;
constexpr uint64_t kDatagramSeed = 0x5344;
constexpr uint32_t kDatagramBytes = 100;
constexpr uint8_t kShortAnswer = 16;
constexpr int kUnusedBoundMs = 500;
constexpr int kConcurrent = 4;

int unused_bound_ms() {
  const char* text = getenv("VSOCK_TEST_SIDR_UNUSED_BOUND_MS");
  int bound = text ? atoi(text) : 0;
  return bound > 0 && bound <= 600000 ? bound : kUnusedBoundMs;
}

// Same /24, host 99 (98 if that is us), or VSOCK_TEST_RDMA_UNUSED_ADDR.
std::string unused_address(const std::string& ip) {
  const char* configured = getenv("VSOCK_TEST_RDMA_UNUSED_ADDR");
  if (configured && *configured) return configured;
  size_t dot = ip.rfind('.');
  if (dot == std::string::npos) return "";
  return ip.substr(0, dot + 1) + (ip.substr(dot + 1) == "99" ? "98" : "99");
}

struct Hello {
  uint16_t port;
  uint32_t qpn;
};

bool expect_request(UdSide& side, rdma::CmUdpListener& listener, rdma::CmEvent* out, const char* what) {
  Deadline deadline(kStepMs / 1000.0);
  for (int seen = 0; seen < 16; ++seen) {
    if (!next_cm_event(side.cm.channel, deadline.remaining_ms(kStepMs), out, what)) return false;
    if (out->type == RDMA_CM_EVENT_CONNECT_REQUEST && listener.owns(*out)) return true;
    fprintf(stderr, "  (%s, status %d, while waiting for %s)\n", rdma::cm_event_name(out->type), out->status, what);
  }
  return false;
}

int server(int control) {
  UdSide side;
  int rc = open_ud_side(kProgram, &side);
  if (rc != 0) return rc;
  std::string ip = rdma_test_address();
  sockaddr_storage address;
  if (!make_address(ip, 0, &address)) return 1;
  auto listener = rdma::CmUdpListener::create(side.cm.channel, reinterpret_cast<sockaddr*>(&address));
  if (!listener) {
    fprintf(stderr, "%s: FAILED: CmUdpListener::create: %s\n", kProgram, strerror(listener.error()));
    return 1;
  }
  if (!post_receive_chain(side, 0, 8)) return 1;
  Hello hello{listener.value().port(), side.qp.qpn()};
  printf("%s: server listens (RDMA_PS_UDP) on %s:%u, UD QP %u\n", kProgram, ip.c_str(), hello.port, hello.qpn);
  if (!send_all(control, &hello, sizeof hello, kStepMs)) return 1;
  uint32_t client_qpn = 0;
  if (!recv_all(control, &client_qpn, sizeof client_qpn, kStepMs)) return 1;

  // A: the full 180 bytes of request private data, answered with 16.
  rdma::CmEvent request;
  if (!expect_request(side, listener.value(), &request, "SIDR request A")) return 1;
  sockaddr_storage source;
  socklen_t source_length = listener.value().source_of(request, &source);
  printf("MEASURED: SIDR request private data: %zu bytes as received (sent %zu); from %s (length %u)\n",
         request.private_data.length, rdma::kCmMaxSidrRequestPrivateData, address_text(source).c_str(),
         static_cast<unsigned>(source_length));
  if (request.private_data.length < rdma::kCmMaxSidrRequestPrivateData ||
      find_mismatch(request.private_data.bytes, rdma::kCmMaxSidrRequestPrivateData, kRequestSeed, 0) !=
          rdma::kCmMaxSidrRequestPrivateData) {
    fprintf(stderr, "%s: FAILED: request A's private data\n", kProgram);
    return 1;
  }
  if (source_length == 0 || address_text(source) != ip) {
    fprintf(stderr, "%s: FAILED: request A comes from %s, want %s\n", kProgram, address_text(source).c_str(),
            ip.c_str());
    return 1;
  }
  uint8_t answer[rdma::kCmMaxSidrReplyPrivateData];
  fill_pattern(answer, sizeof answer, kAnswerSeed, 0);
  if (!listener.value().answer(request, side.qp.qpn(), rdma::kUdQkey, answer, kShortAnswer)) {
    fprintf(stderr, "%s: FAILED: answer A\n", kProgram);
    return 1;
  }
  // The client's datagram through the AH it resolved.
  ibv_wc wc{};
  if (!wait_receive(side, kStepMs, &wc, "the client's datagram")) return 1;
  const uint8_t* payload = side.slot(wc.wr_id) + rdma::kGrhSize;
  if (wc.byte_len != rdma::kGrhSize + kDatagramBytes || wc.src_qp != client_qpn ||
      find_mismatch(payload, kDatagramBytes, kDatagramSeed, 0) != kDatagramBytes ||
      !check_grh_source(side, wc, ip, "the client's datagram")) {
    fprintf(stderr, "%s: FAILED: datagram: byte_len %u (want %zu), src_qp %u (want %u)\n", kProgram, wc.byte_len,
            rdma::kGrhSize + kDatagramBytes, wc.src_qp, client_qpn);
    return 1;
  }
  printf("%s: server got the client's %u-byte datagram from QP %u at %s\n", kProgram, kDatagramBytes, wc.src_qp,
         ip.c_str());

  // B: answered with the SIDR REP maximum.
  if (!expect_request(side, listener.value(), &request, "SIDR request B")) return 1;
  if (!listener.value().answer(request, side.qp.qpn(), rdma::kUdQkey, answer, sizeof answer)) {
    fprintf(stderr, "%s: FAILED: answer B (136 bytes)\n", kProgram);
    return 1;
  }
  // C: refused.
  if (!expect_request(side, listener.value(), &request, "SIDR request C")) return 1;
  if (!listener.value().refuse(request)) {
    fprintf(stderr, "%s: FAILED: refuse C\n", kProgram);
    return 1;
  }
  // F: a qkey the reply cannot carry: answer() refuses the request itself.
  if (!expect_request(side, listener.value(), &request, "SIDR request F")) return 1;
  Status wrong = listener.value().answer(request, side.qp.qpn(), rdma::kUdQkey + 1, answer, kShortAnswer);
  if (wrong || wrong.error() != EINVAL) {
    fprintf(stderr, "%s: FAILED: answer with qkey 0x%x: %s\n", kProgram, rdma::kUdQkey + 1,
            wrong ? "accepted" : strerror(wrong.error()));
    return 1;
  }
  // G: kConcurrent requests at once, each answered with its own index.
  for (int i = 0; i < kConcurrent; ++i) {
    if (!expect_request(side, listener.value(), &request, "SIDR request G")) return 1;
    uint8_t index = request.private_data.bytes[0];
    if (!listener.value().answer(request, side.qp.qpn(), rdma::kUdQkey, &index, 1)) {
      fprintf(stderr, "%s: FAILED: answer G\n", kProgram);
      return 1;
    }
  }
  // Stay until the client is done (D and E go elsewhere; E may take the
  // kernel's own time).
  char done = 0;
  if (!recv_all(control, &done, 1, unused_bound_ms() + 3 * kStepMs)) return 1;
  int ids = count_rdma_resources("cm_id");
  printf("%s: server holds %d cm ids (the listener) at the end\n", kProgram, ids);
  if (ids > 1) {
    fprintf(stderr, "%s: FAILED: answered or refused request ids were not destroyed\n", kProgram);
    return 1;
  }
  return 0;
}

int resolve(UdSide& side, const std::string& ip, uint16_t port, const uint8_t* data, uint8_t length,
            rdma::SidrOutcome want, rdma::CmUdpResolver* out, const char* what, int bound_ms = kResolveTimeoutMs) {
  sockaddr_storage destination;
  if (!make_address(ip, port, &destination)) return 1;
  double start = now_seconds();
  auto resolved = rdma::sidr_resolve_blocking(side.cm.channel, reinterpret_cast<sockaddr*>(&destination), nullptr,
                                              bound_ms, data, length);
  if (!resolved) {
    fprintf(stderr, "%s: FAILED: %s: %s\n", kProgram, what, strerror(resolved.error()));
    return 1;
  }
  const rdma::SidrResult& r = resolved.value().result();
  printf("MEASURED: SIDR %s: %s (stage %s, error %d, SIDR status %d) in %.1f ms\n", what,
         rdma::sidr_outcome_name(r.outcome), rdma::cm_connect_stage_name(r.stage), r.error, r.sidr_status,
         elapsed_ms(start));
  if (r.outcome != want && want != rdma::SidrOutcome::kPending) {
    fprintf(stderr, "%s: FAILED: %s: %s, want %s\n", kProgram, what, rdma::sidr_outcome_name(r.outcome),
            rdma::sidr_outcome_name(want));
    return 1;
  }
  *out = std::move(resolved.value());
  return 0;
}

int resolve_concurrently(UdSide& side, const std::string& ip, uint16_t port, uint32_t server_qpn) {
  sockaddr_storage destination;
  if (!make_address(ip, port, &destination)) return 1;
  std::vector<rdma::CmUdpResolver> resolvers;
  double start = now_seconds();
  for (int i = 0; i < kConcurrent; ++i) {
    uint8_t index = static_cast<uint8_t>(i);
    auto started = rdma::CmUdpResolver::start(side.cm.channel, reinterpret_cast<sockaddr*>(&destination), nullptr,
                                              kResolveTimeoutMs, &index, 1);
    if (!started) return 1;
    resolvers.push_back(std::move(started.value()));
  }
  auto pending = [&] {
    return std::any_of(resolvers.begin(), resolvers.end(),
                       [](const rdma::CmUdpResolver& r) { return r.outcome() == rdma::SidrOutcome::kPending; });
  };
  for (int round = 0; round < 1000 && pending(); ++round) {
    int wait = kResolveTimeoutMs;
    for (const auto& r : resolvers)
      if (r.outcome() == rdma::SidrOutcome::kPending) wait = std::min(wait, r.remaining_ms());
    core::Result<rdma::CmEvent> event = side.cm.channel.next_event(wait);
    if (event) {
      bool routed = false;
      for (auto& r : resolvers) {
        if (r.owns(event.value())) {
          r.on_event(event.value());
          routed = true;
        }
      }
      if (!routed) fprintf(stderr, "  (%s of no resolver)\n", rdma::cm_event_name(event.value().type));
    } else if (event.error() != EAGAIN && event.error() != EINTR) {
      return 1;
    }
    for (auto& r : resolvers) r.check_deadline();
  }
  printf("MEASURED: SIDR G: %d resolvers at once on one channel: all done in %.1f ms\n", kConcurrent,
         elapsed_ms(start));
  for (int i = 0; i < kConcurrent; ++i) {
    const rdma::SidrResult& r = resolvers[i].result();
    // Each answer carries the index its request sent: replies are not crossed.
    if (r.outcome != rdma::SidrOutcome::kResolved || r.qpn != server_qpn || r.private_data.bytes[0] != i) {
      fprintf(stderr, "%s: FAILED: G[%d]: %s, qpn %u, answer for %u\n", kProgram, i,
              rdma::sidr_outcome_name(r.outcome), r.qpn, r.private_data.bytes[0]);
      return 1;
    }
  }
  return 0;
}

int client(int control) {
  UdSide side;
  int rc = open_ud_side(kProgram, &side);
  if (rc != 0) return rc;
  std::string ip = rdma_test_address();
  Hello hello{};
  if (!recv_all(control, &hello, sizeof hello, kStepMs)) return 1;
  uint32_t qpn = side.qp.qpn();
  if (!send_all(control, &qpn, sizeof qpn, kStepMs)) return 1;

  uint8_t request[rdma::kCmMaxSidrRequestPrivateData];
  fill_pattern(request, sizeof request, kRequestSeed, 0);
  uint8_t answer[rdma::kCmMaxSidrReplyPrivateData];
  fill_pattern(answer, sizeof answer, kAnswerSeed, 0);

  // A
  rdma::CmUdpResolver a;
  if (resolve(side, ip, hello.port, request, sizeof request, rdma::SidrOutcome::kResolved, &a, "A (answered)") != 0)
    return 1;
  const rdma::SidrResult& ra = a.result();
  printf("MEASURED: SIDR reply: qpn %u, qkey 0x%08x, %zu bytes of private data as received (sent %u), device %s port "
         "%u, ah_attr is_global %u sgid_index %u hop_limit %u\n",
         ra.qpn, ra.qkey, ra.private_data.length, kShortAnswer, ra.device_name.c_str(), ra.port, ra.ah_attr.is_global,
         ra.ah_attr.grh.sgid_index, ra.ah_attr.grh.hop_limit);
  if (ra.qpn != hello.qpn || ra.qkey != rdma::kUdQkey || ra.private_data.length < kShortAnswer ||
      std::memcmp(ra.private_data.bytes, answer, kShortAnswer) != 0 || ra.device_name != side.cm.device.name()) {
    fprintf(stderr, "%s: FAILED: reply A: qpn %u (want %u), qkey 0x%x (want 0x%x), device %s\n", kProgram, ra.qpn,
            hello.qpn, ra.qkey, rdma::kUdQkey, ra.device_name.c_str());
    return 1;
  }
  for (size_t i = kShortAnswer; i < ra.private_data.length; ++i) {
    if (ra.private_data.bytes[i] != 0) {
      fprintf(stderr, "%s: FAILED: reply A's padding byte %zu is %u\n", kProgram, i, ra.private_data.bytes[i]);
      return 1;
    }
  }
  auto ah = rdma::AddressHandle::create(side.cm.pd, ra.ah_attr);
  if (!ah) return 1;
  fill_pattern(side.send_buffer.data(), kDatagramBytes, kDatagramSeed, 0);
  if (!post_ud_send(side, ah.value(), ra.qpn, 0, kDatagramBytes, false, 0, 1)) return 1;
  ibv_wc wc{};
  if (!wait_send(side, kStepMs, &wc, "the datagram's send completion") || wc.status != IBV_WC_SUCCESS) {
    fprintf(stderr, "%s: FAILED: send: %s\n", kProgram, ibv_wc_status_str(wc.status));
    return 1;
  }

  // B
  rdma::CmUdpResolver b;
  if (resolve(side, ip, hello.port, request, 8, rdma::SidrOutcome::kResolved, &b, "B (136-byte answer)") != 0) return 1;
  if (b.result().private_data.length != rdma::kCmMaxSidrReplyPrivateData ||
      std::memcmp(b.result().private_data.bytes, answer, sizeof answer) != 0) {
    fprintf(stderr, "%s: FAILED: reply B: %zu bytes, want %zu byte-exact\n", kProgram, b.result().private_data.length,
            rdma::kCmMaxSidrReplyPrivateData);
    return 1;
  }
  // C
  rdma::CmUdpResolver c;
  if (resolve(side, ip, hello.port, request, 8, rdma::SidrOutcome::kRefused, &c, "C (refused)") != 0) return 1;
  printf("MEASURED: refused: %zu bytes of private data\n", c.result().private_data.length);
  rdma::CmUdpResolver f;
  if (resolve(side, ip, hello.port, request, 8, rdma::SidrOutcome::kRefused, &f, "F (answer with a wrong qkey)") != 0)
    return 1;
  // G: several resolvers at once on one channel, driven as the library
  // will drive them: events routed by owns(), deadlines checked.
  if (resolve_concurrently(side, ip, hello.port, hello.qpn) != 0) return 1;
  // D: nobody listens on the next port (nothing else runs in the guest).
  rdma::CmUdpResolver d;
  uint16_t unused = static_cast<uint16_t>(hello.port + 1);
  if (resolve(side, ip, unused, request, 8, rdma::SidrOutcome::kNoListener, &d, "D (no listener)") != 0) return 1;
  // E: nobody at that address. kPending as `want`: any outcome is recorded,
  // then judged here.
  rdma::CmUdpResolver e;
  int bound = unused_bound_ms();
  std::string label = "E (unused address " + unused_address(ip) + ", bound " + std::to_string(bound) + " ms)";
  if (resolve(side, unused_address(ip), hello.port, request, 8, rdma::SidrOutcome::kPending, &e, label.c_str(),
              bound) != 0)
    return 1;
  rdma::SidrOutcome outcome = e.outcome();
  if (outcome == rdma::SidrOutcome::kResolved || outcome == rdma::SidrOutcome::kRefused ||
      outcome == rdma::SidrOutcome::kError || outcome == rdma::SidrOutcome::kPending) {
    fprintf(stderr, "%s: FAILED: unused address: %s\n", kProgram, rdma::sidr_outcome_name(outcome));
    return 1;
  }
  // Our own bound checks: parameters the SIDR REQ cannot carry.
  sockaddr_storage destination;
  make_address(ip, hello.port, &destination);
  auto too_long = rdma::CmUdpResolver::start(side.cm.channel, reinterpret_cast<sockaddr*>(&destination), nullptr,
                                             1000, request, rdma::kCmMaxSidrRequestPrivateData + 1);
  if (too_long || too_long.error() != EINVAL) {
    fprintf(stderr, "%s: FAILED: 181 bytes of request private data accepted\n", kProgram);
    return 1;
  }
  char done = 1;
  if (!send_all(control, &done, 1, kStepMs)) return 1;
  int ids = count_rdma_resources("cm_id");
  printf("%s: client holds %d cm ids at the end\n", kProgram, ids);
  if (ids > 0) {
    fprintf(stderr, "%s: FAILED: the resolvers' ids were not destroyed\n", kProgram);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace vsock::test

int main() {
  using namespace vsock::test;
  setvbuf(stdout, nullptr, _IOLBF, 0);  // a run cut short still shows how far it got
  if (rdma_test_address().empty()) {
    printf("SKIPPED: rdma_cm_sidr needs RXE_VM_IPADDR (the Soft-RoCE VM) or VSOCK_TEST_RDMA_ADDR\n");
    return kExitSkip;
  }
  int rc = run_pair(server, client, 90);
  printf("rdma_cm_sidr: %s\n", rc == 0 ? "PASSED" : rc == kExitSkip ? "SKIPPED" : "FAILED");
  return rc;
}
