#include "core/rules.hpp"

#include <arpa/inet.h>

#include <cstring>

namespace vsock::core {
namespace {

bool parse_uint(std::string_view text, uint32_t max, uint32_t* out) {
  if (text.empty() || text.size() > 5) return false;
  uint32_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v > max) return false;
  *out = v;
  return true;
}

bool prefix_matches(const AddressPrefix& prefix, const sockaddr* addr) {
  if (prefix.family == AF_UNSPEC) return true;
  if (addr == nullptr) return false;
  const uint8_t* bytes = nullptr;
  uint8_t mapped[4];
  if (addr->sa_family == AF_INET && prefix.family == AF_INET) {
    bytes = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(addr)->sin_addr);
  } else if (addr->sa_family == AF_INET6) {
    const auto* a6 = &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
    if (prefix.family == AF_INET6) {
      bytes = a6->s6_addr;
    } else if (IN6_IS_ADDR_V4MAPPED(a6)) {  // ::ffff:a.b.c.d matches IPv4 rules
      std::memcpy(mapped, a6->s6_addr + 12, 4);
      bytes = mapped;
    }
  }
  if (bytes == nullptr) return false;
  int full = prefix.prefix_len / 8, rest = prefix.prefix_len % 8;
  if (std::memcmp(bytes, prefix.bytes, static_cast<size_t>(full)) != 0) return false;
  if (rest == 0) return true;
  uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (bytes[full] & mask) == (prefix.bytes[full] & mask);
}

uint16_t port_of(const sockaddr* addr) {
  if (addr == nullptr) return 0;
  if (addr->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(addr)->sin_port);
  if (addr->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port);
  return 0;
}

}  // namespace

bool parse_address_prefix(std::string_view text, AddressPrefix* out) {
  AddressPrefix p;
  if (text == "*") {
    *out = p;
    return true;
  }
  int max_len = -1;
  size_t slash = text.find('/');
  std::string host_str(text.substr(0, slash));
  if (inet_pton(AF_INET, host_str.c_str(), p.bytes) == 1) {
    p.family = AF_INET;
    max_len = 32;
  } else if (inet_pton(AF_INET6, host_str.c_str(), p.bytes) == 1) {
    p.family = AF_INET6;
    max_len = 128;
  } else {
    return false;
  }
  p.prefix_len = max_len;
  if (slash != std::string_view::npos) {
    uint32_t len;
    if (!parse_uint(text.substr(slash + 1), static_cast<uint32_t>(max_len), &len)) return false;
    p.prefix_len = static_cast<int>(len);
  }
  *out = p;
  return true;
}

bool parse_rule(const std::vector<std::string_view>& words, Rule* out, std::string* why) {
  Rule r;
  if (words.size() < 2) {
    *why = "a rule needs a protocol and a mode: tcp|udp offload|kernel [key=value ...]";
    return false;
  }
  if (words[0] == "tcp") r.proto = Proto::kTcp;
  else if (words[0] == "udp") r.proto = Proto::kUdp;
  else {
    *why = "unknown protocol '" + std::string(words[0]) + "' (expected tcp or udp)";
    return false;
  }
  if (words[1] == "offload") r.mode = OffloadMode::kOffload;
  else if (words[1] == "kernel") r.mode = OffloadMode::kKernel;
  else {
    *why = "unknown mode '" + std::string(words[1]) + "' (expected offload or kernel)";
    return false;
  }
  for (size_t i = 2; i < words.size(); ++i) {
    std::string_view w = words[i];
    size_t eq = w.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == w.size()) {
      *why = "expected key=value, got '" + std::string(w) + "'";
      return false;
    }
    std::string_view key = w.substr(0, eq), value = w.substr(eq + 1);
    if (key == "program") {
      r.program = std::string(value);
    } else if (key == "role") {
      if (value == "client") r.role = Role::kClient;
      else if (value == "server") r.role = Role::kServer;
      else if (value == "any") r.role = Role::kAny;
      else {
        *why = "role must be client, server or any";
        return false;
      }
    } else if (key == "addr") {
      if (!parse_address_prefix(value, &r.addr)) {
        *why = "bad address '" + std::string(value) + "' (expected IPv4/IPv6 address, optional /prefix, or *)";
        return false;
      }
    } else if (key == "port") {
      size_t dash = value.find('-');
      uint32_t lo, hi;
      bool ok = dash == std::string_view::npos
                    ? parse_uint(value, 65535, &lo) && (hi = lo, true)
                    : parse_uint(value.substr(0, dash), 65535, &lo) && parse_uint(value.substr(dash + 1), 65535, &hi);
      if (!ok || lo > hi) {
        *why = "bad port '" + std::string(value) + "' (expected N or N-M within 0..65535)";
        return false;
      }
      r.port_lo = static_cast<uint16_t>(lo);
      r.port_hi = static_cast<uint16_t>(hi);
    } else {
      *why = "unknown key '" + std::string(key) + "' (expected program, role, addr or port)";
      return false;
    }
  }
  *out = std::move(r);
  return true;
}

bool rule_applies(const Rule& r, Proto proto, std::string_view program, uint16_t port) {
  if (r.proto != proto) return false;
  if (!r.program.empty() && r.program != program) return false;
  return (r.port_lo == 0 && r.port_hi == 65535) || (port >= r.port_lo && port <= r.port_hi);
}

bool rule_is_conditional(const Rule& r) { return r.role != Role::kAny || r.addr.family != AF_UNSPEC; }

OffloadMode decide(const std::vector<Rule>& rules, const Endpoint& e, OffloadMode fallback) {
  uint16_t port = port_of(e.addr);
  for (const Rule& r : rules) {
    if (!rule_applies(r, e.proto, e.program, port)) continue;
    if (r.role != Role::kAny && r.role != e.role) continue;
    if (!prefix_matches(r.addr, e.addr)) continue;
    return r.mode;
  }
  return fallback;
}

}  // namespace vsock::core
