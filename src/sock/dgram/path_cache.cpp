#include "sock/dgram/path_cache.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

namespace vsock::sock::dgram {
namespace {
// The first 12 bytes of an IPv4-mapped IPv6 address (how keys hold IPv4).
constexpr uint8_t kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
}  // namespace

bool PathKey::operator<(const PathKey& other) const {
  int order = std::memcmp(address, other.address, sizeof address);
  return order != 0 ? order < 0 : port < other.port;
}

bool PathKey::operator==(const PathKey& other) const {
  return port == other.port && std::memcmp(address, other.address, sizeof address) == 0;
}

bool path_key_of(const sockaddr* address, socklen_t length, PathKey* out) {
  *out = PathKey{};
  if (address == nullptr) return false;
  if (address->sa_family == AF_INET && length >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(address);
    out->address[10] = 0xff;
    out->address[11] = 0xff;
    std::memcpy(out->address + 12, &in->sin_addr, 4);
    out->port = ntohs(in->sin_port);
    return true;
  }
  if (address->sa_family == AF_INET6 && length >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    std::memcpy(out->address, &in6->sin6_addr, 16);
    out->port = ntohs(in6->sin6_port);
    return true;
  }
  return false;
}

std::string path_key_text(const PathKey& key) {
  char text[INET6_ADDRSTRLEN] = "?";
  const bool v4 = std::memcmp(key.address, kV4Mapped, sizeof kV4Mapped) == 0;
  inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? key.address + 12 : key.address, text, sizeof text);
  return (v4 ? std::string(text) : "[" + std::string(text) + "]") + ":" + std::to_string(key.port);
}

bool is_unicast(const PathKey& key) {
  if (std::memcmp(key.address, kV4Mapped, sizeof kV4Mapped) == 0) {
    uint8_t first = key.address[12];
    bool any = first == 0 && key.address[13] == 0 && key.address[14] == 0 && key.address[15] == 0;
    bool broadcast = key.address[12] == 255 && key.address[13] == 255 && key.address[14] == 255 &&
                     key.address[15] == 255;
    return !any && !broadcast && (first < 224 || first > 239);
  }
  return key.address[0] != 0xff;  // IPv6 multicast
}

bool PathCache::AddressKey::operator<(const AddressKey& other) const {
  return std::memcmp(bytes, other.bytes, sizeof bytes) < 0;
}

namespace {

template <class Key>
Key address_of(const PathKey& key) {
  Key address;
  std::memcpy(address.bytes, key.address, sizeof address.bytes);
  return address;
}

}  // namespace

ibv_ah* PathCache::handle_for(const PathKey& key) {
  std::lock_guard<std::mutex> held(mu_);
  auto it = handles_.find(address_of<AddressKey>(key));
  return it == handles_.end() ? nullptr : it->second->get();
}

ibv_ah* PathCache::keep_handle(const PathKey& key, std::unique_ptr<rdma::AddressHandle> ah) {
  std::lock_guard<std::mutex> held(mu_);
  AddressKey address = address_of<AddressKey>(key);
  auto it = handles_.find(address);
  if (it != handles_.end()) return it->second->get();  // another thread kept one first
  if (handles_.size() >= kMaxHandles) return nullptr;
  ibv_ah* raw = ah->get();
  handles_.emplace(address, std::move(ah));
  return raw;
}

size_t PathCache::handle_count() {
  std::lock_guard<std::mutex> held(mu_);
  return handles_.size();
}

int64_t PathCache::hold_ms(const Entry& entry) const {
  int64_t hold = std::min(kFirstFailureHoldMs, failure_hold_ms_);
  for (int i = 1; i < entry.failures && hold < failure_hold_ms_; ++i) hold *= 2;
  return std::min(hold, failure_hold_ms_);
}

PathLookup PathCache::find(const PathKey& key, int64_t now_ms, UdPath* path) {
  std::lock_guard<std::mutex> held(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return PathLookup::kUnknown;
  Entry& entry = it->second;
  if (entry.state == PathLookup::kFailed && now_ms - entry.failed_ms >= hold_ms(entry)) {
    entry.state = PathLookup::kUnknown;  // the failures in a row are kept
    return PathLookup::kUnknown;
  }
  if (entry.state == PathLookup::kResolved) *path = entry.path;
  return entry.state;
}

bool PathCache::begin_resolution(const PathKey& key, int64_t now_ms) {
  std::lock_guard<std::mutex> held(mu_);
  Entry& entry = entries_[key];
  if (entry.state == PathLookup::kResolved || entry.state == PathLookup::kResolving) return false;
  if (entry.state == PathLookup::kFailed && now_ms - entry.failed_ms < hold_ms(entry)) return false;
  if (entries_.size() > kMaxEntries) {
    entries_.erase(key);
    return false;
  }
  entry.state = PathLookup::kResolving;
  return true;
}

void PathCache::resolved(const PathKey& key, ibv_ah* ah, uint32_t qpn, uint64_t cookie) {
  std::lock_guard<std::mutex> held(mu_);
  if (entries_.size() >= kMaxEntries && entries_.find(key) == entries_.end()) return;
  Entry& entry = entries_[key];
  entry.state = PathLookup::kResolved;
  entry.path = UdPath{ah, qpn, cookie};
  entry.failures = 0;
}

int64_t PathCache::failed(const PathKey& key, int64_t now_ms) {
  std::lock_guard<std::mutex> held(mu_);
  Entry& entry = entries_[key];
  if (entry.state == PathLookup::kResolved) return 0;  // a datagram taught it meanwhile
  entry.state = PathLookup::kFailed;
  entry.failed_ms = now_ms;
  if (entry.failures < 64) ++entry.failures;
  return hold_ms(entry);
}

bool PathCache::needs_learning(const PathKey& key, uint32_t qpn, uint64_t cookie, UdPath* known) {
  std::lock_guard<std::mutex> held(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.state == PathLookup::kResolved && it->second.path.qpn == qpn &&
      it->second.path.cookie == cookie) {
    if (known != nullptr) *known = it->second.path;
    return false;
  }
  return it != entries_.end() || entries_.size() < kMaxEntries;
}

void PathCache::revoke(const PathKey& key, uint64_t cookie) {
  std::lock_guard<std::mutex> held(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.state == PathLookup::kResolved && it->second.path.cookie == cookie)
    entries_.erase(it);
}

}  // namespace vsock::sock::dgram
