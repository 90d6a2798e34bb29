// hostile_ud ADDR PORT [SERVER_PID]: a hostile peer of a preloaded UDP
// socket (run_hostile_ud.sh's udp_pair server on ADDR:PORT), speaking raw
// verbs from its own UD queue pair (docs/protocol.md sections 6 and 6.1).
//
// It resolves ADDR:PORT with SIDR and a valid ResolveRequest (so it learns
// the server's UD QPN, qkey and socket cookie from the ResolveAnswer), then
// runs, one after the other, printing a line per mode:
//   1 garbage       random bytes of random lengths 0..MTU: nothing back;
//   2 bad headers   valid magic, each field broken in turn: nothing back;
//   3 unknown cookie a valid ANNOUNCE naming a cookie the server lacks:
//                   nothing back; then a valid DATA naming it: an
//                   UNREACH back (source cookie = the one named, destination
//                   cookie = ours, ports swapped, the DATA's id), in
//                   bounded time;
//   4 fragment bomb first fragments (0 of 67) of many distinct 65,507-byte
//                   datagrams: the server's VmRSS (SERVER_PID) grows by
//                   at most 16 MiB;
//   5 fragments     duplicate and mismatched fragments of one datagram, then
//                   a whole valid 5,000-byte datagram in fragments: echoed
//                   back byte-exact (over UD to our QP, or through the
//                   kernel to our UDP port; which one is printed);
//   6 flood         many valid small DATA without reading the echoes: the
//                   server answers a marker datagram afterwards;
//   7 path churn    DATA from distinct source cookies until the server has
//                   taken 4,300 (each a path back it learns, with an
//                   address handle of its own), then a new sender (another
//                   port of ours): its echo must still come over UD.
// Our source port is a real UDP port (a kernel socket bound on ADDR), so the
// server's echo has somewhere to go either way. Every wait and loop is
// bounded. Exit 0 when every expectation held, 1 when one did not, 77 when
// there is no device. VSOCK_HOSTILE_UD_FLOOD (default 20000),
// VSOCK_HOSTILE_UD_BOMB (default 2000) and VSOCK_HOSTILE_UD_CHURN (default
// 4300) change the counts, VSOCK_HOSTILE_UD_MODES (default 1234567)
// which modes run in which order.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cm_test_support.hpp"
#include "rdma/address_handle.hpp"
#include "rdma/cm_udp_resolver.hpp"
#include "rdma/grh.hpp"
#include "rdma/memory_region.hpp"
#include "rdma/ud_queue_pair.hpp"
#include "sock/wire/datagram_header.hpp"
#include "sock/wire/fragment_layout.hpp"
#include "sock/wire/protocol.hpp"
#include "sock/wire/udp_resolve.hpp"

namespace vsock::test {
namespace {

namespace wire = sock::wire;

constexpr const char* kProgram = "hostile_ud";
constexpr uint32_t kReceiveSlots = 256;
constexpr uint32_t kSendSlots = 128;
constexpr int kQuietMs = 1500;      // how long "nothing back" is watched
constexpr int kReplyMs = 3000;      // how long an expected reply is awaited
constexpr int kAttempts = 3;        // sends of an expected-reply case (UD may lose one)
constexpr size_t kRssSlackKb = 16 * 1024;

using wire::DatagramHeader;
using wire::DatagramType;
using wire::kDatagramHeaderSize;

long env_count(const char* name, long fallback, long max) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  long value = atol(text);
  return value > 0 && value <= max ? value : fallback;
}

long vm_rss_kb(int pid) {
  if (pid <= 0) return -1;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/status", pid);
  FILE* f = fopen(path, "r");
  if (f == nullptr) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
  fclose(f);
  return kb;
}

bool alive(int pid) { return pid <= 0 || kill(pid, 0) == 0; }

// What arrived and how, for one watch.
struct Arrival {
  bool over_ud = false;
  bool parsed = false;          // over UD: the header parsed
  DatagramHeader header;        // when parsed
  std::vector<uint8_t> payload; // UD: after the header; kernel: the datagram
  uint32_t source_qpn = 0;
  uint32_t byte_len = 0;        // UD: the completion's (GRH included)
};

class Peer {
 public:
  int open(const std::string& ip, uint16_t server_port);

  // Sends `length` raw bytes (header included) at `data` to the server's QP.
  bool send_raw(const uint8_t* data, size_t length);
  // A header and `payload_length` bytes of payload at `payload` (any value
  // in the header, even a broken one: it is encoded as given).
  bool send_message(const DatagramHeader& header, const uint8_t* payload, size_t payload_length);
  // Waits for every posted send to complete (bounded).
  bool drain_sends(int timeout_ms);
  // Watches the QP and the kernel socket for `timeout_ms` (or until
  // `stop` returns true), calling `seen` for each arrival. Receive buffers
  // are posted again unless `repost` is false. Returns the arrivals seen.
  int watch(int timeout_ms, const std::function<bool(const Arrival&)>& seen, bool repost = true);
  // Posts again every receive buffer taken while not reposting.
  bool repost_all();
  // Binds another kernel UDP socket on ADDR: its port becomes our source
  // port (a destination the server has not seen yet).
  bool new_port();

  DatagramHeader data_header(uint32_t id, uint64_t destination_cookie) const {
    DatagramHeader h;
    h.type = DatagramType::kData;
    h.source_port = my_port_;
    h.destination_port = server_port_;
    h.datagram_id = id;
    h.destination_cookie = destination_cookie;
    h.source_cookie = my_cookie_;
    return h;
  }

