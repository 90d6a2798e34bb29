#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/rules.hpp"

namespace vsock::core {
namespace {

std::vector<std::string_view> words(const std::vector<std::string>& storage) {
  return std::vector<std::string_view>(storage.begin(), storage.end());
}

Rule rule(std::vector<std::string> text) {
  Rule r;
  std::string why;
  EXPECT_TRUE(parse_rule(words(text), &r, &why)) << why;
  return r;
}

std::string error_of(std::vector<std::string> text) {
  Rule r;
  std::string why;
  EXPECT_FALSE(parse_rule(words(text), &r, &why));
  return why;
}

sockaddr_in v4(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

sockaddr_in6 v6(const char* ip, uint16_t port) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  inet_pton(AF_INET6, ip, &a.sin6_addr);
  return a;
}

Endpoint tcp_to(const sockaddr* addr, const char* program = "app", Role role = Role::kClient) {
  Endpoint e;
  e.proto = Proto::kTcp;
  e.program = program;
  e.role = role;
  e.addr = addr;
  return e;
}

TEST(Rules, ParsesEveryKey) {
  Rule r = rule({"udp", "kernel", "program=redis-server", "role=server", "addr=10.1.0.0/16", "port=100-200"});
  EXPECT_EQ(r.proto, Proto::kUdp);
  EXPECT_EQ(r.mode, OffloadMode::kKernel);
  EXPECT_EQ(r.program, "redis-server");
  EXPECT_EQ(r.role, Role::kServer);
  EXPECT_EQ(r.addr.family, AF_INET);
  EXPECT_EQ(r.addr.prefix_len, 16);
  EXPECT_EQ(r.port_lo, 100);
  EXPECT_EQ(r.port_hi, 200);
}

TEST(Rules, RejectsBadInputWithAReason) {
  EXPECT_NE(error_of({"sctp", "offload"}).find("unknown protocol"), std::string::npos);
  EXPECT_NE(error_of({"tcp"}).find("needs a protocol and a mode"), std::string::npos);
  EXPECT_NE(error_of({"tcp", "offload", "port=70000"}).find("bad port"), std::string::npos);
  EXPECT_NE(error_of({"tcp", "offload", "port=9-3"}).find("bad port"), std::string::npos);
  EXPECT_NE(error_of({"tcp", "offload", "addr=1.2.3.4/33"}).find("bad address"), std::string::npos);
  EXPECT_NE(error_of({"tcp", "offload", "addr=host.example"}).find("bad address"), std::string::npos);
  EXPECT_NE(error_of({"tcp", "offload", "colour=red"}).find("unknown key"), std::string::npos);
  EXPECT_NE(error_of({"tcp", "offload", "port"}).find("key=value"), std::string::npos);
  EXPECT_NE(error_of({"tcp", "offload", "role=boss"}).find("role"), std::string::npos);
}

TEST(Rules, FirstMatchWinsAndFallbackApplies) {
  std::vector<Rule> rules = {rule({"tcp", "kernel", "port=22"}), rule({"tcp", "offload", "port=1-1000"})};
  sockaddr_in ssh = v4("10.0.0.1", 22), web = v4("10.0.0.1", 80), high = v4("10.0.0.1", 5000);
  EXPECT_EQ(decide(rules, tcp_to(reinterpret_cast<sockaddr*>(&ssh)), OffloadMode::kOffload), OffloadMode::kKernel);
  EXPECT_EQ(decide(rules, tcp_to(reinterpret_cast<sockaddr*>(&web)), OffloadMode::kKernel), OffloadMode::kOffload);
  EXPECT_EQ(decide(rules, tcp_to(reinterpret_cast<sockaddr*>(&high)), OffloadMode::kKernel), OffloadMode::kKernel);
}

TEST(Rules, MatchesProtocolProgramAndRole) {
  std::vector<Rule> rules = {rule({"tcp", "kernel", "program=sshd", "role=server"})};
  sockaddr_in a = v4("10.0.0.1", 22);
  auto* sa = reinterpret_cast<sockaddr*>(&a);
  EXPECT_EQ(decide(rules, tcp_to(sa, "sshd", Role::kServer), OffloadMode::kOffload), OffloadMode::kKernel);
  EXPECT_EQ(decide(rules, tcp_to(sa, "sshd", Role::kClient), OffloadMode::kOffload), OffloadMode::kOffload);
  EXPECT_EQ(decide(rules, tcp_to(sa, "ssh", Role::kServer), OffloadMode::kOffload), OffloadMode::kOffload);
  Endpoint udp = tcp_to(sa, "sshd", Role::kServer);
  udp.proto = Proto::kUdp;
  EXPECT_EQ(decide(rules, udp, OffloadMode::kOffload), OffloadMode::kOffload);
}

TEST(Rules, AddressPrefixesIncludingOddLengthsAndV4Mapped) {
  std::vector<Rule> rules = {rule({"tcp", "kernel", "addr=192.168.77.0/23"})};
  sockaddr_in in = v4("192.168.76.9", 1), out = v4("192.168.78.1", 1);
  sockaddr_in6 mapped = v6("::ffff:192.168.77.200", 1), plain6 = v6("fe80::1", 1);
  auto mode = [&](const void* a) {
    return decide(rules, tcp_to(static_cast<const sockaddr*>(a)), OffloadMode::kOffload);
  };
  EXPECT_EQ(mode(&in), OffloadMode::kKernel);
  EXPECT_EQ(mode(&out), OffloadMode::kOffload);
  EXPECT_EQ(mode(&mapped), OffloadMode::kKernel);
  EXPECT_EQ(mode(&plain6), OffloadMode::kOffload);
  EXPECT_EQ(decide(rules, tcp_to(nullptr), OffloadMode::kOffload), OffloadMode::kOffload);
}

TEST(Rules, Ipv6PrefixAndWildcard) {
  std::vector<Rule> rules = {rule({"tcp", "kernel", "addr=fd00::/8"}), rule({"tcp", "offload", "addr=*"})};
  sockaddr_in6 inside = v6("fd12::5", 1), outside = v6("2001:db8::1", 1);
  EXPECT_EQ(decide(rules, tcp_to(reinterpret_cast<sockaddr*>(&inside)), OffloadMode::kOffload), OffloadMode::kKernel);
  EXPECT_EQ(decide(rules, tcp_to(reinterpret_cast<sockaddr*>(&outside)), OffloadMode::kKernel), OffloadMode::kOffload);
}

TEST(Rules, AppliesByProtocolProgramAndPortOnly) {
  Rule ssh = rule({"tcp", "kernel", "port=22"});
  Rule redis = rule({"tcp", "offload", "program=redis-server", "role=server", "port=6379-6380"});
  Rule lan = rule({"udp", "kernel", "addr=10.0.0.0/8"});
  EXPECT_TRUE(rule_applies(ssh, Proto::kTcp, "sshd", 22));
  EXPECT_FALSE(rule_applies(ssh, Proto::kTcp, "sshd", 23));
  EXPECT_FALSE(rule_applies(ssh, Proto::kUdp, "sshd", 22));
  EXPECT_TRUE(rule_applies(redis, Proto::kTcp, "redis-server", 6380));
  EXPECT_FALSE(rule_applies(redis, Proto::kTcp, "redis-cli", 6379));
  EXPECT_TRUE(rule_applies(lan, Proto::kUdp, "anything", 0));  // no port: every port
  EXPECT_FALSE(rule_is_conditional(ssh));
  EXPECT_TRUE(rule_is_conditional(redis));  // role
  EXPECT_TRUE(rule_is_conditional(lan));    // addr
}

}  // namespace
}  // namespace vsock::core
