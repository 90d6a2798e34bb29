// rdma_ud_endpoint: the process UD endpoint (src/sock/dgram/ud_endpoint.*)
// in two processes on the Soft-RoCE device. The client reaches the
// server's QP through an address handle built from the device's GID; the
// server answers each message through the reverse path (an address handle
// made from the completion), echoing the payload with ports and cookies
// swapped. Sizes 0, 1, 64, 900 and the largest payload; then a burst of
// more messages than the endpoint has send slots while the server does not
// poll (the client's slots are reused as completions come, and the
// server's receive pool holds the whole burst), checked in order.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "rdma/address_handle.hpp"
#include "sock/dgram/ud_endpoint.hpp"
#include "test_support.hpp"

namespace vsock::test {
namespace {

using sock::dgram::UdArrival;
using sock::dgram::UdEndpoint;
using sock::dgram::UdEndpointConfig;
namespace wire = sock::wire;

constexpr const char* kProgram = "rdma_ud_endpoint";
constexpr int kStepMs = 20000;
constexpr uint64_t kServerCookie = 0x5345525645520001ull;
constexpr uint64_t kClientCookie = 0x434C49454E540002ull;
constexpr uint16_t kServerPort = 7000;
constexpr uint16_t kClientPort = 7001;
constexpr uint32_t kBurst = 200;  // > send_slots (128), < receive_depth (256)

struct Contact {
  uint32_t qpn = 0;
  ibv_gid gid{};
};

struct Copy {
  wire::DatagramHeader header;
  std::vector<uint8_t> payload;
  const ibv_wc* completion = nullptr;
  const ibv_grh* grh = nullptr;
  uint32_t source_qpn = 0;
};

// The handler copies what it keeps: the buffer goes back to the device.
void keep(void* context, const UdArrival& arrival) {
  auto* out = static_cast<std::vector<Copy>*>(context);
  Copy copy;
  copy.header = arrival.header;
  copy.payload.assign(arrival.payload, arrival.payload + arrival.header.payload_length);
  copy.source_qpn = arrival.source_qpn;
  out->push_back(std::move(copy));
}

// One message into `out` within the deadline (busy-polls: a test).
bool wait_messages(UdEndpoint& endpoint, std::vector<Copy>* out, size_t want, const Deadline& deadline) {
  while (out->size() < want) {
    endpoint.poll(keep, out, 64);
    if (deadline.expired()) return false;
  }
  return true;
}

wire::DatagramHeader header_for(uint16_t from_port, uint16_t to_port, uint64_t from, uint64_t to, uint32_t id,
                                size_t length) {
  wire::DatagramHeader h;
  h.type = wire::DatagramType::kData;
  h.source_port = from_port;
  h.destination_port = to_port;
  h.source_cookie = from;
  h.destination_cookie = to;
  h.datagram_id = id;
  h.total_length = static_cast<uint16_t>(length);
  h.payload_length = static_cast<uint16_t>(length);
  return h;
}

bool send_retrying(UdEndpoint& endpoint, ibv_ah* ah, uint32_t qpn, const wire::DatagramHeader& header,
                   const void* data, const Deadline& deadline) {
  iovec iov{const_cast<void*>(data), header.payload_length};
  for (;;) {
    rdma::Status sent = endpoint.send(ah, qpn, header, &iov, 1);
    if (sent) return true;
    if (sent.error() != EAGAIN || deadline.expired()) {
      std::printf("%s: send of %u bytes: %s\n", kProgram, header.payload_length, std::strerror(sent.error()));
      return false;
    }
  }
}

core::Result<std::unique_ptr<UdEndpoint>> open_endpoint(rdma::Device& device) {
  return UdEndpoint::create(device, UdEndpointConfig{});
}

int server(int control) {
  int code = 0;
  auto device = open_test_device(kProgram, &code);
  if (!device) return code;
  auto endpoint = open_endpoint(device.value());
  if (!endpoint) return 1;
  UdEndpoint& e = *endpoint.value();
  Contact me{e.qpn(), device.value().gid()};
  if (!send_all(control, &me, sizeof me, kStepMs)) return 1;

  // Echo: sizes first, one at a time, each through the reverse path.
  const size_t sizes = 5;
  for (size_t n = 0; n < sizes; ++n) {
    Deadline deadline(kStepMs / 1000.0);
    std::vector<Copy> got;
    // Keep the completion and GRH of this arrival for the reverse path.
    struct Held {
      std::vector<Copy>* copies;
      ibv_wc wc;
      ibv_grh grh;
    } held{&got, {}, {}};
    while (got.empty()) {
      e.poll(
          [](void* context, const UdArrival& arrival) {
            auto* h = static_cast<Held*>(context);
            keep(h->copies, arrival);
            h->wc = *arrival.completion;
            std::memcpy(&h->grh, arrival.grh_slot, sizeof h->grh);
          },
          &held, 1);
      if (deadline.expired()) {
        std::printf("%s: server: message %zu never came\n", kProgram, n);
        return 1;
      }
    }
    const Copy& in = got.front();
    if (in.header.destination_cookie != kServerCookie || in.header.destination_port != kServerPort) {
      std::printf("%s: server: message for another socket\n", kProgram);
      return 1;
    }
    auto back = rdma::AddressHandle::from_completion(e.pd(), e.port(), held.wc, &held.grh);
    if (!back) return 1;
    wire::DatagramHeader reply = header_for(kServerPort, in.header.source_port, kServerCookie,
                                            in.header.source_cookie, in.header.datagram_id, in.payload.size());
    if (!send_retrying(e, back.value().get(), in.source_qpn, reply, in.payload.data(), deadline)) return 1;
    // The AH must outlive the send: wait until the client has it.
    if (!barrier(control, kStepMs)) return 1;
  }

  // The burst: not polled until the client has sent all of it.
  if (!barrier(control, kStepMs)) return 1;
  std::vector<Copy> burst;
  Deadline deadline(kStepMs / 1000.0);
  if (!wait_messages(e, &burst, kBurst, deadline)) {
    std::printf("%s: server: %zu of %u burst messages came\n", kProgram, burst.size(), kBurst);
    return 1;
  }
  for (uint32_t i = 0; i < kBurst; ++i) {
    const Copy& c = burst[i];
    if (c.header.datagram_id != i || find_mismatch(c.payload.data(), c.payload.size(), i, 0) != c.payload.size()) {
      std::printf("%s: server: burst message %u wrong (id %u)\n", kProgram, i, c.header.datagram_id);
      return 1;
    }
  }
  sock::dgram::UdEndpointCounters counters = e.counters();
  std::printf("%s: server: received %llu, malformed %llu, receive errors %llu\n", kProgram,
              static_cast<unsigned long long>(counters.received), static_cast<unsigned long long>(counters.malformed),
              static_cast<unsigned long long>(counters.receive_errors));
  if (counters.malformed != 0 || counters.receive_errors != 0) return 1;
  return barrier(control, kStepMs) ? 0 : 1;
}

int client(int control) {
  int code = 0;
  auto device = open_test_device(kProgram, &code);
  if (!device) return code;
  auto endpoint = open_endpoint(device.value());
  if (!endpoint) return 1;
  UdEndpoint& e = *endpoint.value();
  Contact server_at;
  if (!recv_all(control, &server_at, sizeof server_at, kStepMs)) return 1;
  ibv_ah_attr attr{};
  attr.is_global = 1;
  attr.grh.dgid = server_at.gid;
  attr.grh.sgid_index = static_cast<uint8_t>(device.value().gid_index());
  attr.grh.hop_limit = 64;
  attr.port_num = device.value().port();
  auto ah = rdma::AddressHandle::create(e.pd(), attr);
  if (!ah) return 1;

  const size_t sizes[] = {0, 1, 64, 900, e.max_payload()};
  for (uint32_t n = 0; n < 5; ++n) {
    Deadline deadline(kStepMs / 1000.0);
    std::vector<uint8_t> data(sizes[n]);
    fill_pattern(data.data(), data.size(), 100 + n, 0);
    wire::DatagramHeader h = header_for(kClientPort, kServerPort, kClientCookie, kServerCookie, n, data.size());
    if (!send_retrying(e, ah.value().get(), server_at.qpn, h, data.data(), deadline)) return 1;
    std::vector<Copy> echo;
    if (!wait_messages(e, &echo, 1, deadline)) {
      std::printf("%s: client: no echo of %zu bytes\n", kProgram, sizes[n]);
      return 1;
    }
    const Copy& back = echo.front();
    if (back.payload != data || back.header.destination_cookie != kClientCookie ||
        back.header.source_cookie != kServerCookie || back.header.datagram_id != n || back.source_qpn != server_at.qpn) {
      std::printf("%s: client: echo of %zu bytes differs\n", kProgram, sizes[n]);
      return 1;
    }
    if (!barrier(control, kStepMs)) return 1;
  }
  std::printf("%s: echoed 0, 1, 64, 900 and %zu bytes (the largest payload)\n", kProgram, e.max_payload());

  // Larger than the MTU allows: refused before anything is posted.
  std::vector<uint8_t> too_big(e.max_payload() + 1);
  iovec iov{too_big.data(), too_big.size()};
  wire::DatagramHeader big = header_for(kClientPort, kServerPort, kClientCookie, kServerCookie, 99, too_big.size());
  if (e.send(ah.value().get(), server_at.qpn, big, &iov, 1).error() != EMSGSIZE) {
    std::printf("%s: client: an oversized message was not refused\n", kProgram);
    return 1;
  }

  Deadline deadline(kStepMs / 1000.0);
  for (uint32_t i = 0; i < kBurst; ++i) {
    std::vector<uint8_t> data(64 + i % 900);
    fill_pattern(data.data(), data.size(), i, 0);
    wire::DatagramHeader h = header_for(kClientPort, kServerPort, kClientCookie, kServerCookie, i, data.size());
    if (!send_retrying(e, ah.value().get(), server_at.qpn, h, data.data(), deadline)) return 1;
  }
  sock::dgram::UdEndpointCounters counters = e.counters();
  std::printf("%s: client: burst of %u sent (%llu times every slot was in flight)\n", kProgram, kBurst,
              static_cast<unsigned long long>(counters.slots_exhausted));
  if (!barrier(control, kStepMs)) return 1;
  return barrier(control, kStepMs) ? 0 : 1;
}

}  // namespace
}  // namespace vsock::test

int main() {
  int rc = vsock::test::run_pair(vsock::test::server, vsock::test::client, 120);
  std::printf("%s: %s\n", vsock::test::kProgram, rc == 0 ? "PASS" : rc == 77 ? "SKIPPED" : "FAIL");
  return rc;
}
