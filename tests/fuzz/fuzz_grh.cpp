// Fuzz target: parse_grh (src/rdma/grh.hpp), which reads the 40-byte GRH
// slot in front of every UD datagram: the sender's addresses come from
// there, and a peer (or the network) controls those bytes.
//
// Invariants: a rejection is always EPROTO and happens exactly for inputs
// shorter than 40 bytes or that are neither form; only the first 40 bytes
// matter; the form follows rdma-core's rule (byte 0 not version 6 means
// the IPv4 form; version 6 means IPv6 unless bytes 20..39 are an IPv4
// header with IHL 5 and a correct checksum); addresses are AF_INET or
// AF_INET6 with port 0 and are the bytes they were read from (IPv4-mapped
// GIDs as AF_INET); the IPv4 form has no flow label.
#include <netinet/in.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_check.hpp"
#include "rdma/grh.hpp"

using namespace vsock::rdma;

namespace {

bool same_address(const sockaddr_storage& a, const uint8_t* gid_or_null, const uint8_t* ipv4_or_null) {
  if (ipv4_or_null != nullptr) {
    if (a.ss_family != AF_INET) return false;
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    return in.sin_port == 0 && std::memcmp(&in.sin_addr, ipv4_or_null, 4) == 0;
  }
  if (a.ss_family != AF_INET6) return false;
  const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
  return in6.sin6_port == 0 && std::memcmp(&in6.sin6_addr, gid_or_null, 16) == 0;
}

bool mapped(const uint8_t* gid) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid, prefix, 12) == 0;
}

void check_gid(const sockaddr_storage& a, const uint8_t* gid) {
  if (mapped(gid))
    FUZZ_CHECK(same_address(a, nullptr, gid + 12));
  else
    FUZZ_CHECK(same_address(a, gid, nullptr));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly `size` bytes, so ASan catches a read past the end.
  std::vector<uint8_t> input(data, data + size);
  vsock::core::Result<GrhInfo> parsed = parse_grh(input.data(), input.size());
  if (size < kGrhSize) {
    FUZZ_CHECK(!parsed && parsed.error() == EPROTO);
    return 0;
  }
  const uint8_t* ipv4 = data + kGrhIpv4Offset;
  const bool version6 = (data[0] >> 4) == 6;
  const bool ipv4_shape = ipv4[0] == 0x45;
  const uint16_t stored = static_cast<uint16_t>((ipv4[10] << 8) | ipv4[11]);
  const bool ipv4_valid = ipv4_shape && ipv4_header_checksum(ipv4) == stored;
  if (!parsed) {
    FUZZ_CHECK(parsed.error() == EPROTO);
    FUZZ_CHECK(!version6 && !ipv4_shape);
    return 0;
  }
  const GrhInfo& info = parsed.value();
  // Only the slot matters.
  vsock::core::Result<GrhInfo> again = parse_grh(input.data(), kGrhSize);
  FUZZ_CHECK(again.has_value() && again.value().form == info.form &&
             std::memcmp(&again.value().source, &info.source, sizeof info.source) == 0);

  if (info.form == GrhForm::kIpv4) {
    FUZZ_CHECK(ipv4_shape && (!version6 || ipv4_valid));
    FUZZ_CHECK(same_address(info.source, nullptr, ipv4 + 12));
    FUZZ_CHECK(same_address(info.destination, nullptr, ipv4 + 16));
    FUZZ_CHECK(info.hop_limit == ipv4[8] && info.traffic_class == ipv4[1] && info.flow_label == 0);
    FUZZ_CHECK(grh_address_length(info.source) == sizeof(sockaddr_in));
  } else {
    FUZZ_CHECK(version6 && !ipv4_valid);
    check_gid(info.source, data + 8);
    check_gid(info.destination, data + 24);
    FUZZ_CHECK(info.hop_limit == data[7] && info.next_header == data[6]);
    FUZZ_CHECK(info.flow_label <= 0xfffff);
    FUZZ_CHECK(grh_address_length(info.source) != 0 && grh_address_length(info.destination) != 0);
  }
  return 0;
}