  uint64_t server_cookie() const { return server_cookie_; }
  uint64_t my_cookie() const { return my_cookie_; }
  void set_my_cookie(uint64_t cookie) { my_cookie_ = cookie; }
  uint16_t my_port() const { return my_port_; }
  uint16_t server_port() const { return server_port_; }
  uint32_t server_qpn() const { return server_qpn_; }
  uint32_t mtu() const { return mtu_; }
  uint64_t send_errors() const { return send_errors_; }

 private:
  bool reap(bool wait, int timeout_ms);
  uint32_t slot_bytes() const { return static_cast<uint32_t>(rdma::kGrhSize) + mtu_; }
  uint8_t* receive_slot(uint64_t i) const { return receive_pool_.data() + (i % kReceiveSlots) * slot_bytes(); }

  CmSide side_;
  rdma::CompletionQueue send_cq_;
  rdma::UdQueuePair qp_;
  rdma::MemoryRegion receive_pool_;
  rdma::MemoryRegion send_pool_;
  rdma::AddressHandle ah_;
  std::vector<uint64_t> unposted_;
  uint32_t mtu_ = 0;
  uint64_t posted_ = 0, completed_ = 0, send_errors_ = 0;
  uint32_t server_qpn_ = 0;
  uint64_t server_cookie_ = 0;
  uint64_t my_cookie_ = 0;
  uint16_t my_port_ = 0;
  uint16_t server_port_ = 0;
  int kernel_fd_ = -1;
  std::string ip_;
};

int Peer::open(const std::string& ip, uint16_t server_port) {
  int rc = open_cm_side(kProgram, &side_);
  if (rc != 0) return rc;
  mtu_ = 128u << side_.device.active_mtu();
  server_port_ = server_port;
  // The receive CQ is side_.cm's (64 deep): ours must hold every posted receive.
  auto receive_cq = rdma::CompletionQueue::create(side_.device, kReceiveSlots * 2, false);
  auto send_cq = rdma::CompletionQueue::create(side_.device, kSendSlots * 2, false);
  if (!receive_cq || !send_cq) {
    fprintf(stderr, "%s: FAILED: CQs\n", kProgram);
    return 1;
  }
  side_.cq = std::move(receive_cq.value());
  send_cq_ = std::move(send_cq.value());
  rdma::UdQpConfig config;
  config.max_send_wr = kSendSlots;
  config.max_recv_wr = kReceiveSlots;
  auto qp = rdma::UdQueuePair::create(side_.device, side_.pd, send_cq_, side_.cq, config);
  if (!qp) {
    fprintf(stderr, "%s: FAILED: UdQueuePair::create: %s\n", kProgram, strerror(qp.error()));
    return 1;
  }
  qp_ = std::move(qp.value());
  auto receive_pool =
      rdma::MemoryRegion::allocate(side_.pd, size_t{kReceiveSlots} * slot_bytes(), IBV_ACCESS_LOCAL_WRITE);
  auto send_pool = rdma::MemoryRegion::allocate(side_.pd, size_t{kSendSlots} * mtu_, IBV_ACCESS_LOCAL_WRITE);
  if (!receive_pool || !send_pool) {
    fprintf(stderr, "%s: FAILED: registering buffers\n", kProgram);
    return 1;
  }
  receive_pool_ = std::move(receive_pool.value());
  send_pool_ = std::move(send_pool.value());
  for (uint64_t i = 0; i < kReceiveSlots; ++i) unposted_.push_back(i);
  if (!repost_all()) return 1;

  // A real UDP port of ours on ADDR: the source port of everything we send.
  ip_ = ip;
  if (!new_port()) return 1;
  std::random_device seed;
  std::mt19937_64 random(seed());
  do my_cookie_ = random(); while (my_cookie_ == 0);

  // SIDR with a valid ResolveRequest: the answer names the socket's cookie.
  sockaddr_storage destination{};
  if (!make_address(ip, server_port, &destination)) return 1;
  uint64_t nonce = random();
  uint8_t request[wire::kResolveRequestSize];
  wire::encode(wire::ResolveRequest{nonce}, request);
  auto resolved = rdma::sidr_resolve_blocking(side_.channel, reinterpret_cast<sockaddr*>(&destination), nullptr,
                                              10000, request, sizeof request);
  if (!resolved || resolved.value().outcome() != rdma::SidrOutcome::kResolved) {
    fprintf(stderr, "%s: FAILED: SIDR to %s:%u: %s\n", kProgram, ip.c_str(), server_port,
            resolved ? rdma::sidr_outcome_name(resolved.value().outcome()) : strerror(resolved.error()));
    return 1;
  }
  const rdma::SidrResult& result = resolved.value().result();
  auto answer = wire::parse_resolve_answer(result.private_data.bytes, result.private_data.length);
  if (!answer || answer.value().nonce != nonce || result.qkey != rdma::kUdQkey) {
    fprintf(stderr, "%s: FAILED: the ResolveAnswer (%zu bytes) does not parse, or another nonce/qkey (0x%x)\n",
            kProgram, result.private_data.length, result.qkey);
    return 1;
  }
  server_qpn_ = result.qpn;
  server_cookie_ = answer.value().cookie;
  auto ah = rdma::AddressHandle::create(side_.pd, result.ah_attr);
  if (!ah) {
    fprintf(stderr, "%s: FAILED: AH from the SIDR reply: %s\n", kProgram, strerror(ah.error()));
    return 1;
  }
  ah_ = std::move(ah.value());
  printf("%s: our UD QP %u, UDP port %u, cookie %016llx, MTU %u; server %s:%u is UD QP %u, qkey 0x%x, cookie "
         "%016llx\n",
         kProgram, qp_.qpn(), my_port_, static_cast<unsigned long long>(my_cookie_), mtu_, ip.c_str(), server_port,
         server_qpn_, result.qkey, static_cast<unsigned long long>(server_cookie_));
  return 0;
}

bool Peer::new_port() {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
  sockaddr_storage local{};
  if (fd < 0 || !make_address(ip_, 0, &local) ||
      bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(sockaddr_in)) != 0) {
    fprintf(stderr, "%s: FAILED: binding a UDP socket on %s: %s\n", kProgram, ip_.c_str(), strerror(errno));
    if (fd >= 0) close(fd);
    return false;
  }
  socklen_t length = sizeof local;
  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length);
  if (kernel_fd_ >= 0) close(kernel_fd_);
  kernel_fd_ = fd;
  my_port_ = ntohs(reinterpret_cast<sockaddr_in&>(local).sin_port);
  return true;
}

