#include "sock/upgrade/peer_failure_cache.hpp"

namespace vsock::sock {
namespace {

bool same_peer(const wire::FamilyEndpoint& a, const wire::FamilyEndpoint& b) {
  return a.family == b.family && a.endpoint == b.endpoint;
}

// endpoint_from_sockaddr already reduces IPv4-mapped addresses.
bool read_peer(const sockaddr* addr, socklen_t len, wire::FamilyEndpoint* out) {
  core::Result<wire::FamilyEndpoint> peer = wire::endpoint_from_sockaddr(addr, len);
  if (!peer) return false;
  *out = peer.value();
  return true;
}

}  // namespace

PeerFailureCache::PeerFailureCache(size_t capacity, uint64_t ttl_ms)
    : capacity_(ttl_ms == 0 ? 0 : capacity), ttl_ms_(ttl_ms) {
  entries_.reserve(capacity_);
}

long PeerFailureCache::find(const wire::FamilyEndpoint& peer) const {
  for (size_t i = 0; i < entries_.size(); ++i)
    if (same_peer(entries_[i].peer, peer)) return static_cast<long>(i);
  return -1;
}

bool PeerFailureCache::live(const Entry& entry, uint64_t now_ms) const {
  // A clock that went backwards keeps the entry: it will age from there.
  return now_ms < entry.failed_ms || now_ms - entry.failed_ms < ttl_ms_;
}

void PeerFailureCache::erase(size_t index) {
  entries_[index] = entries_.back();
  entries_.pop_back();
}

bool PeerFailureCache::record_failure(const sockaddr* addr, socklen_t len, uint64_t now_ms) {
  wire::FamilyEndpoint peer;
  if (capacity_ == 0 || !read_peer(addr, len, &peer)) return false;
  ++counters_.recorded;
  const long at = find(peer);
  if (at >= 0) {
    entries_[static_cast<size_t>(at)].failed_ms = now_ms;
    entries_[static_cast<size_t>(at)].last_used = ++use_clock_;
    return true;
  }
  if (entries_.size() >= capacity_) {
    // Expired entries go first; otherwise the least recently used.
    size_t victim = 0;
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (!live(entries_[i], now_ms)) {
        victim = i;
        break;
      }
      if (entries_[i].last_used < entries_[victim].last_used) victim = i;
    }
    if (live(entries_[victim], now_ms)) ++counters_.evicted;
    else ++counters_.expired;
    erase(victim);
  }
  entries_.push_back({peer, now_ms, ++use_clock_});
  return true;
}

bool PeerFailureCache::should_skip(const sockaddr* addr, socklen_t len, uint64_t now_ms) {
  wire::FamilyEndpoint peer;
  const long at = read_peer(addr, len, &peer) ? find(peer) : -1;
  if (at < 0) {
    ++counters_.misses;
    return false;
  }
  Entry& entry = entries_[static_cast<size_t>(at)];
  if (!live(entry, now_ms)) {
    ++counters_.expired;
    ++counters_.misses;
    erase(static_cast<size_t>(at));
    return false;
  }
  ++counters_.hits;
  entry.last_used = ++use_clock_;
  return true;
}

bool PeerFailureCache::forget(const sockaddr* addr, socklen_t len) {
  wire::FamilyEndpoint peer;
  if (!read_peer(addr, len, &peer)) return false;
  const long at = find(peer);
  if (at < 0) return false;
  erase(static_cast<size_t>(at));
  return true;
}

}  // namespace vsock::sock
