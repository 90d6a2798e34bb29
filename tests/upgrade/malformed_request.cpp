// malformed_request ADDR PORT [BOUND_MS]
//
// Sends hostile rdma_cm connect requests (RDMA_PS_TCP) to PORT on ADDR, where
// a TCP server runs under libvsock, whose library listens there for upgrade
// requests (docs/protocol.md section 1). Each request's private data is one
// of: nothing, random bytes, zeros, the right magic with an older version
// (1, before the token; 2, before positions; 3, before Bound's count), a
// truncated request, a bad family, nonzero padding in an IPv4 address, and a
// well-formed request naming a TCP connection that does not exist. Every
// request must be rejected, unreachable or unanswered within BOUND_MS
// (default 3000); none may be accepted. The caller then checks that the
// server is alive and still serves TCP clients (run_malformed.sh).
//
// malformed_request ADDR PORT BOUND_MS --forge CLIENT_PORT SOURCE_IP
//
// One well-formed request naming the live TCP connection ADDR:CLIENT_PORT ->
// ADDR:PORT (its 4-tuple, as `ss` shows it), sent from SOURCE_IP, another
// address of this host: another host trying to take the connection over.
// It must not be accepted (run_forged.sh checks the connection goes on).
//
// Links librdmacm directly and writes the request bytes by hand from the
// protocol document. Exit 0 pass, 1 fail, 77 no device / no rdma_cm route.
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kRequestSize = 56;

struct Case {
  std::string name;
  std::vector<uint8_t> data;
};

void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}

constexpr uint8_t kVersion = 4;  // docs/protocol.md

// A well-formed version-4 IPv4 UpgradeRequest, by hand from docs/protocol.md.
std::vector<uint8_t> well_formed(in_addr client_ip, uint16_t client_port, in_addr server_ip, uint16_t server_port) {
  std::vector<uint8_t> d(kRequestSize, 0);
  memcpy(&d[0], "VSK1", 4);
  d[4] = kVersion;
  d[5] = 4;  // family
  put16(&d[8], client_port);
  put16(&d[10], server_port);
  memcpy(&d[12], &client_ip, 4);  // already network order
  memcpy(&d[28], &server_ip, 4);
  for (int i = 0; i < 8; ++i) d[44 + i] = static_cast<uint8_t>(0xa5 ^ (i * 37));  // nonce
  return d;
}

std::vector<Case> hostile_cases(in_addr ip, uint16_t port) {
  std::vector<Case> cases;
  cases.push_back({"no private data", {}});
  std::vector<uint8_t> random(kRequestSize);
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (auto& b : random) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  cases.push_back({"random bytes", random});
  cases.push_back({"all zeros", std::vector<uint8_t>(kRequestSize, 0)});
  const uint16_t absent_port = 1;  // no TCP connection comes from port 1
  std::vector<uint8_t> v = well_formed(ip, absent_port, ip, port);
  v[4] = 1;
  cases.push_back({"right magic, version 1", v});
  v = well_formed(ip, absent_port, ip, port);
  v[4] = 2;  // the version before positions
  cases.push_back({"right magic, version 2", v});
  v = well_formed(ip, absent_port, ip, port);
  v[4] = 3;  // the version before Bound's count
  cases.push_back({"right magic, version 3", v});
  v = well_formed(ip, absent_port, ip, port);
  v.resize(20);
  cases.push_back({"truncated to 20 bytes", v});
  v = well_formed(ip, absent_port, ip, port);
  v[5] = 5;
  cases.push_back({"family 5", v});
  v = well_formed(ip, absent_port, ip, port);
  v[20] = 0xff;
  cases.push_back({"IPv4 with nonzero padding", v});
  cases.push_back({"well formed, no such TCP connection", well_formed(ip, absent_port, ip, port)});
  return cases;
}

// Waits up to `ms` for the next event on `channel`; nullptr on timeout.
rdma_cm_event* next_event(rdma_event_channel* channel, int ms) {
  pollfd p{channel->fd, POLLIN, 0};
  if (poll(&p, 1, ms) <= 0) return nullptr;
  rdma_cm_event* event = nullptr;
  return rdma_get_cm_event(channel, &event) == 0 ? event : nullptr;
}

// Waits for `want`; prints and returns false on anything else or timeout.
bool expect_event(rdma_event_channel* channel, rdma_cm_event_type want, int ms, const char* what) {
  rdma_cm_event* e = next_event(channel, ms);
  if (!e) {
    printf("  %s: no event within %d ms\n", what, ms);
    return false;
  }
  bool ok = e->event == want;
  if (!ok) printf("  %s: got %s (status %d)\n", what, rdma_event_str(e->event), e->status);
  rdma_ack_cm_event(e);
  return ok;
}

enum class Outcome { kRejected, kUnreachable, kNoAnswer, kAccepted, kSetupFailed };

