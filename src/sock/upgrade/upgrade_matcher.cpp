#include "sock/upgrade/upgrade_matcher.hpp"

#include <cerrno>
#include <cstring>

#include "sock/wire/endpoint.hpp"

namespace vsock::sock {

bool same_connection(const wire::UpgradeRequest& a, const wire::UpgradeRequest& b) {
  const wire::FamilyEndpoint a_client = wire::canonical_endpoint(a.family, a.client);
  const wire::FamilyEndpoint a_server = wire::canonical_endpoint(a.family, a.server);
  const wire::FamilyEndpoint b_client = wire::canonical_endpoint(b.family, b.client);
  const wire::FamilyEndpoint b_server = wire::canonical_endpoint(b.family, b.server);
  return a_client.family == b_client.family && a_server.family == b_server.family &&
         a_client.endpoint == b_client.endpoint && a_server.endpoint == b_server.endpoint;
}

UpgradeMatcher::UpgradeMatcher(size_t capacity, uint64_t timeout_ms)
    : capacity_(capacity == 0 ? 1 : capacity), timeout_ms_(timeout_ms) {
  requests_.reserve(capacity_);
  sockets_.reserve(capacity_);
}

bool UpgradeMatcher::matches(const WaitingRequest& request, const WaitingSocket& socket) const {
  return wire::upgrade_request_matches(request.request, reinterpret_cast<const sockaddr*>(&socket.local),
                                       socket.local_len, reinterpret_cast<const sockaddr*>(&socket.peer),
                                       socket.peer_len);
}

bool UpgradeMatcher::expired(uint64_t since_ms, uint64_t now_ms) const {
  // A clock that went backwards ages nothing.
  return now_ms >= since_ms && now_ms - since_ms >= timeout_ms_;
}

RequestResult UpgradeMatcher::add_request(const wire::UpgradeRequest& request, uint64_t handle, uint64_t now_ms) {
  RequestResult result;
  WaitingRequest waiting{request, handle, now_ms};
  for (size_t i = 0; i < sockets_.size(); ++i) {
    if (matches(waiting, sockets_[i])) {
      result.verdict = RequestVerdict::kMatched;
      result.fd = sockets_[i].fd;
      sockets_.erase(sockets_.begin() + static_cast<std::ptrdiff_t>(i));
      return result;
    }
  }
  for (const WaitingRequest& other : requests_) {
    if (same_connection(other.request, request)) {
      result.verdict = RequestVerdict::kDuplicate;
      return result;
    }
  }
  if (requests_.size() >= capacity_) {
    result.evicted = true;
    result.evicted_handle = requests_.front().handle;
    requests_.erase(requests_.begin());
  }
  requests_.push_back(waiting);
  result.verdict = RequestVerdict::kPending;
  return result;
}

core::Result<SocketResult> UpgradeMatcher::add_socket(int fd, const sockaddr* local, socklen_t local_len,
                                                      const sockaddr* peer, socklen_t peer_len, uint64_t now_ms) {
  using R = core::Result<SocketResult>;
  if (local == nullptr || peer == nullptr || local_len > sizeof(sockaddr_storage) ||
      peer_len > sizeof(sockaddr_storage))
    return R::fail(EINVAL);
  if (!wire::endpoint_from_sockaddr(local, local_len) || !wire::endpoint_from_sockaddr(peer, peer_len))
    return R::fail(EINVAL);
  WaitingSocket waiting{};
  waiting.fd = fd;
  std::memcpy(&waiting.local, local, local_len);
  std::memcpy(&waiting.peer, peer, peer_len);
  waiting.local_len = local_len;
  waiting.peer_len = peer_len;
  waiting.since_ms = now_ms;

  remove_socket(fd);  // a stale entry for a recycled fd number
  SocketResult result;
  for (size_t i = 0; i < requests_.size(); ++i) {
    if (matches(requests_[i], waiting)) {
      result.matched = true;
      result.handle = requests_[i].handle;
      result.request = requests_[i].request;
      requests_.erase(requests_.begin() + static_cast<std::ptrdiff_t>(i));
      return R::ok(result);
    }
  }
  if (sockets_.size() >= capacity_) {
    result.evicted = true;
    result.evicted_fd = sockets_.front().fd;
    sockets_.erase(sockets_.begin());
  }
  sockets_.push_back(waiting);
  return R::ok(result);
}

Expired UpgradeMatcher::expire(uint64_t now_ms) {
  Expired out;
  size_t kept = 0;
  for (size_t i = 0; i < requests_.size(); ++i) {
    if (expired(requests_[i].since_ms, now_ms)) {
      out.rejected_handles.push_back(requests_[i].handle);
    } else {
      requests_[kept++] = requests_[i];
    }
  }
  requests_.resize(kept);
  kept = 0;
  for (size_t i = 0; i < sockets_.size(); ++i) {
    if (expired(sockets_[i].since_ms, now_ms)) {
      out.tcp_fds.push_back(sockets_[i].fd);
    } else {
      sockets_[kept++] = sockets_[i];
    }
  }
  sockets_.resize(kept);
  return out;
}

bool UpgradeMatcher::remove_socket(int fd) {
  for (size_t i = 0; i < sockets_.size(); ++i) {
    if (sockets_[i].fd == fd) {
      sockets_.erase(sockets_.begin() + static_cast<std::ptrdiff_t>(i));
      return true;
    }
  }
  return false;
}

bool UpgradeMatcher::remove_request(uint64_t handle) {
  for (size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i].handle == handle) {
      requests_.erase(requests_.begin() + static_cast<std::ptrdiff_t>(i));
      return true;
    }
  }
  return false;
}

}  // namespace vsock::sock
