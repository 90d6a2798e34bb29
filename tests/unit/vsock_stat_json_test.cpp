// vsock-stat's output (tools/vsock_stat/): the JSON document for a known
// snapshot, byte for byte, its string escaping, and the text table.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "tools/vsock_stat/process_totals.hpp"
#include "tools/vsock_stat/stat_json.hpp"
#include "tools/vsock_stat/stat_text.hpp"

namespace vsock::tools {
namespace {

ScanResult sample() {
  ScanResult scan;
  scan.removed_stale = 1;
  scan.errors.push_back("/x/9.stat: layout version 2, this reader knows 1");
  ProcessStats p;
  p.pid = 321;
  p.path = "/run/user/0/libvsock/321.stat";
  p.fresh = true;
  core::SegmentSnapshot& s = p.snapshot;
  std::strcpy(s.header.program, "echo\"srv");
  std::strcpy(s.header.profile, "latency");
  std::strcpy(s.header.library_version, "0.1.0");
  s.header.created_unix_ns = 1'000'000'000;
  s.info.published_unix_ns = 3'000'000'000;
  s.info.publish_count = 4;
  s.info.sockets_seen = 2;
  s.counter_names = {"tcp_bytes_sent", "rdma_bytes_sent", "rdma_sends", "upgrades_done", "kernel_by_rule",
                     "fallback_timeout", "brand_new_counter"};
  s.counters = {10, 2000, 3, 1, 0, 2, 7};
  core::SocketRecord r{};
  r.fd = 5;
  r.family = AF_INET;
  r.protocol = IPPROTO_TCP;
  r.role = 3;
  r.path = static_cast<uint8_t>(core::SocketPath::kRdma);
  r.why = static_cast<uint8_t>(core::KernelWhy::kNone);
  inet_pton(AF_INET, "192.168.77.1", r.local_addr);
  r.local_port = 7000;
  inet_pton(AF_INET, "192.168.77.1", r.peer_addr);
  r.peer_port = 40000;
  r.tcp_bytes_sent = 10;
  r.rdma_bytes_sent = 2000;
  r.rdma_bytes_received = 1500;
  r.rdma_in_flight = 64;
  r.credit_stalls = 1;
  s.rows.push_back(r);
  scan.processes.push_back(p);
  return scan;
}

TEST(VsockStatJson, DocumentForAKnownSnapshot) {
  const std::string expected =
      "{\"format\":1,\"time_unix_ns\":5000000000,\"removed_stale\":1,"
      "\"errors\":[\"/x/9.stat: layout version 2, this reader knows 1\"],"
      "\"processes\":[{\"pid\":321,\"program\":\"echo\\\"srv\",\"profile\":\"latency\",\"library_version\":\"0.1.0\","
      "\"segment\":\"/run/user/0/libvsock/321.stat\",\"created_unix_ns\":1000000000,"
      "\"published_unix_ns\":3000000000,\"publish_count\":4,\"fresh\":true,"
      "\"totals\":{\"rdma_bytes_sent\":2000,\"rdma_bytes_received\":0,\"rdma_messages_sent\":3,"
      "\"rdma_messages_received\":0,\"kernel_bytes_sent\":10,\"kernel_bytes_received\":0,"
      "\"kernel_messages_sent\":0,\"kernel_messages_received\":0,\"upgrade_attempts\":0,\"upgrades_done\":1,"
      "\"upgrade_resets\":0,\"kernel_reasons\":{\"rule\":0,\"no_device\":0,\"timeout\":2}},"
      "\"counters\":{\"tcp_bytes_sent\":10,\"rdma_bytes_sent\":2000,\"rdma_sends\":3,\"upgrades_done\":1,"
      "\"kernel_by_rule\":0,\"fallback_timeout\":2,\"brand_new_counter\":7},"
      "\"sockets_seen\":2,\"sockets_listed\":1,"
      "\"sockets\":[{\"fd\":5,\"protocol\":\"tcp\",\"role\":\"accepted\",\"local\":\"192.168.77.1:7000\","
      "\"peer\":\"192.168.77.1:40000\",\"path\":\"rdma\",\"kernel_reason\":\"\",\"tcp_bytes_sent\":10,"
      "\"tcp_bytes_received\":0,\"rdma_bytes_sent\":2000,\"rdma_bytes_received\":1500,\"rdma_in_flight\":64,"
      "\"rdma_readable\":0,\"credit_stalls\":1}]}]}\n";
  EXPECT_EQ(render_json(sample(), 5'000'000'000), expected);
}

TEST(VsockStatJson, EmptyScanIsAValidDocument) {
  EXPECT_EQ(render_json(ScanResult{}, 7),
            "{\"format\":1,\"time_unix_ns\":7,\"removed_stale\":0,\"errors\":[],\"processes\":[]}\n");
}

TEST(VsockStatJson, StringsAreEscaped) {
  EXPECT_EQ(json_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_string(std::string("\n\t\x01", 3)), "\"\\u000a\\u0009\\u0001\"");
  EXPECT_EQ(json_string("caf\xc3\xa9"), "\"caf\xc3\xa9\"");       // valid UTF-8 kept
  EXPECT_EQ(json_string("bad\xff\xc3"), "\"bad\\u00ff\\u00c3\""); // invalid bytes escaped
  EXPECT_EQ(json_string("\x7f"), "\"\\u007f\"");
}

TEST(VsockStatJson, EndpointsAndNames) {
  uint8_t v6[16] = {};
  v6[15] = 1;
  EXPECT_EQ(endpoint_text(AF_INET6, v6, 80), "[::1]:80");
  uint8_t none[16] = {};
  EXPECT_EQ(endpoint_text(AF_INET, none, 0), "");
  EXPECT_EQ(endpoint_text(AF_INET, none, 22), "0.0.0.0:22");
  EXPECT_STREQ(role_name(2), "listener");
  EXPECT_STREQ(protocol_name(IPPROTO_UDP), "udp");
  char unterminated[4] = {'a', 'b', 'c', 'd'};
  EXPECT_EQ(fixed_text(unterminated), "abcd");
}

TEST(VsockStatText, TableHasTotalsAndRows) {
  const std::string text = render_text(sample(), 5'000'000'000);
  EXPECT_NE(text.find("1 libvsock process\n"), std::string::npos) << text;
  EXPECT_NE(text.find("pid 321  echo\"srv  profile latency  libvsock 0.1.0  up 4.0 s  live"), std::string::npos) << text;
  EXPECT_NE(text.find("on the kernel by reason: timeout=2"), std::string::npos) << text;
  EXPECT_NE(text.find("192.168.77.1:7000"), std::string::npos) << text;
  EXPECT_NE(text.find(" rdma "), std::string::npos) << text;
  EXPECT_NE(text.find("cannot read /x/9.stat"), std::string::npos) << text;
  EXPECT_EQ(short_count(9999), "9999");
  EXPECT_EQ(short_count(12'345), "12.3k");
  EXPECT_EQ(short_count(123'456'789), "123M");
}

}  // namespace
}  // namespace vsock::tools