// Resolves, creates a QP and connects with the case's private data; cleans up.
Outcome try_case(const Case& c, const sockaddr_in& dst, const sockaddr_in* src, int bound_ms, std::string* detail) {
  rdma_event_channel* channel = rdma_create_event_channel();
  if (!channel) return Outcome::kSetupFailed;
  fcntl(channel->fd, F_SETFL, fcntl(channel->fd, F_GETFL) | O_NONBLOCK);
  rdma_cm_id* id = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  Outcome outcome = Outcome::kSetupFailed;
  sockaddr_in to = dst;
  if (rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP) != 0) goto out;
  if (rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(const_cast<sockaddr_in*>(src)), reinterpret_cast<sockaddr*>(&to),
                        2000) != 0 ||
      !expect_event(channel, RDMA_CM_EVENT_ADDR_RESOLVED, 5000, "resolve address"))
    goto out;
  if (rdma_resolve_route(id, 2000) != 0 || !expect_event(channel, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000, "resolve route"))
    goto out;
  pd = ibv_alloc_pd(id->verbs);
  cq = pd ? ibv_create_cq(id->verbs, 8, nullptr, nullptr, 0) : nullptr;
  if (!cq) goto out;
  {
    ibv_qp_init_attr attr{};
    attr.send_cq = attr.recv_cq = cq;
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    if (rdma_create_qp(id, pd, &attr) != 0) goto out;
    rdma_conn_param param{};
    param.private_data = c.data.empty() ? nullptr : c.data.data();
    param.private_data_len = static_cast<uint8_t>(c.data.size());
    param.responder_resources = param.initiator_depth = 1;
    param.retry_count = 3;
    param.rnr_retry_count = 3;
    if (rdma_connect(id, &param) != 0) {
      *detail = std::string("rdma_connect: ") + strerror(errno);
      outcome = Outcome::kUnreachable;
      goto out;
    }
    rdma_cm_event* e = next_event(channel, bound_ms);
    if (!e) {
      outcome = Outcome::kNoAnswer;
    } else {
      *detail = std::string(rdma_event_str(e->event)) + ", status " + std::to_string(e->status);
      switch (e->event) {
        case RDMA_CM_EVENT_REJECTED: outcome = Outcome::kRejected; break;
        case RDMA_CM_EVENT_ESTABLISHED: outcome = Outcome::kAccepted; break;
        case RDMA_CM_EVENT_CONNECT_RESPONSE: outcome = Outcome::kAccepted; break;
        default: outcome = Outcome::kUnreachable; break;
      }
      rdma_ack_cm_event(e);
    }
    if (outcome == Outcome::kAccepted) {
      rdma_disconnect(id);
      next_event(channel, 2000);  // DISCONNECTED, if it comes
    }
    rdma_destroy_qp(id);
  }
out:
  if (cq) ibv_destroy_cq(cq);
  if (pd) ibv_dealloc_pd(pd);
  if (id) rdma_destroy_id(id);
  rdma_destroy_event_channel(channel);
  return outcome;
}

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kRejected: return "rejected";
    case Outcome::kUnreachable: return "unreachable";
    case Outcome::kNoAnswer: return "no answer within the bound";
    case Outcome::kAccepted: return "ACCEPTED";
    case Outcome::kSetupFailed: return "setup failed";
  }
  return "?";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s ADDR PORT [BOUND_MS]\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(static_cast<uint16_t>(atoi(argv[2])));
  if (inet_pton(AF_INET, argv[1], &dst.sin_addr) != 1) {
    fprintf(stderr, "bad address %s\n", argv[1]);
    return 2;
  }
  const int bound_ms = argc > 3 ? atoi(argv[3]) : 3000;
  std::vector<Case> cases;
  sockaddr_in source{};
  const sockaddr_in* from = nullptr;
  if (argc == 7 && strcmp(argv[4], "--forge") == 0) {
    source.sin_family = AF_INET;
    if (inet_pton(AF_INET, argv[6], &source.sin_addr) != 1) {
      fprintf(stderr, "bad source address %s\n", argv[6]);
      return 2;
    }
    from = &source;
    const uint16_t victim_port = static_cast<uint16_t>(atoi(argv[5]));
    cases.push_back({std::string("forged, for the live connection from port ") + argv[5],
                     well_formed(dst.sin_addr, victim_port, dst.sin_addr, ntohs(dst.sin_port))});
  } else {
    cases = hostile_cases(dst.sin_addr, ntohs(dst.sin_port));
  }
  int failures = 0, tried = 0;
  for (const Case& c : cases) {
    std::string detail;
    auto start = std::chrono::steady_clock::now();
    Outcome o = try_case(c, dst, from, bound_ms, &detail);
    long ms = static_cast<long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count());
    printf("%-40s %zu bytes: %s%s%s (%ld ms)\n", c.name.c_str(), c.data.size(), outcome_name(o),
           detail.empty() ? "" : ": ", detail.c_str(), ms);
    if (o == Outcome::kSetupFailed && tried == 0) {
      printf("SKIPPED: cannot reach %s with rdma_cm (no device or route)\n", argv[1]);
      return 77;
    }
    ++tried;
    if (o == Outcome::kSetupFailed) ++failures;
    if (o == Outcome::kAccepted) ++failures;
  }
  if (failures) {
    printf("FAIL: %d hostile request(s) accepted or not sent\n", failures);
    return 1;
  }
  printf("PASS: no hostile request was accepted\n");
  return 0;
}
