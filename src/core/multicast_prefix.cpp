#include "core/multicast_prefix.hpp"

namespace vsock::core {
namespace {

bool parse_number(std::string_view text, uint32_t max, uint32_t* out) {
  if (text.empty() || text.size() > 3) return false;
  uint32_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value > max) return false;
  *out = value;
  return true;
}

bool parse_ipv4(std::string_view text, uint32_t* out) {
  uint32_t address = 0;
  for (int i = 0; i < 4; ++i) {
    size_t dot = text.find('.');
    if ((i < 3) != (dot != std::string_view::npos)) return false;
    uint32_t byte;
    if (!parse_number(text.substr(0, dot), 255, &byte)) return false;
    address = (address << 8) | byte;
    text = i < 3 ? text.substr(dot + 1) : std::string_view();
  }
  *out = address;
  return true;
}

uint32_t mask_of(uint8_t length) { return length == 0 ? 0 : ~uint32_t{0} << (32 - length); }

bool parse_one(std::string_view text, MulticastPrefix* out, std::string* why) {
  size_t slash = text.find('/');
  uint32_t address;
  if (!parse_ipv4(text.substr(0, slash), &address)) {
    *why = "expected an IPv4 group range a.b.c.d[/n], got '" + std::string(text) + "'";
    return false;
  }
  uint32_t length = 32;
  if (slash != std::string_view::npos && !parse_number(text.substr(slash + 1), 32, &length)) {
    *why = "bad prefix length in '" + std::string(text) + "'";
    return false;
  }
  // The range must be multicast as a whole: inside 224.0.0.0/4.
  if (length < 4 || (address >> 28) != 0xE) {
    *why = "'" + std::string(text) + "' is not inside 224.0.0.0/4";
    return false;
  }
  if ((address & ~mask_of(static_cast<uint8_t>(length))) != 0) {
    *why = "'" + std::string(text) + "' has bits set past its prefix length";
    return false;
  }
  out->network = address;
  out->length = static_cast<uint8_t>(length);
  return true;
}

}  // namespace

bool parse_multicast_prefixes(std::string_view text, std::vector<MulticastPrefix>* out, std::string* why) {
  std::vector<MulticastPrefix> prefixes;
  while (!text.empty()) {
    size_t comma = text.find(',');
    MulticastPrefix prefix;
    if (!parse_one(text.substr(0, comma), &prefix, why)) return false;
    prefixes.push_back(prefix);
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
    if (text.empty()) {
      *why = "a trailing comma";
      return false;
    }
  }
  *out = std::move(prefixes);
  return true;
}

std::string multicast_prefixes_text(const std::vector<MulticastPrefix>& prefixes) {
  std::string text;
  for (const MulticastPrefix& p : prefixes) {
    if (!text.empty()) text += ',';
    for (int shift = 24; shift >= 0; shift -= 8) {
      text += std::to_string((p.network >> shift) & 0xFF);
      if (shift != 0) text += '.';
    }
    text += '/' + std::to_string(p.length);
  }
  return text;
}

bool multicast_prefixes_contain(const std::vector<MulticastPrefix>& prefixes, uint32_t group) {
  for (const MulticastPrefix& p : prefixes)
    if ((group & mask_of(p.length)) == p.network) return true;
  return false;
}

}  // namespace vsock::core
