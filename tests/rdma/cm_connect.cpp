// rdma_cm_connect: the rdma_cm side band end to end, in two processes on
// the Soft-RoCE address. The server listens on TCP port P and, on the same
// port number, in rdma_cm (RDMA_PS_TCP); the client connects over TCP
// first, then sends an rdma_cm connect request with 56 bytes of private
// data, which the server checks byte for byte before accepting with a
// 32-byte reply in UpgradeAccept's layout (its ring's address and rkey).
// The client checks the reply, then the connected QP carries an RDMA WRITE
// WITH IMMEDIATE into the server's ring and a SEND, the server SENDs back,
// and the client disconnects: both sides must see DISCONNECTED (the
// server's pending receive flushed by it), and hold no cm id or QP after.
// Prints the connect and disconnect times.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "cm_test_support.hpp"
#include "rdma/cm_connection.hpp"
#include "rdma/cm_connector.hpp"
#include "rdma/cm_listener.hpp"

namespace vsock::test {
namespace {

constexpr const char* kProgram = "rdma_cm_connect";
constexpr int kStepMs = 20000;          // any one wait; the guest is emulated
constexpr int kConnectTimeoutMs = 10000;  // the connector's own bound
constexpr uint64_t kRequestSeed = 0x5245;
constexpr uint64_t kWriteSeed = 0x5752;
constexpr uint64_t kSendSeed = 0x5344;
constexpr uint64_t kReplySeed = 0x5250;
constexpr uint32_t kWriteBytes = 1024;
constexpr uint32_t kSendBytes = 200;
constexpr uint32_t kReplyBytes = 100;
constexpr uint32_t kImmediate = 0xC0FFEE;
constexpr size_t kAcceptBytes = 32;
constexpr size_t kNonceOffset = 44;  // UpgradeRequest's nonce

void put_be64(uint8_t* out, uint64_t value) {
  for (int i = 7; i >= 0; --i, value >>= 8) out[i] = static_cast<uint8_t>(value);
}
void put_be32(uint8_t* out, uint32_t value) {
  for (int i = 3; i >= 0; --i, value >>= 8) out[i] = static_cast<uint8_t>(value);
}
uint64_t get_be(const uint8_t* in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | in[i];
  return value;
}

bool post_recv(rdma::RcQueuePair& qp, const rdma::MemoryRegion& buffer, uint64_t wr_id) {
  ibv_sge sge{buffer.address(), static_cast<uint32_t>(buffer.size()), buffer.lkey()};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return qp.post_recv(&wr).has_value();
}

bool post_send(rdma::RcQueuePair& qp, const rdma::MemoryRegion& buffer, uint32_t offset, uint32_t length,
               ibv_wr_opcode opcode, uint64_t remote_address, uint32_t rkey, uint64_t wr_id) {
  ibv_sge sge{buffer.address() + offset, length, buffer.lkey()};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
    wr.imm_data = htonl(kImmediate);
    wr.wr.rdma.remote_addr = remote_address;
    wr.wr.rdma.rkey = rkey;
  }
  return qp.post_send(&wr).has_value();
}

// Takes the next completion and checks its opcode and length.
bool expect_completion(CmSide& side, ibv_wc_opcode opcode, uint32_t byte_len, ibv_wc* wc, const char* what) {
  Deadline deadline(kStepMs / 1000.0);
  if (!wait_completion(side.cq, wc, deadline, what)) return false;
  if (wc->opcode != opcode || ((opcode & IBV_WC_RECV) && wc->byte_len != byte_len)) {
    fprintf(stderr, "%s: FAILED: %s: opcode %d (want %d), byte_len %u (want %u)\n", kProgram, what, wc->opcode,
            opcode, wc->byte_len, byte_len);
    return false;
  }
  return true;
}

// Takes the next completion, whatever its status (wait_completion treats
// an error status as a failure); false on timeout.
bool wait_completion_status(rdma::CompletionQueue& cq, ibv_wc* out, const Deadline& deadline) {
  for (int polls = 0; polls < 1000000; ++polls) {
    core::Result<int> n = cq.poll(out, 1);
    if (!n) return false;
    if (n.value() == 1) return true;
    if (deadline.expired()) return false;
    usleep(1000);
  }
  return false;
}

// Processes events of `connection` until it reaches `state`.
bool drive_connection(CmSide& side, rdma::CmConnection& connection, rdma::CmConnectionState state, const char* what) {
  Deadline deadline(kStepMs / 1000.0);
  for (int seen = 0; seen < 16 && connection.state() != state; ++seen) {
    rdma::CmEvent event;
    if (!next_cm_event(side.channel, deadline.remaining_ms(kStepMs), &event, what)) return false;
    if (!connection.owns(event)) {
      fprintf(stderr, "  (%s of another id while waiting for %s)\n", rdma::cm_event_name(event.type), what);
      continue;
    }
    connection.on_event(event);
  }
  if (connection.state() == state) return true;
  fprintf(stderr, "%s: FAILED: %s: connection is %s\n", kProgram, what, rdma::cm_connection_state_name(connection.state()));
  return false;
}

bool check_no_resources(const char* who) {
  int ids = count_rdma_resources("cm_id");
  int qps = count_rdma_resources("qp");
  printf("%s: %s holds %d cm ids, %d QPs after teardown\n", kProgram, who, ids, qps);
  if (ids > 0 || qps > 0) {
    fprintf(stderr, "%s: FAILED: %s leaked rdma resources\n", kProgram, who);
    return false;
  }
  return true;
}

int server(int control) {
  CmSide side;
  int rc = open_cm_side(kProgram, &side);
  if (rc != 0) return rc;
  std::string ip = rdma_test_address();
  auto ring = rdma::MemoryRegion::allocate(side.pd, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  auto recv_buffer = rdma::MemoryRegion::allocate(side.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
  auto send_buffer = rdma::MemoryRegion::allocate(side.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
  if (!ring || !recv_buffer || !send_buffer) return 1;

  // The TCP listener first, on a port the kernel picks; then rdma_cm on the
  // same port number, as the library will do for a listening socket.
  sockaddr_storage address;
  if (!make_address(ip, 0, &address)) return 1;
  int tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t length = sizeof address;
  if (tcp < 0 || bind(tcp, reinterpret_cast<sockaddr*>(&address), sizeof(sockaddr_in)) != 0 || listen(tcp, 8) != 0 ||
      getsockname(tcp, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    perror("server: TCP listener");
    return 1;
  }
  uint16_t port = ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
  auto listener = rdma::CmListener::create(side.channel, reinterpret_cast<sockaddr*>(&address), 8);
  if (!listener) return 1;
  if (listener.value().port() != port) {
    fprintf(stderr, "%s: FAILED: rdma_cm listener on port %u, TCP on %u\n", kProgram, listener.value().port(), port);
    return 1;
  }
  printf("%s: server: TCP and rdma_cm listening on %s port %u\n", kProgram, ip.c_str(), port);
  if (!send_all(control, &port, sizeof port, kStepMs)) return 1;

  pollfd pfd{tcp, POLLIN, 0};
  int accepted = poll(&pfd, 1, kStepMs) == 1 ? accept4(tcp, nullptr, nullptr, SOCK_CLOEXEC) : -1;
  if (accepted < 0) {
    fprintf(stderr, "%s: FAILED: no TCP connection\n", kProgram);
    return 1;
  }

  rdma::CmEvent request;
  if (!wait_cm_event(side.channel, nullptr, RDMA_CM_EVENT_CONNECT_REQUEST, kStepMs, &request)) return 1;
  double request_time = now_seconds();
  if (!listener.value().owns(request)) return 1;
  printf("%s: server: request carries %zu bytes of private data\n", kProgram, request.private_data.length);
  if (request.private_data.length < rdma::kCmMaxConnectPrivateData ||
      find_mismatch(request.private_data.bytes, rdma::kCmMaxConnectPrivateData, kRequestSeed, 0) !=
          rdma::kCmMaxConnectPrivateData) {
    fprintf(stderr, "%s: FAILED: the request's private data differs from what the client sent\n", kProgram);
    listener.value().reject(request, nullptr, 0);
    return 1;
  }

  // Two steps, so that the receives are posted before the client can send.
  auto prepared = listener.value().prepare(request, side.setup());
  if (!prepared) return 1;
  rdma::CmConnection connection = std::move(prepared.value());
  if (!post_recv(connection.qp(), recv_buffer.value(), 1) || !post_recv(connection.qp(), recv_buffer.value(), 2))
    return 1;
  uint8_t reply[kAcceptBytes] = {};
  memcpy(reply, "VSK1", 4);
  reply[4] = 1;
  memcpy(reply + 8, request.private_data.bytes + kNonceOffset, 8);
  put_be64(reply + 16, ring.value().address());
  put_be32(reply + 24, ring.value().rkey());
  put_be32(reply + 28, static_cast<uint32_t>(ring.value().size()));
  if (!connection.accept(reply, sizeof reply)) return 1;
  if (!drive_connection(side, connection, rdma::CmConnectionState::kConnected, "ESTABLISHED")) return 1;
  printf("%s: server: request to ESTABLISHED in %.2f ms\n", kProgram, elapsed_ms(request_time));

  ibv_wc wc{};
  if (!expect_completion(side, IBV_WC_RECV_RDMA_WITH_IMM, kWriteBytes, &wc, "the WRITE WITH IMM")) return 1;
  if (!(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != kImmediate ||
      find_mismatch(ring.value().data(), kWriteBytes, kWriteSeed, 0) != kWriteBytes) {
    fprintf(stderr, "%s: FAILED: WRITE WITH IMM: immediate 0x%x or ring bytes wrong\n", kProgram, ntohl(wc.imm_data));
    return 1;
  }
  if (!expect_completion(side, IBV_WC_RECV, kSendBytes, &wc, "the SEND") ||
      find_mismatch(recv_buffer.value().data(), kSendBytes, kSendSeed, 0) != kSendBytes) {
    fprintf(stderr, "%s: FAILED: SEND bytes wrong\n", kProgram);
    return 1;
  }
  fill_pattern(send_buffer.value().data(), kReplyBytes, kReplySeed, 0);
  if (!post_send(connection.qp(), send_buffer.value(), 0, kReplyBytes, IBV_WR_SEND, 0, 0, 3) ||
      !expect_completion(side, IBV_WC_SEND, 0, &wc, "the reply SEND"))
    return 1;
  printf("%s: server: WRITE WITH IMM (%u B) and SEND (%u B) received and verified\n", kProgram, kWriteBytes, kSendBytes);
  // Our reply's completion is in: the client may disconnect now. (Sooner,
  // and its QP could go to ERROR between taking our SEND and ACKing it.)
  if (!barrier(control, kStepMs)) return 1;

  // A receive the client will never satisfy: the DISCONNECTED event must
  // flush it (the QP goes to ERROR), so nothing waits on a dead connection.
  if (!post_recv(connection.qp(), recv_buffer.value(), 4)) return 1;
  // The client disconnects; we answer and see DISCONNECTED.
  if (!drive_connection(side, connection, rdma::CmConnectionState::kDisconnected, "DISCONNECTED")) return 1;
  Deadline flush_deadline(kStepMs / 1000.0);
  if (!wait_completion_status(side.cq, &wc, flush_deadline) || wc.wr_id != 4 || wc.status != IBV_WC_WR_FLUSH_ERR) {
    fprintf(stderr, "%s: FAILED: the pending receive was not flushed (wr_id %llu, status %s)\n", kProgram,
            static_cast<unsigned long long>(wc.wr_id), ibv_wc_status_str(wc.status));
    return 1;
  }
  printf("%s: server: DISCONNECTED seen, pending receive flushed\n", kProgram);
  connection = rdma::CmConnection();
  listener.value() = rdma::CmListener();
  close(accepted);
  close(tcp);
  if (!barrier(control, kStepMs)) return 1;  // the client has torn down too
  return check_no_resources("server") ? 0 : 1;
}

int client(int control) {
  CmSide side;
  int rc = open_cm_side(kProgram, &side);
  if (rc != 0) return rc;
  std::string ip = rdma_test_address();
  auto recv_buffer = rdma::MemoryRegion::allocate(side.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
  auto send_buffer = rdma::MemoryRegion::allocate(side.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
  if (!recv_buffer || !send_buffer) return 1;
  uint16_t port = 0;
  if (!recv_all(control, &port, sizeof port, kStepMs)) return 1;

  // The kernel handshake comes first (DESIGN decision 2).
  sockaddr_storage destination, source;
  socklen_t source_length = sizeof source;
  if (!make_address(ip, port, &destination)) return 1;
  int tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (tcp < 0 || connect(tcp, reinterpret_cast<sockaddr*>(&destination), sizeof(sockaddr_in)) != 0 ||
      getsockname(tcp, reinterpret_cast<sockaddr*>(&source), &source_length) != 0) {
    perror("client: TCP connect");
    return 1;
  }

  rdma::CmConnectParams params;
  params.destination = destination;
  params.source = source;  // as the library will: the TCP socket's own address, port and all
  params.timeout_ms = kConnectTimeoutMs;
  fill_pattern(params.private_data, rdma::kCmMaxConnectPrivateData, kRequestSeed, 0);
  params.private_data_length = rdma::kCmMaxConnectPrivateData;
  double start = now_seconds();
  auto attempt = rdma::cm_connect_blocking(side.channel, params, side.setup());
  if (!attempt) return 1;
  rdma::CmConnector& connector = attempt.value();
  double connect_ms = elapsed_ms(start);
  const rdma::CmConnectResult& result = connector.result();
  printf("%s: client: outcome %s after %.2f ms (56-byte request, %zu bytes of accept private data)\n", kProgram,
         rdma::cm_outcome_name(result.outcome), connect_ms, result.private_data.length);
  if (result.outcome != rdma::CmOutcome::kEstablished) {
    fprintf(stderr, "%s: FAILED: outcome %s (stage %s, errno %d, reject reason %d)\n", kProgram,
            rdma::cm_outcome_name(result.outcome), rdma::cm_connect_stage_name(result.stage), result.error,
            result.reject_reason);
    return 1;
  }
  const uint8_t* reply = result.private_data.bytes;
  bool padding_zero = true;
  for (size_t i = kAcceptBytes; i < result.private_data.length; ++i) padding_zero = padding_zero && reply[i] == 0;
  if (result.private_data.length < kAcceptBytes || memcmp(reply, "VSK1", 4) != 0 || reply[4] != 1 ||
      memcmp(reply + 8, params.private_data + kNonceOffset, 8) != 0 || !padding_zero) {
    fprintf(stderr, "%s: FAILED: the accept's private data is not the server's reply\n", kProgram);
    return 1;
  }
  uint64_t ring_address = get_be(reply + 16, 8);
  uint32_t ring_rkey = static_cast<uint32_t>(get_be(reply + 24, 4));
  uint32_t ring_size = static_cast<uint32_t>(get_be(reply + 28, 4));
  if (ring_size < kWriteBytes) return 1;

  rdma::CmConnection connection = connector.take_connection();
  if (connection.state() != rdma::CmConnectionState::kConnected) return 1;
  // The leak check below means something only if the count sees live ones.
  int live_ids = count_rdma_resources("cm_id"), live_qps = count_rdma_resources("qp");
  printf("%s: client: while connected: %d cm ids, %d QPs\n", kProgram, live_ids, live_qps);
  if (live_ids == 0 || live_qps == 0) {
    fprintf(stderr, "%s: FAILED: `rdma resource show` does not see this process's id and QP\n", kProgram);
    return 1;
  }
  if (!post_recv(connection.qp(), recv_buffer.value(), 1)) return 1;
  fill_pattern(send_buffer.value().data(), kWriteBytes, kWriteSeed, 0);
  fill_pattern(send_buffer.value().data() + 2048, kSendBytes, kSendSeed, 0);
  // Three completions share the CQ; the receive may overtake the sends'.
  if (!post_send(connection.qp(), send_buffer.value(), 0, kWriteBytes, IBV_WR_RDMA_WRITE_WITH_IMM, ring_address,
                 ring_rkey, 10) ||
      !post_send(connection.qp(), send_buffer.value(), 2048, kSendBytes, IBV_WR_SEND, 0, 0, 11))
    return 1;
  bool wrote = false, sent = false, received = false;
  Deadline deadline(kStepMs / 1000.0);
  for (int taken = 0; taken < 3; ++taken) {
    ibv_wc wc{};
    if (!wait_completion(side.cq, &wc, deadline, "the client's completions")) return 1;
    if (wc.opcode == IBV_WC_RDMA_WRITE && wc.wr_id == 10) wrote = true;
    if (wc.opcode == IBV_WC_SEND && wc.wr_id == 11) sent = true;
    if (wc.opcode == IBV_WC_RECV && wc.byte_len == kReplyBytes &&
        find_mismatch(recv_buffer.value().data(), kReplyBytes, kReplySeed, 0) == kReplyBytes)
      received = true;
  }
  if (!wrote || !sent || !received) {
    fprintf(stderr, "%s: FAILED: completions: write %d, send %d, the server's SEND received intact %d\n", kProgram,
            wrote, sent, received);
    return 1;
  }
  printf("%s: client: QP carried WRITE WITH IMM + SEND, and the server's SEND back\n", kProgram);

  if (!barrier(control, kStepMs)) return 1;  // the server has its reply's completion
  start = now_seconds();
  if (!connection.disconnect()) return 1;
  if (!drive_connection(side, connection, rdma::CmConnectionState::kDisconnected, "DISCONNECTED")) return 1;
  printf("%s: client: disconnect to DISCONNECTED in %.2f ms\n", kProgram, elapsed_ms(start));
  connection = rdma::CmConnection();
  attempt = core::Result<rdma::CmConnector>::fail(ECANCELED);  // the connector's (empty) id goes too
  close(tcp);
  if (!barrier(control, kStepMs)) return 1;
  if (!check_no_resources("client")) return 1;
  printf("%s: OK\n", kProgram);
  return 0;
}

int run() {
  if (rdma_test_address().empty()) {
    fprintf(stderr, "%s: SKIPPED: no RDMA address (RXE_VM_IPADDR or VSOCK_TEST_RDMA_ADDR)\n", kProgram);
    return kExitSkip;
  }
  return run_pair(server, client, 60);
}

}  // namespace
}  // namespace vsock::test

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  return vsock::test::run();
}
