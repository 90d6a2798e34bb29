#include "tools/vsock_info/route_check.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace vsock::info {
namespace {

using Clock = std::chrono::steady_clock;

// Waits up to timeout_ms for the next event on the channel. Null on timeout
// (*why says so) or error.
rdma_cm_event* next_event(rdma_event_channel* channel, int timeout_ms, std::string* why) {
  pollfd pfd{channel->fd, POLLIN, 0};
  int ready = ::poll(&pfd, 1, timeout_ms);
  if (ready == 0) {
    *why = "no answer within " + std::to_string(timeout_ms) + " ms";
    return nullptr;
  }
  rdma_cm_event* event = nullptr;
  if (ready < 0 || rdma_get_cm_event(channel, &event) != 0) {
    *why = std::string("rdma_get_cm_event: ") + std::strerror(errno);
    return nullptr;
  }
  return event;
}

// Waits for `wanted`; any other event is the failure, named with its status.
bool await(rdma_event_channel* channel, rdma_cm_event_type wanted, int timeout_ms, const char* step,
           std::string* why) {
  rdma_cm_event* event = next_event(channel, timeout_ms, why);
  if (event == nullptr) {
    *why = std::string(step) + ": " + *why;
    return false;
  }
  bool ok = event->event == wanted;
  if (!ok) {
    int status = event->status < 0 ? -event->status : event->status;
    *why = std::string(step) + ": " + rdma_event_str(event->event) + " (" + std::strerror(status) + ")";
  }
  rdma_ack_cm_event(event);
  return ok;
}

std::string address_text(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr == nullptr) return "";
  if (addr->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof text);
  else if (addr->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text, sizeof text);
  return text;
}

void resolve(rdma_event_channel* channel, rdma_cm_id* id, const sockaddr* peer, int timeout_ms, RouteCheck* out) {
  if (rdma_resolve_addr(id, nullptr, const_cast<sockaddr*>(peer), timeout_ms) != 0) {
    out->reason = std::string("rdma_resolve_addr: ") + std::strerror(errno);
    return;
  }
  if (!await(channel, RDMA_CM_EVENT_ADDR_RESOLVED, timeout_ms + 500, "address", &out->reason)) return;
  if (rdma_resolve_route(id, timeout_ms) != 0) {
    out->reason = std::string("rdma_resolve_route: ") + std::strerror(errno);
    return;
  }
  if (!await(channel, RDMA_CM_EVENT_ROUTE_RESOLVED, timeout_ms + 500, "route", &out->reason)) return;
  out->ok = true;
  if (id->verbs != nullptr) out->device = ibv_get_device_name(id->verbs->device);
  out->port = id->port_num;
  out->source = address_text(rdma_get_local_addr(id));
}

}  // namespace

bool split_host_port(const std::string& text, std::string* host, std::string* port) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return false;
  std::string h = text.substr(0, colon);
  if (h.front() == '[') {
    if (h.size() < 3 || h.back() != ']') return false;
    h = h.substr(1, h.size() - 2);
  } else if (h.find(':') != std::string::npos) {
    return false;  // an IPv6 address needs brackets
  }
  std::string p = text.substr(colon + 1);
  if (p.find_first_not_of("0123456789") != std::string::npos || p.size() > 5 || std::stoul(p) > 65535) return false;
  *host = h;
  *port = p;
  return true;
}

RouteCheck check_route(const std::string& host, const std::string& port, int timeout_ms) {
  RouteCheck out;
  Clock::time_point start = Clock::now();
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    out.reason = "cannot resolve '" + host + "': " + gai_strerror(rc);
    return out;
  }
  rdma_event_channel* channel = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  if (channel == nullptr) {
    out.reason = std::string("rdma_cm is not available: ") + std::strerror(errno) +
                 " (no /dev/infiniband/rdma_cm: rdma_ucm module or a verbs device missing)";
  } else if (rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP) != 0) {
    out.reason = std::string("rdma_create_id: ") + std::strerror(errno);
  } else {
    resolve(channel, id, found->ai_addr, timeout_ms, &out);
  }
  if (id != nullptr) rdma_destroy_id(id);
  if (channel != nullptr) rdma_destroy_event_channel(channel);
  ::freeaddrinfo(found);
  out.elapsed_ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
  return out;
}

void print_route(const RouteCheck& check, const std::string& target) {
  std::printf("rdma_cm route to %s:\n", target.c_str());
  if (check.ok)
    std::printf("  resolved in %d ms: device %s port %d, source address %s\n", check.elapsed_ms,
                check.device.c_str(), check.port, check.source.c_str());
  else
    std::printf("  not resolved after %d ms: %s\n", check.elapsed_ms, check.reason.c_str());
}

}  // namespace vsock::info
