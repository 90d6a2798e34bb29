// MulticastPrefix: an IPv4 multicast group range ("239.1.0.0/16"), the
// element of the `udp_mcast_offload` setting: the groups whose datagrams
// go over UD (docs/configuration.md says what that means for receivers).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vsock::core {

struct MulticastPrefix {
  uint32_t network = 0;  // host order, the bits past `length` zero
  uint8_t length = 32;
  bool operator==(const MulticastPrefix& other) const {
    return network == other.network && length == other.length;
  }
};

// Parses a list of "a.b.c.d[/n]" separated by commas (an empty text is the
// empty list). Each must lie inside 224.0.0.0/4 (a multicast range); the
// bits past the prefix length must be zero. False with a reason in *why.
bool parse_multicast_prefixes(std::string_view text, std::vector<MulticastPrefix>* out, std::string* why);

// The list as parse_multicast_prefixes() reads it back ("" when empty).
std::string multicast_prefixes_text(const std::vector<MulticastPrefix>& prefixes);

// True if the IPv4 address `group` (host order) lies in one of `prefixes`.
bool multicast_prefixes_contain(const std::vector<MulticastPrefix>& prefixes, uint32_t group);

}  // namespace vsock::core
