#include "sock/upgrade/parked_channels.hpp"

#include <algorithm>
#include <cstring>

#include "core/stats.hpp"

namespace vsock::sock::side_band {

bool same_address(const wire::FamilyEndpoint& a, const wire::FamilyEndpoint& b) {
  wire::FamilyEndpoint x = wire::canonical_endpoint(a.family, a.endpoint);
  wire::FamilyEndpoint y = wire::canonical_endpoint(b.family, b.endpoint);
  return x.family == y.family && std::memcmp(x.endpoint.ip, y.endpoint.ip, sizeof x.endpoint.ip) == 0;
}

bool same_endpoint(const wire::FamilyEndpoint& a, const wire::FamilyEndpoint& b) {
  return same_address(a, b) && a.endpoint.port == b.endpoint.port;
}

bool ParkedChannels::has_room(const wire::FamilyEndpoint& peer) const {
  if (entries_.size() >= max_parked_) return false;
  size_t same = 0;
  for (const auto& entry : entries_) same += same_address(entry->peer, peer) ? 1 : 0;
  return same < max_per_peer_;
}

void ParkedChannels::add(std::unique_ptr<ParkedChannel> parked) {
  entries_.push_back(std::move(parked));
  core::stat_set(core::Stat::parked_now, entries_.size());
}

std::unique_ptr<ParkedChannel> ParkedChannels::take_ready(const wire::FamilyEndpoint& server) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    const ParkedChannel& entry = *entries_[i];
    if (entry.client && entry.ready && same_endpoint(entry.peer, server)) return take(i);
  }
  return nullptr;
}

std::unique_ptr<ParkedChannel> ParkedChannels::take(size_t index) {
  std::unique_ptr<ParkedChannel> taken = std::move(entries_[index]);
  entries_.erase(entries_.begin() + static_cast<long>(index));
  core::stat_set(core::Stat::parked_now, entries_.size());
  return taken;
}

int64_t ParkedChannels::deadline_of(const ParkedChannel& parked) const {
  if (!parked.client) return parked.since_ms + kServerIdleMs;
  return parked.since_ms + (parked.ready ? kClientIdleMs : kParkWaitMs);
}

std::vector<std::unique_ptr<ParkedChannel>> ParkedChannels::expire(int64_t now_ms) {
  std::vector<std::unique_ptr<ParkedChannel>> expired;
  for (size_t i = 0; i < entries_.size();) {
    if (now_ms >= deadline_of(*entries_[i]))
      expired.push_back(take(i));
    else
      ++i;
  }
  return expired;
}

int64_t ParkedChannels::next_expiry_ms(int64_t now_ms) const {
  int64_t soonest = -1;
  for (const auto& entry : entries_) {
    int64_t left = std::max<int64_t>(0, deadline_of(*entry) - now_ms);
    if (soonest < 0 || left < soonest) soonest = left;
  }
  return soonest;
}

}  // namespace vsock::sock::side_band
