// hostile_peer ADDR PORT MODE
// hostile_peer ADDR PORT forge VICTIM_PORT COUNT
//
// A peer that upgrades a TCP connection by hand (docs/protocol.md §1-2,
// version 4: the UpgradeRequest, the server's UpgradeAccept and Bound, our
// Switch, the Bound's token on TCP right after our TCP part once the Switch
// completed, and the server's Switch), with librdmacm and libibverbs linked
// directly (not preloaded), against a server running under libvsock
// (hostile_target server), and then breaks the stream protocol of §3 in one
// way, MODE. Every stream byte it writes through the protocol is 'A'; bytes
// no rule may deliver are 'Z'. It first sends the server a command line on
// the ring (hostile_target: "read MODE [HOLD_MS]" or "push MODE N"), so the
// server's line for this connection names the mode.
//
// Prints what it did and what came back: its own work requests' statuses,
// the DATA it received, what its TCP socket and rdma_cm channel saw. Exit
// 0 when the mode ran and the device-level expectations held (a write
// outside the ring or after the server's close must not succeed); 1
// otherwise; 77 without a device or rdma_cm route. What the server did is
// checked by run_hostile.sh from the server's lines and stats.
//
// Modes (see MODES below): data-length, data-zero, overflow, oob-end,
// oob-before, bad-rkey, credit-excess, credit-zero, credit-payload, type3,
// control-zero, control-unknown, closed-first, data-after-fin, second-fin,
// send-extra, send-long, flood-send, flood-zero, flood-credit, no-credit,
// write-after-fin, grow-smaller, moved-unasked (the ring growth of §3.1),
// resume-alone (§5.1).
//
// The token of §2 ("Who may switch"), on a connection of our own: the
// command line goes on TCP before the Switch (its count is the line's
// length) and the server answers "ok" on TCP, then
//   token-after-tcp  the token right after the line, 1000 'A' on the ring,
//                    FIN: breaks no rule (a Switch count above 0);
//   token-wrong      'Z' DATA and a FIN on the ring, then on TCP the token
//                    with its last byte changed, then 500 'A', end: the
//                    server must refuse the Switch (upgrade_tokens_refused)
//                    and deliver the TCP stream whole, those 16 bytes too,
//                    never the ring's;
//   token-missing    'Z' DATA and a FIN on the ring, 2 s in which nothing
//                    may come back, then the end of the TCP stream where
//                    the token should be: refused; the application reads
//                    the end, nothing of the ring.
//
// forge: a same-host forger (issue 10 item 2). No TCP connection of its
// own: an UpgradeRequest naming the live connection from VICTIM_PORT of
// this host's address (which rdma_cm gives it: the victim's) to ADDR:PORT,
// so every check of §1 passes. If the server accepts and sends Bound: a
// Switch with tcp_bytes COUNT, "FORGED..." DATA and a FIN in the server's
// ring, and no token (it cannot write on the victim's TCP). Prints
// "forge: written" then, and watches until the server drops the queue pair
// (DISCONNECTED) or 90 s. Exit 0 unless the server sent its Switch or any
// DATA back (the forgery reached the application: an echo server's echo),
// 1 then. The last line, "forge: request=... bound=... server_switch=...
// data_back=... qp=...", says what happened; run_forged.sh checks the
// victim and the server's stats.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

// Immediates: type:2 | value:30, network order on the wire.
constexpr uint32_t kData = 0u << 30, kCredit = 1u << 30, kControl = 2u << 30, kReserved = 3u << 30;
// DATA carries the stream position its write ends at, CREDIT the position
// consumed to: their low 30 bits (protocol version 3 on).
constexpr uint32_t kPositionMask = (1u << 30) - 1;
uint32_t pos(uint64_t position) { return uint32_t(position) & kPositionMask; }
constexpr uint32_t kFin = 1;
constexpr uint32_t kMessageSlot = 64;  // the library's receive buffer
constexpr int kRecvSlots = 512;
constexpr int kSendDepth = 256;
constexpr uint64_t kRecvTag = uint64_t{1} << 63;
constexpr uint8_t kVersion = 4;  // docs/protocol.md
constexpr size_t kTokenSize = 16;
constexpr size_t kBoundSize = 16 + kTokenSize + 8;  // header, token, the server's TCP count

void put16(uint8_t* p, uint16_t v) { p[0] = uint8_t(v >> 8), p[1] = uint8_t(v); }
void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (24 - 8 * i));
}
void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (56 - 8 * i));
}
uint32_t get32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }
uint64_t get64(const uint8_t* p) { return uint64_t(get32(p)) << 32 | get32(p + 4); }

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void skip(const char* why) {
  printf("SKIPPED: %s\n", why);
  exit(77);
}
[[noreturn]] void die(const char* what) {
  printf("FAIL: %s (%s)\n", what, strerror(errno));
  exit(1);
}

struct Peer {
  int tcp = -1;
  rdma_event_channel* channel = nullptr;
  rdma_cm_id* id = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  // Our ring (the server writes into it), our receive slots, our source.
  std::vector<uint8_t> ring_mem, slots_mem, src_mem;
  ibv_mr* ring_mr = nullptr;
  ibv_mr* slots_mr = nullptr;
  ibv_mr* src_mr = nullptr;
  uint32_t ring_size = 65536;
  uint64_t nonce = 0x686f7374696c6521ULL;  // "hostile!"
  uint8_t token[kTokenSize] = {};  // Bound's
  // The server's ring (UpgradeAccept).
  uint64_t peer_addr = 0;
  uint32_t peer_rkey = 0, peer_cap = 0;
  uint64_t tail = 0;  // bytes we wrote into its ring
  // What came in.
  uint64_t data_in = 0, credit_in = 0, data_wrs_in = 0;
  bool fin_in = false, reset_in = false;
  bool disconnected = false;  // rdma_cm DISCONNECTED seen (watch_cm)
  std::vector<std::vector<uint8_t>> messages;
  int recv_errors = 0;
  // Our sends.
  uint64_t next_wr = 1;
  int outstanding = 0, send_ok = 0, send_failed = 0;
  ibv_wc_status first_error = IBV_WC_SUCCESS;
};

