#include "sock/dgram/path_cache.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace vsock::sock::dgram {

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

PathLookup PathCache::find(const PathKey& key, int64_t now_ms, UdPath* path) {
  std::lock_guard<std::mutex> held(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return PathLookup::kUnknown;
  Entry& entry = it->second;
  if (entry.state == PathLookup::kFailed && now_ms - entry.failed_ms >= failure_hold_ms_) {
    entries_.erase(it);
    return PathLookup::kUnknown;
  }
  if (entry.state == PathLookup::kResolved) *path = entry.path;
  return entry.state;
}

bool PathCache::begin_resolution(const PathKey& key, int64_t now_ms) {
  std::lock_guard<std::mutex> held(mu_);
  Entry& entry = entries_[key];
  if (entry.state == PathLookup::kResolved || entry.state == PathLookup::kResolving) return false;
  if (entry.state == PathLookup::kFailed && now_ms - entry.failed_ms < failure_hold_ms_) return false;
  if (handles_.size() >= kMaxHandles) return false;
  entry.state = PathLookup::kResolving;
  return true;
}

void PathCache::resolved(const PathKey& key, std::unique_ptr<rdma::AddressHandle> ah, uint32_t qpn,
                         uint64_t cookie) {
  std::lock_guard<std::mutex> held(mu_);
  if (handles_.size() >= kMaxHandles) {
    entries_.erase(key);  // the handle goes; datagrams to it stay on the kernel
    return;
  }
  Entry& entry = entries_[key];
  entry.state = PathLookup::kResolved;
  entry.path = UdPath{ah->get(), qpn, cookie};
  handles_.push_back(std::move(ah));
}

void PathCache::failed(const PathKey& key, int64_t now_ms) {
  std::lock_guard<std::mutex> held(mu_);
  Entry& entry = entries_[key];
  if (entry.state == PathLookup::kResolved) return;  // a datagram taught it meanwhile
  entry.state = PathLookup::kFailed;
  entry.failed_ms = now_ms;
}

bool PathCache::needs_learning(const PathKey& key, uint32_t qpn, uint64_t cookie) {
  std::lock_guard<std::mutex> held(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.state == PathLookup::kResolved && it->second.path.qpn == qpn &&
      it->second.path.cookie == cookie)
    return false;
  return handles_.size() < kMaxHandles;
}

void PathCache::revoke(const PathKey& key, uint64_t cookie) {
  std::lock_guard<std::mutex> held(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.state == PathLookup::kResolved && it->second.path.cookie == cookie)
    entries_.erase(it);
}

}  // namespace vsock::sock::dgram
