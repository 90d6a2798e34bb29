#include "sock/dgram/owed_announcements.hpp"

#include <algorithm>
#include <utility>

namespace vsock::sock::dgram {

bool OwedAnnouncements::owe(const PathKey& destination, const OwedSocket& socket) {
  if (socket.port == 0 || socket.cookie == 0 || !is_unicast(destination)) return false;
  auto it = owed_.find(destination);
  if (it == owed_.end()) {
    if (owed_.size() >= kMaxDestinations) return false;
    it = owed_.emplace(destination, std::vector<OwedSocket>()).first;
  }
  std::vector<OwedSocket>& sockets = it->second;
  if (std::find(sockets.begin(), sockets.end(), socket) != sockets.end()) return true;
  if (sockets.size() >= kMaxSocketsPerDestination) return false;
  sockets.push_back(socket);
  return true;
}

std::vector<OwedSocket> OwedAnnouncements::take(const PathKey& destination) {
  auto it = owed_.find(destination);
  if (it == owed_.end()) return {};
  std::vector<OwedSocket> sockets = std::move(it->second);
  owed_.erase(it);
  return sockets;
}

}  // namespace vsock::sock::dgram