void post_recv(Peer& p, int slot) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(p.slots_mem.data() + size_t(slot) * kMessageSlot), kMessageSlot,
              p.slots_mr->lkey};
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = kRecvTag | uint64_t(slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (ibv_post_recv(p.qp, &wr, &bad) != 0) ++p.recv_errors;
}

// Takes what the CQ holds; receives are posted again at once.
void poll_once(Peer& p) {
  ibv_wc wcs[32];
  int n = ibv_poll_cq(p.cq, 32, wcs);
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = wcs[i];
    if (wc.wr_id & kRecvTag) {
      int slot = int(wc.wr_id & ~kRecvTag);
      if (wc.status != IBV_WC_SUCCESS) {
        ++p.recv_errors;
        continue;  // flushed: the queue pair is in error
      }
      if (wc.opcode == IBV_WC_RECV) {
        const uint8_t* m = p.slots_mem.data() + size_t(slot) * kMessageSlot;
        p.messages.emplace_back(m, m + wc.byte_len);
      } else if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        uint32_t imm = ntohl(wc.imm_data);
        uint32_t type = imm & (3u << 30), value = imm & ((1u << 30) - 1);
        if (type == kData) p.data_in += (value - pos(p.data_in)) & kPositionMask, ++p.data_wrs_in;
        if (type == kCredit) p.credit_in += (value - pos(p.credit_in)) & kPositionMask;
        if (type == kControl && value == kFin) p.fin_in = true;
        if (type == kControl && value == 2) p.reset_in = true;
      }
      post_recv(p, slot);
      continue;
    }
    --p.outstanding;
    if (wc.status == IBV_WC_SUCCESS) {
      ++p.send_ok;
    } else {
      if (p.send_failed++ == 0) p.first_error = wc.status;
    }
  }
}

// Polls until `done()` or `ms` pass; true if done.
template <typename F>
bool poll_until(Peer& p, double ms, F done) {
  double end = now_ms() + ms;
  for (;;) {
    poll_once(p);
    if (done()) return true;
    if (now_ms() > end) return false;
    usleep(200);
  }
}