bool Peer::repost_all() {
  if (unposted_.empty()) return true;
  std::vector<ibv_sge> sges(unposted_.size());
  std::vector<ibv_recv_wr> wrs(unposted_.size());
  for (size_t i = 0; i < unposted_.size(); ++i) {
    sges[i] = ibv_sge{reinterpret_cast<uintptr_t>(receive_slot(unposted_[i])), slot_bytes(), receive_pool_.lkey()};
    wrs[i] = ibv_recv_wr{};
    wrs[i].wr_id = unposted_[i];
    wrs[i].sg_list = &sges[i];
    wrs[i].num_sge = 1;
    wrs[i].next = i + 1 < unposted_.size() ? &wrs[i + 1] : nullptr;
  }
  if (!qp_.post_recv(wrs.data())) {
    fprintf(stderr, "%s: FAILED: post_recv\n", kProgram);
    return false;
  }
  unposted_.clear();
  return true;
}

bool Peer::reap(bool wait, int timeout_ms) {
  Deadline deadline(timeout_ms / 1000.0);
  for (long polls = 0;; ++polls) {
    ibv_wc wc[16];
    auto got = send_cq_.poll(wc, 16);
    if (!got) return false;
    for (int i = 0; i < got.value(); ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) ++send_errors_;
      if (wc[i].wr_id + 1 > completed_) completed_ = wc[i].wr_id + 1;
    }
    if (!wait || got.value() > 0) return true;
    if (deadline.expired()) return false;
    if (polls > 1000) usleep(100);
  }
}

bool Peer::send_raw(const uint8_t* data, size_t length) {
  if (length > mtu_) return false;
  if (posted_ - completed_ >= kSendSlots) reap(false, 0);
  Deadline deadline(kReplyMs / 1000.0);
  while (posted_ - completed_ >= kSendSlots) {
    if (!reap(true, deadline.remaining_ms(kReplyMs)) && deadline.expired()) {
      fprintf(stderr, "%s: FAILED: no send completion in %d ms\n", kProgram, kReplyMs);
      return false;
    }
  }
  const uint64_t number = posted_++;
  uint8_t* slot = send_pool_.data() + (number % kSendSlots) * mtu_;
  if (length > 0) std::memcpy(slot, data, length);
  ibv_sge sge{reinterpret_cast<uintptr_t>(slot), static_cast<uint32_t>(length), send_pool_.lkey()};
  ibv_send_wr wr{};
  wr.wr_id = number;
  wr.sg_list = length > 0 ? &sge : nullptr;
  wr.num_sge = length > 0 ? 1 : 0;
  wr.opcode = IBV_WR_SEND;
  // Every send signalled: drain_sends() can then wait for the last one.
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = ah_.get();
  wr.wr.ud.remote_qpn = server_qpn_;
  wr.wr.ud.remote_qkey = rdma::kUdQkey;
  if (!qp_.post_send(&wr)) {
    fprintf(stderr, "%s: FAILED: post_send\n", kProgram);
    return false;
  }
  return true;
}

bool Peer::send_message(const DatagramHeader& header, const uint8_t* payload, size_t payload_length) {
  std::vector<uint8_t> message(kDatagramHeaderSize + payload_length);
  wire::encode(header, message.data());
  if (payload_length > 0) std::memcpy(message.data() + kDatagramHeaderSize, payload, payload_length);
  return send_raw(message.data(), message.size());
}

bool Peer::drain_sends(int timeout_ms) {
  Deadline deadline(timeout_ms / 1000.0);
  while (completed_ < posted_) {
    if (!reap(true, deadline.remaining_ms(timeout_ms)) && deadline.expired()) {
      fprintf(stderr, "%s: %llu sends not complete after %d ms\n", kProgram,
              static_cast<unsigned long long>(posted_ - completed_), timeout_ms);
      return false;
    }
  }
  return true;
}

