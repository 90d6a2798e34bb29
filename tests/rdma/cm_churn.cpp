// rdma_cm_churn: many short rdma_cm connections in a row between two
// processes, the pattern of a server that sees many short TCP connections.
// Each round: connect (56-byte request, 32-byte accept), one SEND through
// the QP, a disconnect started by the client in even rounds and by the
// server in odd ones, both sides see DISCONNECTED, both destroy. Afterwards
// neither process may hold a cm id or QP beyond its listener, nor an fd
// more than before. Prints the connect latency on both sides.
//
// Then the asynchronous use: the client starts kParallel connectors at once
// on its one event channel and drives them all from that channel (events
// routed by owns(), as the library's progress engine will); the server
// accepts them as they come, routing events between its listener and its
// connections the same way; the client disconnects them all.
//
// Usage: rdma_cm_churn [ROUNDS]  (default 50)
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "cm_test_support.hpp"
#include "rdma/cm_connection.hpp"
#include "rdma/cm_connector.hpp"
#include "rdma/cm_listener.hpp"

namespace vsock::test {
namespace {

constexpr const char* kProgram = "rdma_cm_churn";
constexpr int kStepMs = 20000;
constexpr int kConnectTimeoutMs = 10000;
constexpr size_t kAcceptBytes = 32;
constexpr int kParallel = 8;

// Events of `connection` until it reaches `state` (others are a failure:
// the rounds are serialized, nothing else may be on the channel).
bool drive(CmSide& side, rdma::CmConnection& connection, rdma::CmConnectionState state, const char* what) {
  Deadline deadline(kStepMs / 1000.0);
  for (int seen = 0; seen < 16 && connection.state() != state; ++seen) {
    rdma::CmEvent event;
    if (!next_cm_event(side.channel, deadline.remaining_ms(kStepMs), &event, what)) return false;
    if (!connection.owns(event)) {
      fprintf(stderr, "%s: FAILED: unexpected %s while waiting for %s\n", kProgram, rdma::cm_event_name(event.type), what);
      return false;
    }
    connection.on_event(event);
  }
  if (connection.state() == state) return true;
  fprintf(stderr, "%s: FAILED: %s: connection is %s\n", kProgram, what, rdma::cm_connection_state_name(connection.state()));
  return false;
}

bool wait_one(CmSide& side, ibv_wc_opcode opcode, const char* what) {
  Deadline deadline(kStepMs / 1000.0);
  ibv_wc wc{};
  if (!wait_completion(side.cq, &wc, deadline, what)) return false;
  if (wc.opcode == opcode) return true;
  fprintf(stderr, "%s: FAILED: %s: opcode %d\n", kProgram, what, wc.opcode);
  return false;
}

// Ends a round: `active` disconnects, the other side waits for the peer.
bool end_round(CmSide& side, rdma::CmConnection& connection, bool active) {
  if (active && !connection.disconnect()) return false;
  return drive(side, connection, rdma::CmConnectionState::kDisconnected, "DISCONNECTED");
}

bool report_resources(const char* who, int max_ids) {
  int ids = count_rdma_resources("cm_id");
  int qps = count_rdma_resources("qp");
  printf("%s: %s holds %d cm ids, %d QPs after the rounds\n", kProgram, who, ids, qps);
  if (ids > max_ids || qps > 0) {
    fprintf(stderr, "%s: FAILED: %s leaked rdma resources\n", kProgram, who);
    return false;
  }
  return true;
}

// The connection in `connections` that owns `event`, or nullptr.
rdma::CmConnection* owner_of(std::vector<rdma::CmConnection>& connections, const rdma::CmEvent& event) {
  for (rdma::CmConnection& connection : connections)
    if (connection.owns(event)) return &connection;
  return nullptr;
}

int count_in_state(const std::vector<rdma::CmConnection>& connections, rdma::CmConnectionState state) {
  int n = 0;
  for (const rdma::CmConnection& connection : connections) n += connection.state() == state;
  return n;
}

// Routes events to `connections` until all are in `state`.
bool drive_all(CmSide& side, std::vector<rdma::CmConnection>& connections, rdma::CmConnectionState state,
               const char* what) {
  Deadline deadline(kStepMs / 1000.0);
  for (int seen = 0; seen < 16 * kParallel; ++seen) {
    if (count_in_state(connections, state) == static_cast<int>(connections.size())) return true;
    rdma::CmEvent event;
    if (!next_cm_event(side.channel, deadline.remaining_ms(kStepMs), &event, what)) return false;
    rdma::CmConnection* owner = owner_of(connections, event);
    if (owner == nullptr) {
      fprintf(stderr, "%s: FAILED: %s of no connection while waiting for %s\n", kProgram,
              rdma::cm_event_name(event.type), what);
      return false;
    }
    owner->on_event(event);
  }
  fprintf(stderr, "%s: FAILED: %s: %d of %zu there\n", kProgram, what, count_in_state(connections, state),
          connections.size());
  return false;
}

// Accepts kParallel requests as they come; events of the listener and of
// the connections accepted so far arrive mixed on one channel.
bool server_parallel(CmSide& side, rdma::CmListener& listener, int control) {
  std::vector<rdma::CmConnection> connections;
  connections.reserve(kParallel);
  Deadline deadline(kStepMs / 1000.0);
  for (int seen = 0; seen < 16 * kParallel; ++seen) {
    if (count_in_state(connections, rdma::CmConnectionState::kConnected) == kParallel) break;
    rdma::CmEvent event;
    if (!next_cm_event(side.channel, deadline.remaining_ms(kStepMs), &event, "parallel requests")) return false;
    if (listener.owns(event) && event.type == RDMA_CM_EVENT_CONNECT_REQUEST) {
      uint8_t reply[kAcceptBytes];
      memcpy(reply, event.private_data.bytes, kAcceptBytes);
      auto accepted = listener.accept(event, side.setup(), reply, sizeof reply);
      if (!accepted) return false;
      connections.push_back(std::move(accepted.value()));
    } else if (rdma::CmConnection* owner = owner_of(connections, event)) {
      owner->on_event(event);
    } else {
      fprintf(stderr, "%s: FAILED: stray %s\n", kProgram, rdma::cm_event_name(event.type));
      return false;
    }
  }
  if (count_in_state(connections, rdma::CmConnectionState::kConnected) != kParallel) {
    fprintf(stderr, "%s: FAILED: server has %d parallel connections\n", kProgram,
            count_in_state(connections, rdma::CmConnectionState::kConnected));
    return false;
  }
  if (!barrier(control, kStepMs)) return false;
  return drive_all(side, connections, rdma::CmConnectionState::kDisconnected, "parallel DISCONNECTED") &&
         barrier(control, kStepMs);
}

// Starts kParallel connectors at once and drives them from one channel.
bool client_parallel(CmSide& side, const rdma::CmConnectParams& base, int control) {
  std::vector<rdma::CmConnector> connectors;
  double start = now_seconds();
  for (int i = 0; i < kParallel; ++i) {
    rdma::CmConnectParams params = base;
    fill_pattern(params.private_data, rdma::kCmMaxConnectPrivateData, 0x5041, static_cast<uint64_t>(i) << 8);
    auto started = rdma::CmConnector::start(side.channel, params, side.setup());
    if (!started) return false;
    connectors.push_back(std::move(started.value()));
  }
  auto pending = [&] {
    int n = 0;
    for (const rdma::CmConnector& c : connectors) n += c.outcome() == rdma::CmOutcome::kPending;
    return n;
  };
  for (int seen = 0; seen < 64 * kParallel && pending() > 0; ++seen) {
    // Sleep until the earliest deadline among those still pending.
    int wait = kConnectTimeoutMs;
    for (const rdma::CmConnector& c : connectors)
      if (c.outcome() == rdma::CmOutcome::kPending && c.remaining_ms() < wait) wait = c.remaining_ms();
    core::Result<rdma::CmEvent> event = side.channel.next_event(wait);
    if (!event && event.error() != EAGAIN && event.error() != EINTR) return false;
    for (rdma::CmConnector& c : connectors) {
      if (event && c.owns(event.value())) c.on_event(event.value());
      c.check_deadline();
    }
  }
  std::vector<rdma::CmConnection> connections;
  for (int i = 0; i < kParallel; ++i) {
    const rdma::CmConnectResult& result = connectors[i].result();
    uint8_t expected[kAcceptBytes];
    fill_pattern(expected, kAcceptBytes, 0x5041, static_cast<uint64_t>(i) << 8);
    if (result.outcome != rdma::CmOutcome::kEstablished || memcmp(result.private_data.bytes, expected, kAcceptBytes) != 0) {
      fprintf(stderr, "%s: FAILED: parallel connector %d: %s (stage %s), or a reply meant for another\n", kProgram, i,
              rdma::cm_outcome_name(result.outcome), rdma::cm_connect_stage_name(result.stage));
      return false;
    }
    connections.push_back(connectors[i].take_connection());
  }
  printf("%s: MEASURED %d parallel connects on one channel: all established after %.1f ms\n", kProgram, kParallel,
         elapsed_ms(start));
  if (!barrier(control, kStepMs)) return false;
  for (rdma::CmConnection& connection : connections)
    if (!connection.disconnect()) return false;
  return drive_all(side, connections, rdma::CmConnectionState::kDisconnected, "parallel DISCONNECTED") &&
         barrier(control, kStepMs);
}

int server(int control, int rounds) {
  CmSide side;
  int rc = open_cm_side(kProgram, &side);
  if (rc != 0) return rc;
  sockaddr_storage address;
  if (!make_address(rdma_test_address(), 0, &address)) return 1;
  auto listener = rdma::CmListener::create(side.channel, reinterpret_cast<sockaddr*>(&address), 16);
  if (!listener) return 1;
  uint16_t port = listener.value().port();
  if (!send_all(control, &port, sizeof port, kStepMs)) return 1;
  auto buffer = rdma::MemoryRegion::allocate(side.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
  if (!buffer) return 1;

  std::vector<double> times;
  for (int round = 0; round < rounds; ++round) {
    rdma::CmEvent request;
    if (!wait_cm_event(side.channel, nullptr, RDMA_CM_EVENT_CONNECT_REQUEST, kStepMs, &request)) return 1;
    double start = now_seconds();
    auto prepared = listener.value().prepare(request, side.setup());
    if (!prepared) return 1;
    rdma::CmConnection connection = std::move(prepared.value());
    ibv_sge sge{buffer.value().address(), 64, buffer.value().lkey()};
    ibv_recv_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    uint8_t reply[kAcceptBytes] = {};
    memcpy(reply, request.private_data.bytes, kAcceptBytes);  // echo: the client checks it
    if (!connection.qp().post_recv(&wr) || !connection.accept(reply, sizeof reply) ||
        !drive(side, connection, rdma::CmConnectionState::kConnected, "ESTABLISHED"))
      return 1;
    times.push_back(elapsed_ms(start));
    // Disconnect only once the client has its SEND's completion: rxe hands
    // us the receive before it sends the ACK, and a QP moved to ERROR in
    // between never sends it (the client would retry until it sees our
    // DISCONNECTED, which a test blocked on its CQ does not look at).
    if (!wait_one(side, IBV_WC_RECV, "the client's SEND") || !barrier(control, kStepMs)) return 1;
    if (!end_round(side, connection, round % 2 == 1)) return 1;
    connection = rdma::CmConnection();
    if (!barrier(control, kStepMs)) return 1;
  }
  printf("%s: MEASURED server request -> ESTABLISHED: %s\n", kProgram, summarize_ms(times).c_str());
  if (!server_parallel(side, listener.value(), control)) return 1;
  bool ok = report_resources("server (listener still open)", 1);
  listener.value() = rdma::CmListener();
  return ok && report_resources("server (listener closed)", 0) ? 0 : 1;
}

int client(int control, int rounds) {
  CmSide side;
  int rc = open_cm_side(kProgram, &side);
  if (rc != 0) return rc;
  std::string ip = rdma_test_address();
  uint16_t port = 0;
  if (!recv_all(control, &port, sizeof port, kStepMs)) return 1;
  auto buffer = rdma::MemoryRegion::allocate(side.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
  if (!buffer) return 1;
  // Counted after the first round: librdmacm opens its own context of the
  // device (two fds) on the first address resolution, once per process.
  int fds_before = -1;

  rdma::CmConnectParams params;
  if (!make_address(ip, port, &params.destination)) return 1;
  params.timeout_ms = kConnectTimeoutMs;
  params.private_data_length = rdma::kCmMaxConnectPrivateData;
  std::vector<double> times;
  for (int round = 0; round < rounds; ++round) {
    fill_pattern(params.private_data, rdma::kCmMaxConnectPrivateData, 0x4348, static_cast<uint64_t>(round) << 8);
    double start = now_seconds();
    auto attempt = rdma::cm_connect_blocking(side.channel, params, side.setup());
    if (!attempt) return 1;
    const rdma::CmConnectResult& result = attempt.value().result();
    if (result.outcome != rdma::CmOutcome::kEstablished ||
        memcmp(result.private_data.bytes, params.private_data, kAcceptBytes) != 0) {
      fprintf(stderr, "%s: FAILED: round %d: outcome %s (stage %s, errno %d), or the echo differs\n", kProgram, round,
              rdma::cm_outcome_name(result.outcome), rdma::cm_connect_stage_name(result.stage), result.error);
      return 1;
    }
    times.push_back(elapsed_ms(start));
    rdma::CmConnection connection = attempt.value().take_connection();
    ibv_sge sge{buffer.value().address(), 8, buffer.value().lkey()};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (!connection.qp().post_send(&wr) || !wait_one(side, IBV_WC_SEND, "our SEND") || !barrier(control, kStepMs))
      return 1;
    if (!end_round(side, connection, round % 2 == 0)) return 1;
    connection = rdma::CmConnection();
    if (!barrier(control, kStepMs)) return 1;
    if (round == 0) fds_before = count_open_fds();
  }
  printf("%s: MEASURED client start -> established: %s\n", kProgram, summarize_ms(times).c_str());
  if (!client_parallel(side, params, control)) return 1;
  int fds_after = count_open_fds();
  printf("%s: client fds: %d after the first round, %d after the last\n", kProgram, fds_before, fds_after);
  if (!report_resources("client", 0) || fds_after != fds_before) return 1;
  printf("%s: OK: %d sequential connections, %d parallel\n", kProgram, rounds, kParallel);
  return 0;
}

}  // namespace
}  // namespace vsock::test

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  int rounds = argc > 1 ? atoi(argv[1]) : 50;
  if (rounds < 1 || rounds > 100000) {
    fprintf(stderr, "usage: %s [ROUNDS (1..100000)]\n", argv[0]);
    return 2;
  }
  if (vsock::test::rdma_test_address().empty()) {
    fprintf(stderr, "%s: SKIPPED: no RDMA address (RXE_VM_IPADDR or VSOCK_TEST_RDMA_ADDR)\n", argv[0]);
    return vsock::test::kExitSkip;
  }
  using vsock::test::client;
  using vsock::test::server;
  return vsock::test::run_pair([&](int fd) { return server(fd, rounds); }, [&](int fd) { return client(fd, rounds); },
                               240);
}
