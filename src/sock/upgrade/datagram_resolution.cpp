#include "sock/upgrade/datagram_resolution.hpp"

#include <cstring>

#include "core/log.hpp"
#include "rdma/ud_queue_pair.hpp"
#include "sock/upgrade/upgrade_engine.hpp"
#include "sock/wire/udp_resolve.hpp"

namespace vsock::sock {

bool DatagramResolution::listen(const sockaddr* address, uint32_t qpn, uint64_t cookie) {
  core::Result<rdma::CmUdpListener> cm = rdma::CmUdpListener::create(channel_, address);
  if (!cm) {
    VSOCK_LOG(kDebug, "udp: no rdma_cm listener for a bound socket: %s", std::strerror(cm.error()));
    return false;
  }
  listeners_.push_back(Listening{cookie, qpn, std::move(cm.value())});
  return true;
}

void DatagramResolution::stop_listening(uint64_t cookie) {
  for (auto it = listeners_.begin(); it != listeners_.end(); ++it) {
    if (it->cookie != cookie) continue;
    listeners_.erase(it);  // destroying the id refuses what is still queued
    return;
  }
}

bool DatagramResolution::resolve(const sockaddr* destination, socklen_t length) {
  if (length > sizeof(sockaddr_storage)) return false;
  for (const Resolving& r : resolving_)
    if (r.length == length && std::memcmp(&r.destination, destination, length) == 0) return true;
  Resolving r{};
  std::memcpy(&r.destination, destination, length);
  r.length = length;
  r.nonce = new_nonce();
  uint8_t request[wire::kResolveRequestSize];
  wire::encode(wire::ResolveRequest{r.nonce}, request);
  core::Result<rdma::CmUdpResolver> started =
      rdma::CmUdpResolver::start(channel_, destination, nullptr, timeout_ms_, request, sizeof request);
  if (!started) return false;
  r.resolver = std::move(started.value());
  resolving_.push_back(std::move(r));
  // An address rdma_cm refuses outright ends at once.
  if (resolving_.back().resolver.outcome() != rdma::SidrOutcome::kPending)
    finish(resolving_.end() - 1, resolving_.back().resolver.outcome());
  return true;
}

void DatagramResolution::answer(Listening& listening, const rdma::CmEvent& request) {
  core::Result<wire::ResolveRequest> parsed =
      wire::parse_resolve_request(request.private_data.bytes, request.private_data.length);
  if (!parsed) {
    // Not a libvsock peer (another rdma_cm user on the port): say no.
    listening.cm.refuse(request);
    return;
  }
  uint8_t reply[wire::kResolveAnswerSize];
  wire::encode(wire::ResolveAnswer{parsed.value().nonce, listening.cookie}, reply);
  listening.cm.answer(request, listening.qpn, rdma::kUdQkey, reply, sizeof reply);
}

void DatagramResolution::finish(std::vector<Resolving>::iterator it, rdma::SidrOutcome outcome) {
  Resolving done = std::move(*it);
  resolving_.erase(it);
  const rdma::SidrResult& result = done.resolver.result();
  const sockaddr* destination = reinterpret_cast<const sockaddr*>(&done.destination);
  if (outcome == rdma::SidrOutcome::kResolved) {
    core::Result<wire::ResolveAnswer> parsed =
        wire::parse_resolve_answer(result.private_data.bytes, result.private_data.length);
    if (parsed && parsed.value().nonce == done.nonce && result.qkey == rdma::kUdQkey) {
      ResolvedPath path;
      path.destination = done.destination;
      path.destination_length = done.length;
      path.ah_attr = result.ah_attr;
      path.qpn = result.qpn;
      path.cookie = parsed.value().cookie;
      if (sink_.resolved != nullptr) sink_.resolved(path);
      return;
    }
    // Someone answered who is not a libvsock socket (or not this one).
    outcome = rdma::SidrOutcome::kRefused;
  }
  if (sink_.failed != nullptr) sink_.failed(destination, done.length, outcome);
}

bool DatagramResolution::dispatch(const rdma::CmEvent& event) {
  for (Listening& listening : listeners_) {
    if (!listening.cm.owns(event)) continue;
    if (event.type == RDMA_CM_EVENT_CONNECT_REQUEST) answer(listening, event);
    return true;
  }
  for (auto it = resolving_.begin(); it != resolving_.end(); ++it) {
    if (!it->resolver.owns(event)) continue;
    rdma::SidrOutcome outcome = it->resolver.on_event(event);
    if (outcome != rdma::SidrOutcome::kPending) finish(it, outcome);
    return true;
  }
  return false;
}

void DatagramResolution::check_deadlines() {
  for (size_t i = 0; i < resolving_.size();) {
    rdma::SidrOutcome outcome = resolving_[i].resolver.check_deadline();
    if (outcome == rdma::SidrOutcome::kPending) {
      ++i;
      continue;
    }
    finish(resolving_.begin() + static_cast<std::ptrdiff_t>(i), outcome);
  }
}

int DatagramResolution::next_timeout_ms() const {
  int soonest = -1;
  for (const Resolving& r : resolving_) {
    int left = r.resolver.remaining_ms();
    if (soonest < 0 || left < soonest) soonest = left;
  }
  return soonest;
}

}  // namespace vsock::sock