// Posts one signalled request; waits for room in the send queue first.
bool post(Peer& p, ibv_wr_opcode op, uint64_t remote, uint32_t rkey, const void* data, uint32_t len, bool imm,
          uint32_t imm_value) {
  if (!poll_until(p, 5000, [&] { return p.outstanding < kSendDepth - 4; })) {
    printf("  send queue did not drain within 5 s\n");
    return false;
  }
  if (len > p.src_mem.size()) die("internal: source buffer too small");
  if (len > 0 && data != p.src_mem.data()) memcpy(p.src_mem.data(), data, len);
  ibv_sge sge{reinterpret_cast<uintptr_t>(p.src_mem.data()), len, p.src_mr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = p.next_wr++;
  wr.opcode = op;
  wr.sg_list = len > 0 ? &sge : nullptr;
  wr.num_sge = len > 0 ? 1 : 0;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (imm) wr.imm_data = htonl(imm_value);
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  if (ibv_post_send(p.qp, &wr, &bad) != 0) {
    printf("  ibv_post_send refused: %s\n", strerror(errno));
    return false;
  }
  ++p.outstanding;
  return true;
}

// The source buffer is written in place (no copy) by these helpers: a
// stream of `len` bytes of `fill`.
const uint8_t* fill_source(Peer& p, uint8_t fill, size_t len) {
  memset(p.src_mem.data(), fill, len);
  return p.src_mem.data();
}

// A WRITE WITH IMMEDIATE of `len` bytes of `fill` at the stream position
// `tail` of the server's ring (no wrap: callers keep inside), with `imm`.
bool write_at(Peer& p, uint64_t offset, uint8_t fill, uint32_t len, uint32_t imm) {
  return post(p, IBV_WR_RDMA_WRITE_WITH_IMM, p.peer_addr + offset, p.peer_rkey, fill_source(p, fill, len), len, true,
              imm);
}
// A zero-length WRITE WITH IMMEDIATE naming the ring (CREDIT, CONTROL).
bool control(Peer& p, uint32_t imm) { return post(p, IBV_WR_RDMA_WRITE_WITH_IMM, p.peer_addr, p.peer_rkey, nullptr, 0, true, imm); }
// Valid stream data at our tail.
bool stream(Peer& p, const void* data, uint32_t len) {
  uint64_t offset = p.tail & (p.peer_cap - 1);
  if (offset + len > p.peer_cap) die("internal: stream write would wrap");
  memmove(p.src_mem.data(), data, len);
  bool ok = post(p, IBV_WR_RDMA_WRITE_WITH_IMM, p.peer_addr + offset, p.peer_rkey, p.src_mem.data(), len, true,
                 kData | pos(p.tail + len));
  p.tail += len;
  return ok;
}

bool wait_sends(Peer& p, double ms) {
  return poll_until(p, ms, [&] { return p.outstanding == 0; });
}

rdma_cm_event* next_event(rdma_event_channel* channel, int ms) {
  pollfd pfd{channel->fd, POLLIN, 0};
  if (poll(&pfd, 1, ms) <= 0) return nullptr;
  rdma_cm_event* event = nullptr;
  return rdma_get_cm_event(channel, &event) == 0 ? event : nullptr;
}

void expect_event(Peer& p, rdma_cm_event_type want, const char* what) {
  rdma_cm_event* e = next_event(p.channel, 5000);
  if (!e) {
    if (want != RDMA_CM_EVENT_ESTABLISHED) skip(what);
    printf("FAIL: %s: no event within 5 s\n", what);
    exit(1);
  }
  if (e->event != want) {
    printf("%s: got %s (status %d)\n", what, rdma_event_str(e->event), e->status);
    if (want != RDMA_CM_EVENT_ESTABLISHED) skip(what);
    exit(1);
  }
  if (want == RDMA_CM_EVENT_ESTABLISHED) {
    const uint8_t* d = static_cast<const uint8_t*>(e->param.conn.private_data);
    if (e->param.conn.private_data_len < 32 || memcmp(d, "VSK1", 4) != 0 || d[4] != kVersion ||
        get64(d + 8) != p.nonce) {
      printf("FAIL: the UpgradeAccept is not what protocol.md says\n");
      exit(1);
    }
    p.peer_addr = get64(d + 16);
    p.peer_rkey = get32(d + 24);
    p.peer_cap = get32(d + 28);
  }
  rdma_ack_cm_event(e);
}

// Waits for the next SEND from the server with `magic`; false on timeout.
bool wait_message(Peer& p, const char* magic, std::vector<uint8_t>* out) {
  bool got = poll_until(p, 5000, [&] { return !p.messages.empty(); });
  if (!got) return false;
  *out = p.messages.front();
  p.messages.erase(p.messages.begin());
  return out->size() >= 16 && memcmp(out->data(), magic, 4) == 0 && get64(out->data() + 8) == p.nonce;
}

sockaddr_in server_address(const char* addr, int port) {
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(uint16_t(port));
  if (inet_pton(AF_INET, addr, &server.sin_addr) != 1) die("bad address");
  return server;
}

// An rdma_cm id resolved to `server`, its queue pair, our ring and posted
// receives: everything rdma_cm and verbs need, made before the TCP
// connection, so that the request follows its connect() at once, as the
// library's would (the server waits for it only upgrade_timeout_ms).
void prepare(Peer& p, const sockaddr_in& server) {
  p.channel = rdma_create_event_channel();
  if (!p.channel) skip("no rdma_cm");
  if (rdma_create_id(p.channel, &p.id, nullptr, RDMA_PS_TCP) != 0) skip("rdma_create_id");
  sockaddr_in to = server;
  if (rdma_resolve_addr(p.id, nullptr, reinterpret_cast<sockaddr*>(&to), 2000) != 0) skip("rdma_resolve_addr");
  expect_event(p, RDMA_CM_EVENT_ADDR_RESOLVED, "resolve address");
  if (rdma_resolve_route(p.id, 2000) != 0) skip("rdma_resolve_route");
  expect_event(p, RDMA_CM_EVENT_ROUTE_RESOLVED, "resolve route");
  // A short ACK timeout (67 ms), so that a write nobody answers fails in
  // (retry_count + 1) x 67 ms instead of seconds.
  uint8_t ack_timeout = 14;
  rdma_set_option(p.id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout, sizeof ack_timeout);

  p.pd = ibv_alloc_pd(p.id->verbs);
  p.cq = p.pd ? ibv_create_cq(p.id->verbs, kRecvSlots + kSendDepth + 16, nullptr, nullptr, 0) : nullptr;
  if (!p.cq) die("PD/CQ");
  ibv_qp_init_attr attr{};
  attr.send_cq = attr.recv_cq = p.cq;
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = kSendDepth;
  attr.cap.max_recv_wr = kRecvSlots;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  if (rdma_create_qp(p.id, p.pd, &attr) != 0) die("rdma_create_qp");
  p.qp = p.id->qp;
  p.ring_mem.assign(p.ring_size, 0);
  p.slots_mem.assign(size_t(kRecvSlots) * kMessageSlot, 0);
  p.ring_mr = ibv_reg_mr(p.pd, p.ring_mem.data(), p.ring_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  p.slots_mr = ibv_reg_mr(p.pd, p.slots_mem.data(), p.slots_mem.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!p.ring_mr || !p.slots_mr) die("ibv_reg_mr");
  for (int i = 0; i < kRecvSlots; ++i) post_recv(p, i);
}

// rdma_connect with an UpgradeRequest (by hand, protocol.md §1) naming the
// TCP connection client -> server.
void send_request(Peer& p, const sockaddr_in& client, const sockaddr_in& server) {
  uint8_t request[56] = {};
  memcpy(request, "VSK1", 4);
  request[4] = kVersion;
  request[5] = 4;  // family
  put16(request + 8, ntohs(client.sin_port));
  put16(request + 10, ntohs(server.sin_port));
  memcpy(request + 12, &client.sin_addr, 4);
  memcpy(request + 28, &server.sin_addr, 4);
  put64(request + 44, p.nonce);
  rdma_conn_param param{};
  param.private_data = request;
  param.private_data_len = sizeof request;
  param.responder_resources = param.initiator_depth = 1;
  param.retry_count = 3;
  param.rnr_retry_count = 7;
  if (rdma_connect(p.id, &param) != 0) die("rdma_connect");
}

// The source buffer, once the server's ring is known: it covers the whole
// ring (the overflow mode).
void register_source(Peer& p) {
  p.src_mem.assign(p.peer_cap + size_t{4096}, 0);
  p.src_mr = ibv_reg_mr(p.pd, p.src_mem.data(), p.src_mem.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!p.src_mr) die("ibv_reg_mr (source)");
}

// The server's Bound (40 bytes in version 4): keeps its token.
bool take_bound(Peer& p, double ms) {
  if (!poll_until(p, ms, [&] { return !p.messages.empty(); })) return false;
  std::vector<uint8_t> m = p.messages.front();
  p.messages.erase(p.messages.begin());
  if (m.size() < kBoundSize || memcmp(m.data(), "VSKB", 4) != 0 || m[4] != kVersion || m[5] || m[6] || m[7] ||
      get64(m.data() + 8) != p.nonce) {
    printf("FAIL: the server's first message (%zu bytes) is not a version-4 Bound\n", m.size());
    exit(1);
  }
  memcpy(p.token, m.data() + 16, kTokenSize);
  return true;
}

// A later Bound of the server's (version 4) whose count is `count`: the
// server's application has read our `count` TCP bytes, and we may switch
// there (protocol.md §2, "Where the client switches"). Bounds with a lower
// count come first, perhaps.
bool take_bound_at(Peer& p, uint64_t count, double ms) {
  for (;;) {
    if (!poll_until(p, ms, [&] { return !p.messages.empty(); })) return false;
    std::vector<uint8_t> m = p.messages.front();
    p.messages.erase(p.messages.begin());
    if (m.size() < kBoundSize || memcmp(m.data(), "VSKB", 4) != 0 || get64(m.data() + 8) != p.nonce ||
        memcmp(m.data() + 16, p.token, kTokenSize) != 0)
      return false;
    const uint64_t theirs = get64(m.data() + 16 + kTokenSize);
    if (theirs == count) return true;
    if (theirs > count) return false;
  }
}

// Our Switch (tcp_bytes = count), and its completion: only then may the
// token go on TCP (protocol.md §2).
void send_switch(Peer& p, uint64_t count) {
  uint8_t sw[40] = {};
  memcpy(sw, "VSKS", 4);
  sw[4] = kVersion;
  put64(sw + 8, p.nonce);
  put64(sw + 16, count);
  put64(sw + 24, reinterpret_cast<uintptr_t>(p.ring_mem.data()));
  put32(sw + 32, p.ring_mr->rkey);
  put32(sw + 36, p.ring_size);
  if (!post(p, IBV_WR_SEND, 0, 0, sw, sizeof sw, false, 0) || !wait_sends(p, 5000) || p.send_failed) {
    printf("FAIL: our Switch did not go\n");
    exit(1);
  }
}

void send_tcp(Peer& p, const void* data, size_t len) {
  if (send(p.tcp, data, len, MSG_NOSIGNAL) != ssize_t(len)) die("TCP send");
}

// The server's Switch; its tcp_bytes.
uint64_t take_server_switch(Peer& p) {
  std::vector<uint8_t> m;
  if (!wait_message(p, "VSKS", &m) || m.size() < 40 || m[4] != kVersion) {
    printf("FAIL: no Switch from the server\n");
    exit(1);
  }
  return get64(m.data() + 16);
}

// Kernel TCP connection, the request naming it, ESTABLISHED, Bound.
void connect_and_bind(Peer& p, const char* addr, int port) {
  sockaddr_in server = server_address(addr, port);
  prepare(p, server);
  p.tcp = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(p.tcp, reinterpret_cast<sockaddr*>(&server), sizeof server) != 0) die("TCP connect");
  sockaddr_in local{};
  socklen_t len = sizeof local;
  getsockname(p.tcp, reinterpret_cast<sockaddr*>(&local), &len);
  send_request(p, local, server);
  expect_event(p, RDMA_CM_EVENT_ESTABLISHED, "upgrade (ESTABLISHED with an UpgradeAccept)");
  register_source(p);
  if (!take_bound(p, 5000)) {
    printf("FAIL: no Bound from the server\n");
    exit(1);
  }
}

// The whole upgrade by hand, up to both Switches: nothing on TCP before
// ours (count 0), so the token is the first byte on TCP.
void upgrade(Peer& p, const char* addr, int port) {
  connect_and_bind(p, addr, port);
  send_switch(p, 0);
  send_tcp(p, p.token, kTokenSize);
  uint64_t theirs = take_server_switch(p);
  printf("upgraded: server ring %u bytes (rkey 0x%x), our ring %u; the server's Switch says %llu TCP bytes\n",
         p.peer_cap, p.peer_rkey, p.ring_size, static_cast<unsigned long long>(theirs));
}

// The command line for hostile_target, as valid stream data.
void command(Peer& p, const std::string& line) {
  if (!stream(p, line.data(), uint32_t(line.size())) || !wait_sends(p, 5000) || p.send_failed) {
    printf("FAIL: the command did not go\n");
    exit(1);
  }
  // The server answers "ok\n" once it has read it (our ring's first bytes).
  if (!poll_until(p, 10000, [&] { return p.data_in >= 3; }) || memcmp(p.ring_mem.data(), "ok\n", 3) != 0) {
    printf("FAIL: the server did not answer the command\n");
    exit(1);
  }
}

// What the server's side did after the misbehaviour: its TCP socket (a
// reset shows as ECONNRESET, a close as end of stream), and rdma_cm.
void report(Peer& p, const char* mode, double wait_ms) {
  wait_sends(p, wait_ms);
  pollfd pfd{p.tcp, POLLIN, 0};
  std::string tcp = "open";
  if (poll(&pfd, 1, int(wait_ms)) > 0) {
    char b[64];
    ssize_t n = recv(p.tcp, b, sizeof b, MSG_DONTWAIT);
    tcp = n == 0 ? "eof" : n > 0 ? "data" : strerror(errno);
  }
  std::string cm = p.disconnected ? rdma_event_str(RDMA_CM_EVENT_DISCONNECTED) : "none";
  if (rdma_cm_event* e = next_event(p.channel, 200)) {
    cm = rdma_event_str(e->event);
    rdma_ack_cm_event(e);
  }
  poll_once(p);
  printf("hostile %s: our requests ok=%d failed=%d%s%s; got data=%llu credit=%llu fin=%d reset=%d; tcp=%s cm=%s\n",
         mode, p.send_ok, p.send_failed, p.send_failed ? " first error " : "",
         p.send_failed ? ibv_wc_status_str(p.first_error) : "", static_cast<unsigned long long>(p.data_in),
         static_cast<unsigned long long>(p.credit_in), p.fin_in, p.reset_in, tcp.c_str(), cm.c_str());
}

// Reads exactly `len` bytes from TCP within `ms`; false on end, error or
// timeout.
bool read_tcp(int fd, uint8_t* out, size_t len, int ms) {
  double end = now_ms() + ms;
  size_t have = 0;
  while (have < len) {
    pollfd pfd{fd, POLLIN, 0};
    int left = int(end - now_ms());
    if (left <= 0 || poll(&pfd, 1, left) <= 0) return false;
    ssize_t n = recv(fd, out + have, len - have, 0);
    if (n <= 0) return false;
    have += size_t(n);
  }
  return true;
}

// Our queue pair fails on our side only (docs/protocol.md section 5.1),
// while the server's keeps working and its application only reads: we
// write our Resume record on TCP, resend the stream from 0 (the server
// skips what its ring had), write more there and shut down; the server
// must notice alone, answer with its own record, and read every byte once.
bool resume_alone(Peer& p) {
  command(p, "read resume-alone\n");
  const uint32_t ring_part = 1000, tcp_part = 500;
  stream(p, fill_source(p, 'A', ring_part), ring_part);
  if (!wait_sends(p, 3000) || p.send_failed) {
    printf("FAIL: resume-alone: the ring part did not go\n");
    return false;
  }
  ibv_qp_attr error_state{};
  error_state.qp_state = IBV_QPS_ERR;
  if (ibv_modify_qp(p.qp, &error_state, IBV_QP_STATE) != 0) die("ibv_modify_qp(ERR)");
  // The record, then the whole stream again (the command line and the
  // ring part), then the new bytes.
  std::vector<uint8_t> tcp(32, 0);
  memcpy(tcp.data(), "VSKF", 4);
  tcp[4] = kVersion;
  put64(tcp.data() + 8, p.nonce);
  put64(tcp.data() + 16, 0);
  put64(tcp.data() + 24, p.tail);
  std::string command_line = "read resume-alone\n";
  tcp.insert(tcp.end(), command_line.begin(), command_line.end());
  tcp.insert(tcp.end(), ring_part + tcp_part, 'A');
  const double start = now_ms();
  if (send(p.tcp, tcp.data(), tcp.size(), 0) != ssize_t(tcp.size())) die("TCP send");
  shutdown(p.tcp, SHUT_WR);
  uint8_t theirs[32];
  if (!read_tcp(p.tcp, theirs, sizeof theirs, 10000)) {
    printf("FAIL: resume-alone: no Resume record from the server within 10 s\n");
    return false;
  }
  const double took = now_ms() - start;
  const uint64_t resend_from = get64(theirs + 16), ring_written = get64(theirs + 24);
  printf("  resume-alone: the server's Resume record came %.0f ms after ours (resend from %llu, ring written %llu)\n",
         took, static_cast<unsigned long long>(resend_from), static_cast<unsigned long long>(ring_written));
  if (memcmp(theirs, "VSKF", 4) != 0 || theirs[4] != kVersion || get64(theirs + 8) != p.nonce ||
      ring_written != p.data_in || resend_from > ring_written) {
    printf("FAIL: resume-alone: the server's record is not what protocol.md says\n");
    return false;
  }
  // What it resends of its "ok\n" that our ring had, then its close.
  std::vector<uint8_t> resent(ring_written - resend_from);
  if (!resent.empty() && (!read_tcp(p.tcp, resent.data(), resent.size(), 10000) ||
                          memcmp(resent.data(), "ok\n" + resend_from, resent.size()) != 0)) {
    printf("FAIL: resume-alone: the server did not resend its uncredited bytes\n");
    return false;
  }
  uint8_t more;
  pollfd pfd{p.tcp, POLLIN, 0};
  if (poll(&pfd, 1, 10000) <= 0 || recv(p.tcp, &more, 1, 0) != 0) {
    printf("FAIL: resume-alone: the server wrote more, or did not close, after its record\n");
    return false;
  }
  close(p.tcp);
  p.tcp = -1;
  return true;
}

// What rdma_cm says, without waiting: DISCONNECTED (the server dropped the
// queue pair) is remembered.
void watch_cm(Peer& p) {
  while (rdma_cm_event* e = next_event(p.channel, 0)) {
    if (e->event == RDMA_CM_EVENT_DISCONNECTED) p.disconnected = true;
    rdma_ack_cm_event(e);
  }
}

// Anything the server sent us after its Bound (its Switch, DATA): what a
// server that refused our Switch never sends.
bool server_answered(const Peer& p) { return !p.messages.empty() || p.data_in > 0 || p.data_wrs_in > 0 || p.fin_in; }

// The token modes (protocol.md §2, "Who may switch"), on our own
// connection: the command line goes on TCP before our Switch, whose count
// is then the line's length, once the server's Bound says it read the line
// there; it answers "ok" on TCP (the server's Switch waits for our token).
bool token_mode(Peer& p, const char* addr, int port, const std::string& mode) {
  connect_and_bind(p, addr, port);
  const std::string line = "read " + mode + "\n";
  send_tcp(p, line.data(), line.size());
  if (!take_bound_at(p, line.size(), 5000)) {
    printf("FAIL: %s: no Bound at our %zu TCP bytes from the server\n", mode.c_str(), line.size());
    return false;
  }
  send_switch(p, line.size());
  if (mode == "token-after-tcp") {
    // The right token right after the TCP part: the switch goes on.
    send_tcp(p, p.token, kTokenSize);
    const uint64_t theirs = take_server_switch(p);
    uint8_t ok[3] = {};
    if (theirs > 3 || (theirs > 0 && !read_tcp(p.tcp, ok, size_t(theirs), 5000)) ||
        !poll_until(p, 5000, [&] { return p.data_in >= 3 - theirs; })) {
      printf("FAIL: token-after-tcp: no \"ok\" from the server (its Switch says %llu TCP bytes)\n",
             static_cast<unsigned long long>(theirs));
      return false;
    }
    memcpy(ok + theirs, p.ring_mem.data(), size_t(3 - theirs));
    printf("  token-after-tcp: our Switch said %zu TCP bytes, the token came after them; the server's Switch says "
           "%llu (its \"ok\": %llu bytes on TCP, %llu on the ring)\n",
           line.size(), static_cast<unsigned long long>(theirs), static_cast<unsigned long long>(theirs),
           static_cast<unsigned long long>(3 - theirs));
    if (memcmp(ok, "ok\n", 3) != 0) {
      printf("FAIL: token-after-tcp: the server's answer is not \"ok\"\n");
      return false;
    }
    const uint32_t n = 1000;
    stream(p, fill_source(p, 'A', n), n);
    control(p, kControl | kFin);
    report(p, mode.c_str(), 3000);
    return p.send_failed == 0;
  }
  // A Switch without its token: what follows on the ring must never be
  // taken, nor its FIN.
  stream(p, fill_source(p, 'Z', 64), 64);
  control(p, kControl | kFin);
  if (!wait_sends(p, 3000) || p.send_failed) {
    printf("FAIL: %s: the ring writes did not go\n", mode.c_str());
    return false;
  }
  uint8_t ok[3];
  if (!read_tcp(p.tcp, ok, 3, 10000) || memcmp(ok, "ok\n", 3) != 0) {
    printf("FAIL: %s: no \"ok\" on TCP from the server\n", mode.c_str());
    return false;
  }
  if (mode == "token-missing") {
    // 2 s: the server takes nothing from the ring and sends no Switch; then
    // the end of the stream where the token should be.
    poll_until(p, 2000, [&] { return server_answered(p); });
    printf("  token-missing: 2 s after our Switch, 64 B and a FIN on the ring: %s\n",
           server_answered(p) ? "the server ANSWERED" : "nothing came back");
    shutdown(p.tcp, SHUT_WR);
  } else {
    // The token with its last byte changed (to 'A' or 'B': the server's
    // application counts the bytes that are not 'A'), then 500 'A'.
    uint8_t near[kTokenSize];
    memcpy(near, p.token, kTokenSize);
    near[kTokenSize - 1] = near[kTokenSize - 1] == 'A' ? 'B' : 'A';
    int foreign = 0;
    for (uint8_t b : near) foreign += b != 'A';
    std::string more(500, 'A');
    send_tcp(p, near, sizeof near);
    send_tcp(p, more.data(), more.size());
    shutdown(p.tcp, SHUT_WR);
    printf("  token-wrong: expect bytes=%zu foreign=%d (the 16 bytes at the switch point, then 500 'A', all on TCP)\n",
           sizeof near + more.size(), foreign);
  }
  // The server refuses the Switch and drops the queue pair.
  const double start = now_ms();
  const bool dropped = poll_until(p, 10000, [&] {
    watch_cm(p);
    return p.disconnected || server_answered(p);
  });
  const std::string dropped_after =
      "dropped the queue pair (DISCONNECTED " + std::to_string(int(now_ms() - start)) + " ms after our TCP end)";
  printf("  %s: the server %s\n", mode.c_str(),
         server_answered(p) ? "SENT its Switch or data: it took a Switch without its token"
         : dropped          ? dropped_after.c_str()
                            : "kept the queue pair 10 s after our TCP end");
  report(p, mode.c_str(), 3000);
  if (server_answered(p)) {
    printf("FAIL: %s: the server went on over RDMA without the token\n", mode.c_str());
    return false;
  }
  return true;
}

// forge: see the top of the file.
int forge(Peer& p, const char* addr, int port, uint16_t victim_port, uint64_t count) {
  p.nonce = 0x666f726765727921ULL;  // "forgery!"
  const sockaddr_in server = server_address(addr, port);
  prepare(p, server);
  sockaddr* local = rdma_get_local_addr(p.id);
  if (!local || local->sa_family != AF_INET) die("rdma_cm's source address is not IPv4");
  sockaddr_in victim{};
  memcpy(&victim, local, sizeof victim);
  victim.sin_port = htons(victim_port);
  char ip[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &victim.sin_addr, ip, sizeof ip);
  printf("forge: a request naming %s:%u -> %s:%d (rdma_cm's source: %s), Switch tcp_bytes %llu\n", ip, victim_port,
         addr, port, ip, static_cast<unsigned long long>(count));
  send_request(p, victim, server);
  std::string request = "no answer within 10 s";
  bool accepted = false, bound = false;
  if (rdma_cm_event* e = next_event(p.channel, 10000)) {
    request = rdma_event_str(e->event);
    if (e->event == RDMA_CM_EVENT_ESTABLISHED) {
      const uint8_t* d = static_cast<const uint8_t*>(e->param.conn.private_data);
      if (e->param.conn.private_data_len < 32 || memcmp(d, "VSK1", 4) != 0 || d[4] != kVersion ||
          get64(d + 8) != p.nonce) {
        printf("FAIL: forge: the UpgradeAccept is not what protocol.md says\n");
        exit(1);
      }
      accepted = true;
      request = (d[5] & 1) ? "accepted (Bound follows)" : "accepted (early)";
      p.peer_addr = get64(d + 16);
      p.peer_rkey = get32(d + 24);
      p.peer_cap = get32(d + 28);
    }
    rdma_ack_cm_event(e);
  }
  printf("forge: request %s\n", request.c_str());
  std::string qp = "none";
  if (accepted) {
    register_source(p);
    bound = take_bound(p, 10000);
    printf("forge: %s\n", bound ? "Bound received (the server took us for the connection's client)"
                                : "no Bound within 10 s");
  }
  if (bound) {
    send_switch(p, count);
    std::string forged;
    while (forged.size() < 64) forged += "FORGED-";
    forged.resize(64);
    stream(p, forged.data(), uint32_t(forged.size()));
    control(p, kControl | kFin);
    wait_sends(p, 5000);
    printf("forge: written: Switch (tcp_bytes %llu), %zu bytes \"FORGED-...\" and a FIN in the server's ring, no token"
           " (%d ok, %d failed)\n",
           static_cast<unsigned long long>(count), forged.size(), p.send_ok, p.send_failed);
    // Until the server drops the queue pair, or answers.
    const double start = now_ms();
    poll_until(p, 90000, [&] {
      watch_cm(p);
      return p.disconnected || server_answered(p);
    });
    if (server_answered(p)) poll_until(p, 3000, [] { return false; });  // its echo, if any
    watch_cm(p);
    qp = p.disconnected ? "dropped after " + std::to_string(int(now_ms() - start)) + " ms" : "kept";
  }
  bool server_switch = false;
  for (const auto& m : p.messages) server_switch = server_switch || (m.size() >= 4 && memcmp(m.data(), "VSKS", 4) == 0);
  const bool echoed = p.data_in > 0 && std::search(p.ring_mem.begin(), p.ring_mem.end(), std::begin("FORGED"),
                                                   std::end("FORGED") - 1) != p.ring_mem.end();
  printf("forge: request=%s bound=%d server_switch=%d messages=%zu data_back=%llu forged_echoed=%d fin_back=%d qp=%s\n",
         accepted ? "accepted" : "refused", bound, server_switch, p.messages.size(),
         static_cast<unsigned long long>(p.data_in), echoed, p.fin_in, qp.c_str());
  if (p.id && !p.disconnected) rdma_disconnect(p.id);
  if (server_answered(p)) {
    printf("FAIL: forge: the server switched for a peer that never wrote the token%s\n",
           echoed ? ", and its application echoed the forged bytes" : "");
    return 1;
  }
  printf("DONE: forge: nothing of the forgery came back\n");
  return 0;
}

template <typename F>
int flood(int count, F one) {
  int posted = 0;
  double end = now_ms() + 20000;
  for (; posted < count && now_ms() < end; ++posted) {
    if (!one()) break;
  }
  return posted;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc == 6 && strcmp(argv[3], "forge") == 0) {
    Peer p;
    return forge(p, argv[1], atoi(argv[2]), uint16_t(atoi(argv[4])), strtoull(argv[5], nullptr, 10));
  }
  if (argc != 4) {
    fprintf(stderr, "usage: %s ADDR PORT MODE | %s ADDR PORT forge VICTIM_PORT COUNT\n", argv[0], argv[0]);
    return 2;
  }
  const std::string mode = argv[3];
  Peer p;
  if (mode == "token-after-tcp" || mode == "token-wrong" || mode == "token-missing") {
    const bool ok = token_mode(p, argv[1], atoi(argv[2]), mode);
    if (p.id && !p.disconnected) rdma_disconnect(p.id);
    if (p.tcp >= 0) close(p.tcp);
    printf("%s: %s\n", ok ? "DONE" : "FAILED", mode.c_str());
    return ok ? 0 : 1;
  }
  if (mode == "flood-credit") p.ring_size = 8192;
  upgrade(p, argv[1], atoi(argv[2]));
  const uint64_t cap = p.peer_cap;
  bool ok = true;
  auto cmd = [&](const std::string& what) { command(p, what + "\n"); };

  if (mode == "data-length") {
    cmd("read data-length");
    write_at(p, p.tail, 'Z', 100, kData | pos(p.tail + 200));  // says 200, carries 100
    report(p, mode.c_str(), 2000);
  } else if (mode == "data-zero") {
    cmd("read data-zero");
    control(p, kData | pos(p.tail));  // ends where it starts
    report(p, mode.c_str(), 2000);
  } else if (mode == "overflow") {
    // The server holds off reading for 3 s: its ring has room for cap -
    // L more bytes (L: the command it consumed), plus L once it credits
    // the command (that CREDIT may be on its way). Fill it to the end,
    // then L + 1 bytes more at its start: 1 byte beyond the most it can
    // have allowed, whether its CREDIT went out first or not.
    std::string line = "read overflow 3000\n";
    command(p, line);
    uint64_t rest = cap - p.tail;
    write_at(p, p.tail, 'A', uint32_t(rest), kData | pos(p.tail + rest));
    write_at(p, 0, 'Z', uint32_t(p.tail + 1), kData | pos(p.tail + rest + p.tail + 1));
    report(p, mode.c_str(), 4000);
  } else if (mode == "oob-end" || mode == "oob-before" || mode == "bad-rkey") {
    cmd("read " + mode);
    uint64_t address = mode == "oob-end" ? p.peer_addr + cap - 32 : mode == "oob-before" ? p.peer_addr - 64 : p.peer_addr;
    uint32_t rkey = mode == "bad-rkey" ? p.peer_rkey + 0x100 : p.peer_rkey;
    post(p, IBV_WR_RDMA_WRITE_WITH_IMM, address, rkey, fill_source(p, 'Z', 64), 64, true, kData | pos(p.tail + 64));
    report(p, mode.c_str(), 3000);
    if (p.send_failed == 0) {
      printf("FAIL: %s: the device accepted a write outside the advertised ring\n", mode.c_str());
      ok = false;
    }
  } else if (mode == "credit-excess") {
    cmd("read credit-excess");
    // The server wrote its "ok" (3 bytes) into our ring: credit 1 more.
    control(p, kCredit | pos(p.data_in + 1));
    report(p, mode.c_str(), 2000);
  } else if (mode == "credit-zero") {
    cmd("read credit-zero");
    control(p, kCredit | 0);  // where the server's head stands: nothing returned
    report(p, mode.c_str(), 2000);
  } else if (mode == "credit-payload") {
    cmd("read credit-payload");
    write_at(p, p.tail, 'Z', 8, kCredit | 8);
    report(p, mode.c_str(), 2000);
  } else if (mode == "type3") {
    cmd("read type3");
    control(p, kReserved | 1);
    report(p, mode.c_str(), 2000);
  } else if (mode == "control-zero") {
    cmd("read control-zero");
    control(p, kControl | 0);
    report(p, mode.c_str(), 2000);
  } else if (mode == "control-unknown") {
    cmd("read control-unknown");
    control(p, kControl | 7);
    report(p, mode.c_str(), 2000);
  } else if (mode == "closed-first") {
    cmd("read closed-first");
    control(p, kControl | 3);  // CLOSED without a FIN before it
    report(p, mode.c_str(), 2000);
  } else if (mode == "data-after-fin") {
    cmd("read data-after-fin");
    control(p, kControl | kFin);
    write_at(p, p.tail, 'Z', 10, kData | pos(p.tail + 10));
    report(p, mode.c_str(), 2000);
  } else if (mode == "second-fin") {
    cmd("read second-fin");
    control(p, kControl | kFin);
    control(p, kControl | kFin);
    report(p, mode.c_str(), 2000);
  } else if (mode == "send-extra") {
    cmd("read send-extra");
    uint8_t bogus[16] = {'V', 'S', 'K', 'S', kVersion};
    put64(bogus + 8, p.nonce);
    post(p, IBV_WR_SEND, 0, 0, bogus, sizeof bogus, false, 0);  // a second, short Switch
    report(p, mode.c_str(), 2000);
  } else if (mode == "grow-smaller") {
    cmd("read grow-smaller");
    // A RingGrow whose ring is not larger than the one the server writes
    // into (ours): the server, as writer, must refuse it as a violation.
    uint8_t grow[24] = {'V', 'S', 'K', 'G', kVersion};
    put64(grow + 8, p.peer_addr);
    put32(grow + 16, p.peer_rkey);
    put32(grow + 20, 4096);
    post(p, IBV_WR_SEND, 0, 0, grow, sizeof grow, false, 0);
    report(p, mode.c_str(), 2000);
  } else if (mode == "moved-unasked") {
    cmd("read moved-unasked");
    // A RingMoved (accepted, position 0) that no RingGrow asked for.
    uint8_t moved[16] = {'V', 'S', 'K', 'M', kVersion, 1};
    post(p, IBV_WR_SEND, 0, 0, moved, sizeof moved, false, 0);
    report(p, mode.c_str(), 2000);
  } else if (mode == "send-long") {
    cmd("read send-long");
    std::vector<uint8_t> big(200, 'Z');
    post(p, IBV_WR_SEND, 0, 0, big.data(), uint32_t(big.size()), false, 0);
    report(p, mode.c_str(), 2000);
  } else if (mode == "flood-send" || mode == "flood-zero") {
    cmd("read " + mode);
    const int count = 3000;
    const int ok_before = p.send_ok;  // the Switch and the command
    uint8_t bogus[16] = {'V', 'S', 'K', 'X', kVersion};
    int posted = flood(count, [&] {
      return mode == "flood-send" ? post(p, IBV_WR_SEND, 0, 0, bogus, sizeof bogus, false, 0) : control(p, kCredit | 0);
    });
    report(p, mode.c_str(), 3000);
    const int taken = p.send_ok - ok_before;
    printf("  flood: %d of %d posted; the server's device acknowledged %d before its queue pair failed, %d failed\n",
           posted, count, taken, p.send_failed);
    if (taken >= posted) {
      printf("FAIL: %s: every message of the flood was taken\n", mode.c_str());
      ok = false;
    }
  } else if (mode == "flood-credit") {
    // A flood of valid control messages: the server pushes 2 rings' worth;
    // we return the credit for the first ring one byte at a time (8192
    // CREDITs), and every byte after that at once, then FIN.
    const uint64_t push = uint64_t{p.ring_size} * 2;
    const uint64_t total = push + 3;  // and the server's "ok"
    cmd("push flood-credit " + std::to_string(push));
    if (!poll_until(p, 10000, [&] { return p.data_in >= p.ring_size; })) {
      printf("FAIL: flood-credit: the server did not fill our ring (%llu bytes)\n",
             static_cast<unsigned long long>(p.data_in));
      return 1;
    }
    double start = now_ms();
    uint64_t credited = 0;
    for (; credited < p.ring_size && p.send_failed == 0; ++credited)
      if (!control(p, kCredit | pos(credited + 1))) break;
    wait_sends(p, 10000);
    double took = now_ms() - start;
    bool all = poll_until(p, 10000, [&] {
      if (p.data_in > credited && p.send_failed == 0 && p.outstanding < kSendDepth - 8) {
        uint64_t more = p.data_in - credited;  // what came after the first ring: all of it at once
        if (more + credited > total) more = total - credited;
        if (more > 0 && control(p, kCredit | pos(credited + more))) credited += more;
      }
      return p.data_in >= total && credited >= total;
    });
    printf("  flood-credit: %llu one-byte CREDITs in %.0f ms; received %llu of %llu bytes\n",
           static_cast<unsigned long long>(p.ring_size), took, static_cast<unsigned long long>(p.data_in),
           static_cast<unsigned long long>(total));
    control(p, kControl | kFin);
    report(p, mode.c_str(), 3000);
    if (!all || p.send_failed) {
      printf("FAIL: flood-credit: the stream did not complete\n");
      ok = false;
    }
  } else if (mode == "no-credit") {
    // The server pushes 1 MiB; we never return credit.
    cmd("push no-credit 1048576");
    poll_until(p, 6000, [] { return false; });
    printf("  no-credit: received %llu bytes in %llu writes (our ring: %u), no credit returned\n",
           static_cast<unsigned long long>(p.data_in), static_cast<unsigned long long>(p.data_wrs_in), p.ring_size);
    if (p.data_in > p.ring_size) {
      printf("FAIL: no-credit: the server wrote more than our ring\n");
      ok = false;
    }
    // Then go away without a FIN: the server's read must end.
    rdma_disconnect(p.id);
    close(p.tcp);
    p.tcp = -1;
    printf("hostile no-credit: disconnected without FIN\n");
  } else if (mode == "write-after-fin") {
    cmd("read write-after-fin 1000");
    const uint32_t n = 1000;
    stream(p, fill_source(p, 'A', n), n);
    control(p, kControl | kFin);
    // Bytes behind the FIN, which no immediate accounts for: plain WRITEs
    // into the ring, past the tail and over its start.
    uint64_t off = p.tail & (cap - 1);
    post(p, IBV_WR_RDMA_WRITE, p.peer_addr + off, p.peer_rkey, fill_source(p, 'Z', 4096), 4096, false, 0);
    wait_sends(p, 3000);
    int ok_before = p.send_ok, failed_before = p.send_failed;
    printf("  after FIN: %d ok, %d failed (plain writes into the ring, unaccounted)\n", ok_before, failed_before);
    // The server reads after 1 s, sees the end, and closes: its kernel
    // socket then ends ours.
    pollfd pfd{p.tcp, POLLIN, 0};
    int ready = poll(&pfd, 1, 8000);
    char b[8];
    ssize_t r = ready > 0 ? recv(p.tcp, b, sizeof b, 0) : -1;
    printf("  server closed: tcp %s\n", r == 0 ? "eof" : "no end within 8 s");
    usleep(300 * 1000);
    // Into the ring of a closed socket (its rkey must be dead, or its queue
    // pair gone): rdma_cm's DISCONNECTED is not read, so our queue pair is
    // still in RTS and the writes go on the wire.
    post(p, IBV_WR_RDMA_WRITE, p.peer_addr, p.peer_rkey, fill_source(p, 'Z', 64), 64, false, 0);
    post(p, IBV_WR_RDMA_WRITE_WITH_IMM, p.peer_addr, p.peer_rkey, fill_source(p, 'Z', 64), 64, true,
         kData | pos(p.tail + 64));
    wait_sends(p, 5000);
    int late_ok = p.send_ok - ok_before;
    printf("  after the server's close: %d ok, %d failed%s%s\n", late_ok, p.send_failed - failed_before,
           p.send_failed > failed_before ? ", first error " : "",
           p.send_failed > failed_before ? ibv_wc_status_str(p.first_error) : "");
    report(p, mode.c_str(), 500);
    if (r != 0) {
      printf("FAIL: write-after-fin: the server did not close the connection\n");
      ok = false;
    } else if (late_ok > 0) {
      printf("FAIL: write-after-fin: a write into a closed socket's ring was acknowledged\n");
      ok = false;
    }
  } else if (mode == "resume-alone") {
    ok = resume_alone(p);
    report(p, mode.c_str(), 500);
  } else {
    fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  // Leave: the server sees the rdma_cm connection and the TCP socket go.
  if (p.id) rdma_disconnect(p.id);
  if (p.tcp >= 0) close(p.tcp);
  printf("%s: %s\n", ok ? "DONE" : "FAILED", mode.c_str());
  return ok ? 0 : 1;
}