int Peer::watch(int timeout_ms, const std::function<bool(const Arrival&)>& seen, bool repost) {
  Deadline deadline(timeout_ms / 1000.0);
  int count = 0;
  std::vector<uint8_t> buffer(65536);
  for (long polls = 0; !deadline.expired(); ++polls) {
    bool any = false;
    // One at a time: a handler that ends the watch leaves nothing taken
    // and unhandled behind.
    ibv_wc wc[1];
    auto got = side_.cq.poll(wc, 1);
    if (got) {
      for (int i = 0; i < got.value(); ++i) {
        any = true;
        unposted_.push_back(wc[i].wr_id);
        if (wc[i].status != IBV_WC_SUCCESS) continue;
        const uint8_t* slot = receive_slot(wc[i].wr_id);
        Arrival a;
        a.over_ud = true;
        a.source_qpn = wc[i].src_qp;
        a.byte_len = wc[i].byte_len;
        if (wc[i].byte_len >= rdma::kGrhSize && wc[i].byte_len <= slot_bytes()) {
          size_t len = wc[i].byte_len - rdma::kGrhSize;
          auto h = wire::parse_datagram_header(slot + rdma::kGrhSize, len);
          if (h) {
            a.parsed = true;
            a.header = h.value();
            a.payload.assign(slot + rdma::kGrhSize + kDatagramHeaderSize, slot + rdma::kGrhSize + len);
          } else {
            a.payload.assign(slot + rdma::kGrhSize, slot + rdma::kGrhSize + len);
          }
        }
        ++count;
        if (seen(a)) {
          if (repost) repost_all();
          return count;
        }
      }
      if (repost && unposted_.size() >= 32) repost_all();
    }
    for (int k = 0; k < 16; ++k) {
      ssize_t n = recv(kernel_fd_, buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (n < 0) break;
      any = true;
      Arrival a;
      a.payload.assign(buffer.data(), buffer.data() + n);
      ++count;
      if (seen(a)) {
        if (repost) repost_all();
        return count;
      }
    }
    if (!any && polls > 200) usleep(200);
  }
  if (repost) repost_all();
  return count;
}

// ------------------------------------------------------------- the modes --

struct Outcome {
  bool ok = true;
  void fail(const char* mode, const char* what) {
    ok = false;
    printf("%s: FAILED: %s: %s\n", kProgram, mode, what);
  }
};

std::string describe(const Arrival& a) {
  char text[200];
  if (!a.over_ud)
    snprintf(text, sizeof text, "kernel datagram of %zu B", a.payload.size());
  else if (!a.parsed)
    snprintf(text, sizeof text, "UD message from QP %u, %u B, no valid header", a.source_qpn, a.byte_len);
  else
    snprintf(text, sizeof text, "UD type %u from QP %u, ports %u->%u, id %u, cookies %016llx->%016llx, %u B",
             static_cast<unsigned>(a.header.type), a.source_qpn, a.header.source_port, a.header.destination_port,
             a.header.datagram_id, static_cast<unsigned long long>(a.header.source_cookie),
             static_cast<unsigned long long>(a.header.destination_cookie), a.header.payload_length);
  return text;
}

// Watches for kQuietMs: every arrival is unexpected.
int expect_nothing(Peer& peer, const char* mode) {
  int n = peer.watch(kQuietMs, [&](const Arrival& a) {
    printf("%s: %s: unexpected: %s\n", kProgram, mode, describe(a).c_str());
    return false;
  });
  return n;
}

void mode_garbage(Peer& peer, Outcome* out) {
  std::mt19937 random(0x6a7b);
  const int kMessages = 300;
  std::vector<uint8_t> bytes(peer.mtu());
  size_t total = 0;
  int sent = 0;
  for (int i = 0; i < kMessages; ++i) {
    size_t length = random() % (peer.mtu() + 1);
    if (i == 0) length = 0;
    if (i == 1) length = peer.mtu();
    if (i == 2) length = kDatagramHeaderSize;
    for (size_t k = 0; k < length; ++k) bytes[k] = static_cast<uint8_t>(random());
    if (length >= 1 && bytes[0] == 'V') bytes[0] = 'W';  // never the magic
    if (!peer.send_raw(bytes.data(), length)) break;
    ++sent;
    total += length;
  }
  peer.drain_sends(kReplyMs);
  int back = expect_nothing(peer, "garbage");
  printf("%s: mode 1 garbage: sent %d messages of 0..%u B (%zu B in all), none with the magic; %d came back\n",
         kProgram, sent, peer.mtu(), total, back);
  if (sent != kMessages) out->fail("garbage", "could not send every message");
  if (back != 0) out->fail("garbage", "something came back");
}

// One broken variant: raw bytes (a valid DATA to the real cookie, then broken).
struct Broken {
  const char* what;
  std::function<void(std::vector<uint8_t>&)> edit;
};

void mode_bad_headers(Peer& peer, Outcome* out, uint32_t* next_id) {
  const size_t kPayload = 16;
  auto store16 = [](std::vector<uint8_t>& m, size_t at, uint16_t v) {
    m[at] = static_cast<uint8_t>(v >> 8);
    m[at + 1] = static_cast<uint8_t>(v);
  };
  std::vector<Broken> cases = {
      {"version 1", [](std::vector<uint8_t>& m) { m[4] = 1; }},
      {"version 2", [](std::vector<uint8_t>& m) { m[4] = 2; }},  // the one before positions
      {"version 3", [](std::vector<uint8_t>& m) { m[4] = 3; }},  // the one before Bound's count
      {"version 5", [](std::vector<uint8_t>& m) { m[4] = 5; }},
      {"version 0", [](std::vector<uint8_t>& m) { m[4] = 0; }},
      {"type 0", [](std::vector<uint8_t>& m) { m[5] = 0; }},
      {"type 5", [](std::vector<uint8_t>& m) { m[5] = 5; }},
      {"type 0xff", [](std::vector<uint8_t>& m) { m[5] = 0xff; }},
      {"flags 0x04 (unknown bit)", [](std::vector<uint8_t>& m) { m[6] = 0x04; }},
      {"flags 0x80 (unknown bit)", [](std::vector<uint8_t>& m) { m[6] = 0x80; }},
      {"flags 0x02 (no-loop without multicast)", [](std::vector<uint8_t>& m) { m[6] = 0x02; }},
      {"reserved byte 1", [](std::vector<uint8_t>& m) { m[7] = 1; }},
      {"reserved byte 0xff", [](std::vector<uint8_t>& m) { m[7] = 0xff; }},
      {"fragment count 0", [&](std::vector<uint8_t>& m) { store16(m, 34, 0); }},
      {"fragment count 513", [&](std::vector<uint8_t>& m) { store16(m, 34, 513); }},
      {"fragment count 0xffff", [&](std::vector<uint8_t>& m) { store16(m, 34, 0xffff); }},
      {"index 1 of 1", [&](std::vector<uint8_t>& m) { store16(m, 32, 1); }},
      {"index 2 of 2 (total 32)",
       [&](std::vector<uint8_t>& m) {
         store16(m, 32, 2);
         store16(m, 34, 2);
         store16(m, 36, 32);
       }},
      {"index 0xffff of 2 (total 32)",
       [&](std::vector<uint8_t>& m) {
         store16(m, 32, 0xffff);
         store16(m, 34, 2);
         store16(m, 36, 32);
       }},
      {"payload_length 17, 16 received", [&](std::vector<uint8_t>& m) { store16(m, 38, 17); }},
      {"payload_length 15, 16 received", [&](std::vector<uint8_t>& m) { store16(m, 38, 15); }},
      {"payload_length 0xffff, 16 received", [&](std::vector<uint8_t>& m) { store16(m, 38, 0xffff); }},
      {"16 received, 8 more bytes than payload_length", [](std::vector<uint8_t>& m) { m.resize(m.size() + 8, 0xee); }},
      {"total 17 with payload 16 (span mismatch)", [&](std::vector<uint8_t>& m) { store16(m, 36, 17); }},
      {"total 65508 (above the maximum)",
       [&](std::vector<uint8_t>& m) {
         store16(m, 36, 65508);
         store16(m, 34, 512);
       }},
      {"more fragments than bytes (total 1, count 2)",
       [&](std::vector<uint8_t>& m) {
         store16(m, 36, 1);
         store16(m, 34, 2);
       }},
      {"source port 0", [&](std::vector<uint8_t>& m) { store16(m, 8, 0); }},
      {"destination port 0", [&](std::vector<uint8_t>& m) { store16(m, 10, 0); }},
      {"source cookie 0", [](std::vector<uint8_t>& m) { std::memset(m.data() + 24, 0, 8); }},
      {"destination cookie 0 (unicast)", [](std::vector<uint8_t>& m) { std::memset(m.data() + 16, 0, 8); }},
      {"REVOKE with a datagram id and payload", [](std::vector<uint8_t>& m) { m[5] = 3; }},
      {"UNREACH with payload", [](std::vector<uint8_t>& m) { m[5] = 2; }},
      {"ANNOUNCE with a datagram id and payload", [](std::vector<uint8_t>& m) { m[5] = 4; }},
      {"header cut to 39 bytes", [](std::vector<uint8_t>& m) { m.resize(39); }},
      {"header cut to 4 bytes (the magic alone)", [](std::vector<uint8_t>& m) { m.resize(4); }},
  };
  const int kCopies = 3;
  int sent = 0;
  for (const Broken& c : cases) {
    for (int copy = 0; copy < kCopies; ++copy) {
      DatagramHeader h = peer.data_header((*next_id)++, peer.server_cookie());
      h.total_length = kPayload;
      h.payload_length = kPayload;
      std::vector<uint8_t> m(kDatagramHeaderSize + kPayload, 0x42);
      wire::encode(h, m.data());
      c.edit(m);
      // Our own parser must refuse each variant, or the case tests nothing.
      if (copy == 0 && wire::parse_datagram_header(m.data(), m.size())) {
        printf("%s: mode 2: test bug: the variant \"%s\" parses\n", kProgram, c.what);
        out->fail("bad headers", "a variant is not malformed");
      }
      if (peer.send_raw(m.data(), m.size())) ++sent;
    }
  }
  peer.drain_sends(kReplyMs);
  int back = expect_nothing(peer, "bad headers");
  printf("%s: mode 2 bad headers: %zu variants x %d = %d messages (valid magic, one field broken each: version, "
         "type, flags, reserved, fragment count 0/513, index >= count, payload_length vs received length, total, "
         "ports 0, cookies 0, cut headers); %d came back\n",
         kProgram, cases.size(), kCopies, sent, back);
  if (sent != static_cast<int>(cases.size()) * kCopies) out->fail("bad headers", "could not send every message");
  if (back != 0) out->fail("bad headers", "something came back");
}

void mode_unknown_cookie(Peer& peer, Outcome* out, uint32_t* next_id) {
  const uint64_t bogus = peer.server_cookie() ^ 0x5a5a5a5a00000001ull;
  // An ANNOUNCE naming a cookie the server does not have is dropped
  // without an answer (docs/protocol.md §6): nothing comes back.
  DatagramHeader announce = peer.data_header(0, bogus);
  announce.type = DatagramType::kAnnounce;
  int announce_back = -1;
  if (peer.send_message(announce, nullptr, 0)) {
    peer.drain_sends(kReplyMs);
    announce_back = expect_nothing(peer, "announce to an unknown cookie");
  }
  printf("%s: mode 3 unknown cookie: an ANNOUNCE naming %016llx: %d messages came back\n", kProgram,
         static_cast<unsigned long long>(bogus), announce_back);
  if (announce_back != 0) out->fail("unknown cookie", "an ANNOUNCE was answered (or could not be sent)");
  uint8_t payload[32];
  for (size_t i = 0; i < sizeof payload; ++i) payload[i] = static_cast<uint8_t>(i * 3);
  int unreaches = 0, others = 0, attempts = 0;
  bool good = false;
  double start = now_seconds(), took_ms = 0;
  std::string wrong;
  for (; attempts < kAttempts && !good; ++attempts) {
    const uint32_t id = (*next_id)++;
    DatagramHeader h = peer.data_header(id, bogus);
    h.total_length = sizeof payload;
    h.payload_length = sizeof payload;
    start = now_seconds();
    if (!peer.send_message(h, payload, sizeof payload)) break;
    peer.watch(kReplyMs, [&](const Arrival& a) {
      if (!a.over_ud || !a.parsed || a.header.type != DatagramType::kUnreach) {
        ++others;
        printf("%s: mode 3: besides: %s\n", kProgram, describe(a).c_str());
        return false;
      }
      ++unreaches;
      took_ms = (now_seconds() - start) * 1000;
      const DatagramHeader& r = a.header;
      if (r.source_cookie == bogus && r.destination_cookie == peer.my_cookie() &&
          r.source_port == peer.server_port() && r.destination_port == peer.my_port() && r.datagram_id == id &&
          a.source_qpn == peer.server_qpn() && r.payload_length == 0) {
        good = true;
        return true;
      }
      wrong = describe(a);
      return false;
    });
  }
  printf("%s: mode 3 unknown cookie: %d DATA of 32 B to port %u naming cookie %016llx (not the server's); "
         "%d UNREACH back%s%s (%.1f ms after the last send), %d other messages\n",
         kProgram, attempts, peer.server_port(), static_cast<unsigned long long>(bogus), unreaches,
         good ? ", correct: type UNREACH, source cookie = the one named, destination cookie = ours, ports swapped, "
                "the DATA's id, from the server's QP"
              : "",
         wrong.empty() ? "" : (", WRONG: " + wrong).c_str(), took_ms, others);
  if (!good) out->fail("unknown cookie", "no correct UNREACH came back in time");
}

void mode_fragment_bomb(Peer& peer, Outcome* out, uint32_t* next_id, int server_pid, long count) {
  const uint16_t total = static_cast<uint16_t>(wire::kMaxDatagramSize);
  const uint16_t fragments = static_cast<uint16_t>((total + (peer.mtu() - kDatagramHeaderSize) - 1) /
                                                   (peer.mtu() - kDatagramHeaderSize));
  auto span = wire::fragment_span(total, fragments, 0);
  if (!span) {
    out->fail("fragment bomb", "no layout");
    return;
  }
  std::vector<uint8_t> payload(span.value().length, 0xb0);
  long before = vm_rss_kb(server_pid), peak = before;
  long sent = 0;
  for (long i = 0; i < count; ++i) {
    DatagramHeader h = peer.data_header((*next_id)++, peer.server_cookie());
    h.fragment_index = 0;
    h.fragment_count = fragments;
    h.total_length = total;
    h.payload_length = static_cast<uint16_t>(payload.size());
    if (!peer.send_message(h, payload.data(), payload.size())) break;
    ++sent;
    if (i % 250 == 249) {
      long now = vm_rss_kb(server_pid);
      if (now > peak) peak = now;
      // Give the 2 emulated vCPUs a moment: the point is the server's
      // memory, not how many the device drops for want of a receive.
      peer.drain_sends(kReplyMs);
      usleep(20000);
    }
  }
  peer.drain_sends(kReplyMs);
  int back = expect_nothing(peer, "fragment bomb");
  long after = vm_rss_kb(server_pid);
  if (after > peak) peak = after;
  printf("%s: mode 4 fragment bomb: sent %ld first fragments (index 0 of %u, %zu B) of distinct %u-byte datagrams "
         "(%.1f MiB promised); server VmRSS %ld kB before, %ld kB after, peak %ld kB (%+ld kB); %d came back; "
         "server %s\n",
         kProgram, sent, fragments, payload.size(), total, sent * double(total) / (1 << 20), before, after, peak,
         peak - before, back, alive(server_pid) ? "alive" : "GONE");
  if (sent != count) out->fail("fragment bomb", "could not send every fragment");
  if (!alive(server_pid)) out->fail("fragment bomb", "the server died");
  if (server_pid > 0 && (before < 0 || after < 0)) out->fail("fragment bomb", "cannot read the server's VmRSS");
  if (before >= 0 && peak - before > static_cast<long>(kRssSlackKb))
    out->fail("fragment bomb", "the server's memory grew by more than 16 MiB");
  if (back != 0) out->fail("fragment bomb", "something came back");
}

uint8_t echo_byte(uint32_t seed, size_t at) { return static_cast<uint8_t>(seed * 151u + at * 13u + (at >> 7)); }

// Sends `length` bytes (pattern `seed`) as its fewest fragments, with
// datagram id `id`; fragment `order` says the order (indexes).
bool send_fragmented(Peer& peer, uint32_t id, uint32_t seed, uint16_t length, const std::vector<uint16_t>& order,
                     uint16_t count) {
  std::vector<uint8_t> whole(length);
  for (size_t i = 0; i < length; ++i) whole[i] = echo_byte(seed, i);
  for (uint16_t index : order) {
    auto span = wire::fragment_span(length, count, index);
    if (!span) return false;
    DatagramHeader h = peer.data_header(id, peer.server_cookie());
    h.fragment_index = index;
    h.fragment_count = count;
    h.total_length = length;
    h.payload_length = static_cast<uint16_t>(span.value().length);
    if (!peer.send_message(h, whole.data() + span.value().offset, span.value().length)) return false;
  }
  return true;
}

// Collects one echoed datagram of `length` bytes with pattern `seed`: over
// UD (reassembled here from the server's fragments) or from the kernel
// socket. Returns "UD" / "kernel" / "" (none), and *exact.
std::string await_echo(Peer& peer, uint32_t seed, size_t length, int timeout_ms, bool* exact, int* fragments_seen,
                       int* other) {
  std::vector<uint8_t> want(length);
  for (size_t i = 0; i < length; ++i) want[i] = echo_byte(seed, i);
  std::map<uint32_t, std::map<uint16_t, std::vector<uint8_t>>> partial;  // id -> index -> bytes
  std::string path;
  *exact = false;
  peer.watch(timeout_ms, [&](const Arrival& a) {
    if (!a.over_ud) {
      if (a.payload.size() == length && a.payload == want) {
        path = "kernel";
        *exact = true;
        return true;
      }
      ++*other;
      return false;
    }
    const DatagramHeader& h = a.header;
    if (!a.parsed || h.type != DatagramType::kData || h.destination_cookie != peer.my_cookie() ||
        h.total_length != length || a.source_qpn != peer.server_qpn()) {
      ++*other;
      return false;
    }
    ++*fragments_seen;
    auto& held = partial[h.datagram_id];
    held[h.fragment_index] = a.payload;
    if (held.size() != h.fragment_count) return false;
    std::vector<uint8_t> whole(length);
    for (auto& [index, bytes] : held) {
      auto span = wire::fragment_span(h.total_length, h.fragment_count, index);
      if (!span || span.value().length != bytes.size()) return false;
      std::memcpy(whole.data() + span.value().offset, bytes.data(), bytes.size());
    }
    path = "UD";
    *exact = whole == want;
    if (!*exact) printf("%s: an echo over UD of %zu B differs\n", kProgram, length);
    return true;
  });
  return path;
}

void mode_fragments(Peer& peer, Outcome* out, uint32_t* next_id) {
  const uint16_t length = 5000;
  const uint32_t budget = peer.mtu() - kDatagramHeaderSize;
  const uint16_t count = static_cast<uint16_t>((length + budget - 1) / budget);
  // A datagram that never completes: fragment 0 twice (duplicate), fragment
  // 1 claiming another total, fragment 2 another count (mismatched), and a
  // fragment 0 of a second id sent three times.
  const uint32_t broken = (*next_id)++;
  int junk = 0;
  bool sent_ok = send_fragmented(peer, broken, 1, length, {0, 0, 0}, count);
  junk += 3;
  {
    auto span = wire::fragment_span(length - 1, count, 1);
    DatagramHeader h = peer.data_header(broken, peer.server_cookie());
    h.fragment_index = 1;
    h.fragment_count = count;
    h.total_length = length - 1;
    h.payload_length = static_cast<uint16_t>(span.value().length);
    std::vector<uint8_t> bytes(span.value().length, 0x77);
    sent_ok = sent_ok && peer.send_message(h, bytes.data(), bytes.size());
    auto span2 = wire::fragment_span(length, count + 1, 2);
    h.fragment_index = 2;
    h.fragment_count = count + 1;
    h.total_length = length;
    h.payload_length = static_cast<uint16_t>(span2.value().length);
    bytes.assign(span2.value().length, 0x78);
    sent_ok = sent_ok && peer.send_message(h, bytes.data(), bytes.size());
    junk += 2;
  }
  peer.drain_sends(kReplyMs);
  // Then the whole valid datagram, fragments in reverse order, its last
  // fragment twice (a duplicate inside a good datagram).
  std::vector<uint16_t> order;
  for (int i = count - 1; i >= 0; --i) order.push_back(static_cast<uint16_t>(i));
  bool exact = false;
  std::string path;
  int attempts = 0, fragments_seen = 0, other = 0;
  for (; attempts < kAttempts && path.empty(); ++attempts) {
    const uint32_t id = (*next_id)++;
    const uint32_t seed = 1000 + attempts;
    std::vector<uint16_t> with_dup = order;
    with_dup.insert(with_dup.begin() + 1, order.front());
    if (!send_fragmented(peer, id, seed, length, with_dup, count)) {
      sent_ok = false;
      break;
    }
    peer.drain_sends(kReplyMs);
    path = await_echo(peer, seed, length, kReplyMs + 2000, &exact, &fragments_seen, &other);
  }
  printf("%s: mode 5 fragments: %d junk fragments of one %u-byte datagram (3 copies of fragment 0, fragment 1 with "
         "total %u, fragment 2 with count %u), then %d x a valid %u-byte datagram in %u fragments (reverse order, one "
         "duplicate); echo came %s%s, %d UD fragments of it seen, %d other arrivals\n",
         kProgram, junk, length, length - 1, count + 1, attempts, length, count,
         path.empty() ? "NOT AT ALL" : ("over " + path).c_str(), path.empty() ? "" : (exact ? ", byte-exact" : ", WRONG"),
         fragments_seen, other);
  if (!sent_ok) out->fail("fragments", "could not send");
  if (path.empty()) out->fail("fragments", "the valid datagram was not echoed");
  else if (!exact) out->fail("fragments", "the echo differs");
}

void mode_flood(Peer& peer, Outcome* out, uint32_t* next_id, int server_pid, long count) {
  uint8_t payload[32];
  long sent = 0;
  double start = now_seconds();
  // Receives are not posted again during the flood: what the server
  // echoes finds our 256 buffers and then nothing (UD drops it).
  int echoes_during = 0;
  for (long i = 0; i < count; ++i) {
    for (size_t k = 0; k < sizeof payload; ++k) payload[k] = static_cast<uint8_t>(i + k);
    DatagramHeader h = peer.data_header((*next_id)++, peer.server_cookie());
    h.total_length = sizeof payload;
    h.payload_length = sizeof payload;
    if (!peer.send_message(h, payload, sizeof payload)) break;
    ++sent;
  }
  peer.drain_sends(kReplyMs);
  double secs = now_seconds() - start;
  // Take what came (without posting more), then give every buffer back.
  echoes_during = peer.watch(500, [](const Arrival&) { return false; }, false);
  peer.repost_all();
  int drained = peer.watch(1000, [](const Arrival&) { return false; });
  // Does it still answer? A marker datagram, echoed over UD or the kernel.
  bool exact = false;
  std::string path;
  int attempts = 0, fragments_seen = 0, other = 0;
  for (; attempts < 5 && path.empty(); ++attempts) {
    const uint32_t seed = 7000 + attempts;
    const uint16_t length = 100;
    if (!send_fragmented(peer, (*next_id)++, seed, length, {0}, 1)) break;
    peer.drain_sends(kReplyMs);
    path = await_echo(peer, seed, length, kReplyMs, &exact, &fragments_seen, &other);
  }
  printf("%s: mode 6 flood: sent %ld DATA of 32 B to the real cookie in %.2f s (%.0f/s) without reading; %d arrivals "
         "taken after it, %d more drained; a marker afterwards: %d tries, echoed %s%s; server %s\n",
         kProgram, sent, secs, sent / (secs > 0 ? secs : 1), echoes_during, drained, attempts,
         path.empty() ? "NOT AT ALL" : ("over " + path).c_str(), path.empty() ? "" : (exact ? ", byte-exact" : ", WRONG"),
         alive(server_pid) ? "alive" : "GONE");
  if (sent != count) out->fail("flood", "could not send every datagram");
  if (!alive(server_pid)) out->fail("flood", "the server died");
  if (path.empty() || !exact) out->fail("flood", "the server does not answer afterwards");
}

// Many distinct senders as the server sees them (one source cookie each,
// from our one address and port): each teaches the server a path back,
// with an address handle of its own. Then a sender it has never seen (a
// new port, a new cookie): its echo must still come over UD.
void mode_path_churn(Peer& peer, Outcome* out, uint32_t* next_id, int server_pid, long count) {
  const uint64_t base = peer.my_cookie();
  uint8_t payload[16] = {};
  long sent = 0;
  int echoes = 0;
  // Until the server has answered `count` of them (each echo is one it
  // took: the device drops what finds no receive buffer), at most 3 x
  // count sends.
  for (long i = 0; i < 3 * count && echoes < count; ++i) {
    peer.set_my_cookie(base ^ (0x1000000ull * static_cast<uint64_t>(i + 1)));
    DatagramHeader h = peer.data_header((*next_id)++, peer.server_cookie());
    h.total_length = sizeof payload;
    h.payload_length = sizeof payload;
    if (!peer.send_message(h, payload, sizeof payload)) break;
    ++sent;
    if (i % 64 == 63) {
      // Paced: each is an ibv_create_ah in the server; the point is how
      // many it keeps, not how many the device drops.
      peer.drain_sends(kReplyMs);
      echoes += peer.watch(50, [](const Arrival&) { return false; });
    }
  }
  peer.drain_sends(kReplyMs);
  echoes += peer.watch(1000, [](const Arrival&) { return false; });
  // A newcomer: another port of ours, another cookie.
  peer.set_my_cookie(base ^ 0x77);
  bool ok_port = peer.new_port();
  bool exact = false;
  std::string path;
  int attempts = 0, fragments_seen = 0, other = 0;
  for (; ok_port && attempts < kAttempts && path.empty(); ++attempts) {
    const uint32_t seed = 9000 + attempts;
    if (!send_fragmented(peer, (*next_id)++, seed, 200, {0}, 1)) break;
    peer.drain_sends(kReplyMs);
    path = await_echo(peer, seed, 200, kReplyMs, &exact, &fragments_seen, &other);
  }
  printf("%s: mode 7 path churn: sent %ld DATA of 16 B from one address and port with %ld distinct source cookies "
         "until %d echoes came back (each one the server took); then a new sender (port %u): its echo came %s%s; server %s\n",
         kProgram, sent, sent, echoes, peer.my_port(), path.empty() ? "NOT AT ALL" : ("over " + path).c_str(),
         path.empty() ? "" : (exact ? ", byte-exact" : ", WRONG"), alive(server_pid) ? "alive" : "GONE");
  if (echoes < count) out->fail("path churn", "the server took fewer than asked");
  if (!alive(server_pid)) out->fail("path churn", "the server died");
  if (path.empty() || !exact) out->fail("path churn", "the new sender got no echo");
  else if (path != "UD")
    out->fail("path churn", "the server no longer sends over UD to a new peer: one peer used up its address handles");
}

int run(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: %s ADDR PORT [SERVER_PID]\n", kProgram);
    return 2;
  }
  std::string ip = argv[1];
  uint16_t port = static_cast<uint16_t>(atoi(argv[2]));
  int server_pid = argc == 4 ? atoi(argv[3]) : 0;
  long flood = env_count("VSOCK_HOSTILE_UD_FLOOD", 20000, 1000000);
  long bomb = env_count("VSOCK_HOSTILE_UD_BOMB", 2000, 100000);
  long churn = env_count("VSOCK_HOSTILE_UD_CHURN", 4300, 100000);
  Peer peer;
  int rc = peer.open(ip, port);
  if (rc != 0) return rc;
  Outcome out;
  uint32_t next_id = 1;
  // VSOCK_HOSTILE_UD_MODES: which modes, in which order (digits 1-7;
  // default 1234567), e.g. to run one alone while looking at it.
  const char* modes = getenv("VSOCK_HOSTILE_UD_MODES");
  if (modes == nullptr || *modes == '\0') modes = "1234567";
  for (const char* m = modes; *m; ++m) {
    switch (*m) {
      case '1': mode_garbage(peer, &out); break;
      case '2': mode_bad_headers(peer, &out, &next_id); break;
      case '3': mode_unknown_cookie(peer, &out, &next_id); break;
      case '4': mode_fragment_bomb(peer, &out, &next_id, server_pid, bomb); break;
      case '5': mode_fragments(peer, &out, &next_id); break;
      case '6': mode_flood(peer, &out, &next_id, server_pid, flood); break;
      case '7': mode_path_churn(peer, &out, &next_id, server_pid, churn); break;
      default: break;
    }
  }
  if (peer.send_errors() != 0)
    printf("%s: note: %llu send completions with an error\n", kProgram,
           static_cast<unsigned long long>(peer.send_errors()));
  printf("%s: %s\n", kProgram, out.ok ? "every expectation held" : "FAILED");
  return out.ok ? 0 : 1;
}

}  // namespace
}  // namespace vsock::test

int main(int argc, char** argv) { return vsock::test::run(argc, argv); }
