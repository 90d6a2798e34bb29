// rdma_cm_failures: every way an rdma_cm connect attempt can end without a
// connection, each a distinct outcome (the library falls back to TCP on all
// of them and counts them by reason), with the time each takes on this
// device, which decides how much a fallback costs:
//
//   reject          the server's application rejects with 40 bytes of
//                   private data -> kRejected (reason 28) + those bytes
//   no_listener     nothing listens on the port in rdma_cm -> kNoListener
//   listener_closed the server destroys its listener while our request is
//                   queued on its channel -> the request is answered
//                   (kRejected, kNoListener or kUnreachable), never hangs;
//                   the port can be listened on again
//   unused_address  an address on the subnet where no host answers -> our
//                   bound (kTimeout), or an address/route error; set
//                   VSOCK_TEST_CM_UNUSED_BOUND_MS to see the kernel's own
//   no_route        an address without a route -> kAddressError
//
// Every outcome must arrive within its bound; the program prints one
// "MEASURED" line per case (min / median / max over its rounds).
#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "cm_test_support.hpp"
#include "rdma/cm_connector.hpp"
#include "rdma/cm_listener.hpp"

namespace vsock::test {
namespace {

constexpr const char* kProgram = "rdma_cm_failures";
constexpr int kStepMs = 20000;
constexpr int kRounds = 5;
constexpr int kConnectTimeoutMs = 10000;  // cases that must end on their own well before it
constexpr int kUnusedTimeoutMs = 1000;    // cases that may need the connector's own bound
constexpr int kBoundSlackMs = 1000;       // allowed beyond a bound (emulated guest)
constexpr uint64_t kRequestSeed = 0x5245;
constexpr uint64_t kRejectSeed = 0x524a;
constexpr uint8_t kRejectBytes = 40;

using rdma::CmOutcome;

bool outcome_in(CmOutcome outcome, std::initializer_list<CmOutcome> allowed) {
  for (CmOutcome a : allowed)
    if (outcome == a) return true;
  return false;
}

// One attempt with cm_connect_blocking; prints it, records its time.
// Returns the result (outcome kError also for a failed start()).
rdma::CmConnectResult attempt(CmSide& side, const std::string& ip, uint16_t port, int timeout_ms, const char* label,
                              std::vector<double>* times) {
  rdma::CmConnectParams params;
  if (!make_address(ip, port, &params.destination)) {
    fprintf(stderr, "%s: bad address %s\n", kProgram, ip.c_str());
    rdma::CmConnectResult bad;
    bad.outcome = CmOutcome::kError;
    return bad;
  }
  params.timeout_ms = timeout_ms;
  fill_pattern(params.private_data, rdma::kCmMaxConnectPrivateData, kRequestSeed, 0);
  params.private_data_length = rdma::kCmMaxConnectPrivateData;
  double start = now_seconds();
  auto connector = rdma::cm_connect_blocking(side.channel, params, side.setup());
  double ms = elapsed_ms(start);
  rdma::CmConnectResult result;
  if (!connector) {
    result.outcome = CmOutcome::kError;
    result.error = connector.error();
  } else {
    result = connector.value().result();
  }
  if (times) times->push_back(ms);
  printf("%s: %s: %s:%u -> %s (stage %s, errno %d %s, reject reason %d, %zu bytes of private data) in %.2f ms\n",
         kProgram, label, ip.c_str(), port, rdma::cm_outcome_name(result.outcome),
         rdma::cm_connect_stage_name(result.stage), result.error, result.error ? strerror(result.error) : "",
         result.reject_reason, result.private_data.length, ms);
  if (ms > timeout_ms + kBoundSlackMs) {
    fprintf(stderr, "%s: FAILED: %s took %.0f ms, bound %d ms\n", kProgram, label, ms, timeout_ms);
    result.outcome = CmOutcome::kError;
  }
  return result;
}

// A port number nobody listens on in rdma_cm right now: one rdma_cm picked
// for a listener that is gone again.
uint16_t free_cm_port(CmSide& side, const std::string& ip) {
  sockaddr_storage address;
  if (!make_address(ip, 0, &address)) return 0;
  auto listener = rdma::CmListener::create(side.channel, reinterpret_cast<sockaddr*>(&address), 1);
  return listener ? listener.value().port() : 0;
}

// VSOCK_TEST_CM_UNUSED_BOUND_MS (e.g. 120000) shows what the kernel CM does
// on its own when nothing answers; the default keeps the test short.
int unused_bound_ms() {
  const char* text = getenv("VSOCK_TEST_CM_UNUSED_BOUND_MS");
  int bound = text ? atoi(text) : 0;
  return bound > 0 && bound <= 600000 ? bound : kUnusedTimeoutMs;
}

// Same /24, host 99 (98 if that is us): nothing answers there.
std::string unused_address(const std::string& ip) {
  const char* configured = getenv("VSOCK_TEST_RDMA_UNUSED_ADDR");
  if (configured && *configured) return configured;
  size_t dot = ip.rfind('.');
  if (dot == std::string::npos) return "";
  std::string base = ip.substr(0, dot + 1);
  return base + (ip.substr(dot + 1) == "99" ? "98" : "99");
}

bool check_no_resources(const char* who) {
  int ids = count_rdma_resources("cm_id");
  int qps = count_rdma_resources("qp");
  printf("%s: %s holds %d cm ids, %d QPs at the end\n", kProgram, who, ids, qps);
  if (ids > 0 || qps > 0) {
    fprintf(stderr, "%s: FAILED: %s leaked rdma resources\n", kProgram, who);
    return false;
  }
  return true;
}

sockaddr* as_sockaddr(sockaddr_storage& address) { return reinterpret_cast<sockaddr*>(&address); }

int server(int control) {
  CmSide side;
  int rc = open_cm_side(kProgram, &side);
  if (rc != 0) return rc;
  std::string ip = rdma_test_address();
  sockaddr_storage address;
  if (!make_address(ip, 0, &address)) return 1;

  {  // reject: answer every request with a reject carrying our bytes
    auto listener = rdma::CmListener::create(side.channel, as_sockaddr(address), 8);
    if (!listener) return 1;
    uint16_t port = listener.value().port();
    if (!send_all(control, &port, sizeof port, kStepMs)) return 1;
    uint8_t reject[kRejectBytes];
    fill_pattern(reject, kRejectBytes, kRejectSeed, 0);
    for (int round = 0; round < kRounds; ++round) {
      rdma::CmEvent request;
      if (!wait_cm_event(side.channel, nullptr, RDMA_CM_EVENT_CONNECT_REQUEST, kStepMs, &request)) return 1;
      bool intact = request.private_data.length >= rdma::kCmMaxConnectPrivateData &&
                    find_mismatch(request.private_data.bytes, rdma::kCmMaxConnectPrivateData, kRequestSeed, 0) ==
                        rdma::kCmMaxConnectPrivateData;
      if (!listener.value().reject(request, reject, kRejectBytes) || !intact) {
        fprintf(stderr, "%s: FAILED: request private data intact %d, or reject failed\n", kProgram, intact);
        return 1;
      }
    }
  }
  if (!barrier(control, kStepMs)) return 1;

  {  // listener_closed: destroy the listener with a request queued on the channel
    auto listener = rdma::CmListener::create(side.channel, as_sockaddr(address), 8);
    if (!listener) return 1;
    uint16_t port = listener.value().port();
    if (!send_all(control, &port, sizeof port, kStepMs)) return 1;
    pollfd pfd{side.channel.fd(), POLLIN, 0};
    if (poll(&pfd, 1, kStepMs) != 1) {
      fprintf(stderr, "%s: FAILED: the request never reached the server's channel\n", kProgram);
      return 1;
    }
    listener.value() = rdma::CmListener();  // the request is still queued, not taken
    auto stale = side.channel.next_event(0);
    if (stale) {
      fprintf(stderr, "%s: FAILED: %s still queued after its listener was destroyed\n", kProgram,
              rdma::cm_event_name(stale.value().type));
      return 1;
    }
    if (!barrier(control, kStepMs)) return 1;  // the client has its outcome
    sockaddr_storage same;
    if (!make_address(ip, port, &same)) return 1;
    auto again = rdma::CmListener::create(side.channel, as_sockaddr(same), 8);
    printf("%s: listener_closed: listening on port %u again: %s\n", kProgram, port, again ? "yes" : "no");
    if (!again) return 1;
  }
  if (!barrier(control, kStepMs)) return 1;
  // The client's single-process cases: at most 4 bounded attempts, 12 quick ones.
  if (!barrier(control, 4 * (unused_bound_ms() + kBoundSlackMs) + 60000)) return 1;
  return check_no_resources("server") ? 0 : 1;
}

int client(int control) {
  CmSide side;
  int rc = open_cm_side(kProgram, &side);
  if (rc != 0) return rc;
  std::string ip = rdma_test_address();
  bool ok = true;

  uint16_t port = 0;
  if (!recv_all(control, &port, sizeof port, kStepMs)) return 1;
  std::vector<double> times;
  for (int round = 0; round < kRounds; ++round) {
    rdma::CmConnectResult r = attempt(side, ip, port, kConnectTimeoutMs, "reject", &times);
    bool bytes_ok = r.private_data.length >= kRejectBytes &&
                    find_mismatch(r.private_data.bytes, kRejectBytes, kRejectSeed, 0) == kRejectBytes;
    for (size_t i = kRejectBytes; i < r.private_data.length; ++i) bytes_ok = bytes_ok && r.private_data.bytes[i] == 0;
    if (r.outcome != CmOutcome::kRejected || r.reject_reason != rdma::kCmRejectConsumerDefined || !bytes_ok) {
      fprintf(stderr, "%s: FAILED: reject: want rejected, reason 28 and the server's 40 bytes (bytes ok %d)\n",
              kProgram, bytes_ok);
      ok = false;
    }
  }
  printf("%s: MEASURED reject: %s\n", kProgram, summarize_ms(times).c_str());

  times.clear();
  for (int round = 0; round < kRounds; ++round) {
    uint16_t unused = free_cm_port(side, ip);
    rdma::CmConnectResult r = attempt(side, ip, unused, kConnectTimeoutMs, "no_listener", &times);
    if (unused == 0 || r.outcome != CmOutcome::kNoListener || r.reject_reason != rdma::kCmRejectInvalidServiceId) {
      fprintf(stderr, "%s: FAILED: no_listener: want no_listener (reject reason 8)\n", kProgram);
      ok = false;
    }
  }
  printf("%s: MEASURED no_listener: %s\n", kProgram, summarize_ms(times).c_str());
  if (!barrier(control, kStepMs)) return 1;

  if (!recv_all(control, &port, sizeof port, kStepMs)) return 1;
  times.clear();
  rdma::CmConnectResult closed = attempt(side, ip, port, kConnectTimeoutMs, "listener_closed", &times);
  if (!outcome_in(closed.outcome, {CmOutcome::kRejected, CmOutcome::kNoListener, CmOutcome::kUnreachable})) {
    fprintf(stderr, "%s: FAILED: listener_closed: want rejected, no_listener or unreachable\n", kProgram);
    ok = false;
  }
  size_t nonzero = 0;
  for (size_t i = 0; i < closed.private_data.length; ++i) nonzero += closed.private_data.bytes[i] != 0;
  printf("%s: MEASURED listener_closed: %s -> %s, reason %d, %zu bytes of private data (%zu not zero)\n", kProgram,
         summarize_ms(times).c_str(), rdma::cm_outcome_name(closed.outcome), closed.reject_reason,
         closed.private_data.length, nonzero);
  if (!barrier(control, kStepMs)) return 1;
  if (!barrier(control, kStepMs)) return 1;  // the server listens on that port again

  std::string unused = unused_address(ip);
  for (int bound : {unused_bound_ms(), 200}) {
    times.clear();
    CmOutcome outcome = CmOutcome::kPending;
    for (int round = 0; round < (bound > 5000 ? 1 : 3); ++round) {
      rdma::CmConnectResult r = attempt(side, unused, port, bound, "unused_address", &times);
      outcome = r.outcome;
      if (!outcome_in(r.outcome, {CmOutcome::kTimeout, CmOutcome::kAddressError, CmOutcome::kRouteError,
                                  CmOutcome::kUnreachable})) {
        fprintf(stderr, "%s: FAILED: unused_address: want timeout or an address/route error\n", kProgram);
        ok = false;
      }
    }
    printf("%s: MEASURED unused_address (bound %d ms): %s -> %s\n", kProgram, bound, summarize_ms(times).c_str(),
           rdma::cm_outcome_name(outcome));
  }

  times.clear();
  for (int round = 0; round < kRounds; ++round) {
    rdma::CmConnectResult r = attempt(side, "10.255.255.1", port, kUnusedTimeoutMs, "no_route", &times);
    if (r.outcome != CmOutcome::kAddressError && r.outcome != CmOutcome::kRouteError) {
      fprintf(stderr, "%s: FAILED: no_route: want address_error or route_error\n", kProgram);
      ok = false;
    }
  }
  printf("%s: MEASURED no_route: %s\n", kProgram, summarize_ms(times).c_str());

  if (!barrier(control, kStepMs)) return 1;
  if (!check_no_resources("client")) ok = false;
  if (ok) printf("%s: OK\n", kProgram);
  return ok ? 0 : 1;
}

int run() {
  if (rdma_test_address().empty()) {
    fprintf(stderr, "%s: SKIPPED: no RDMA address (RXE_VM_IPADDR or VSOCK_TEST_RDMA_ADDR)\n", kProgram);
    return kExitSkip;
  }
  return run_pair(server, client, 180 + 4 * unused_bound_ms() / 1000);
}

}  // namespace
}  // namespace vsock::test

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  return vsock::test::run();
}
