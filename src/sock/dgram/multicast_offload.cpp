#include "sock/dgram/multicast_offload.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <pthread.h>

#include <cstring>
#include <ctime>
#include <vector>

#include "core/clock.hpp"
#include "core/config.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "sock/dgram/datagram_hub.hpp"
#include "sock/dgram/datagram_socket.hpp"
#include "sock/offload_policy.hpp"
#include "sys/reentry_guard.hpp"

namespace vsock::sock::dgram {
namespace {

std::mutex g_lock;
std::atomic<MulticastOffload*> g_offload{nullptr};

// A fork() child makes its own (its sockets left UD; the parent's joins
// and queue pair are not its own).
void forget_in_child() {
  new (&g_lock) std::mutex();
  g_offload.store(nullptr, std::memory_order_relaxed);
}

__attribute__((constructor)) void install_fork_handler() { pthread_atfork(nullptr, nullptr, forget_in_child); }

// The group QP number of every multicast send (IB spec: 0xFFFFFF).
constexpr uint32_t kMulticastQpn = 0xFFFFFF;

// The IPv4 address (host order) of an IPv4-mapped GID (::ffff:a.b.c.d,
// what RoCE v2 uses), 0 for another GID.
uint32_t ipv4_of_gid(const ibv_gid& gid) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(gid.raw, prefix, sizeof prefix) != 0) return 0;
  uint32_t address;
  std::memcpy(&address, gid.raw + 12, 4);
  return ntohl(address);
}

// The index of the interface that has `address` (host order), 0 if none.
int ifindex_of(uint32_t address) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return 0;
  int index = 0;
  for (ifaddrs* i = list; i != nullptr && index == 0; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if (ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr) == address)
      index = static_cast<int>(if_nametoindex(i->ifa_name));
  }
  freeifaddrs(list);
  return index;
}

sockaddr_storage ipv4_address(uint32_t address) {
  sockaddr_storage out{};
  auto* in = reinterpret_cast<sockaddr_in*>(&out);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(address);
  return out;
}

uint32_t ipv4_of(const sockaddr_storage& address) {
  if (address.ss_family != AF_INET) return 0;
  return ntohl(reinterpret_cast<const sockaddr_in*>(&address)->sin_addr.s_addr);
}

}  // namespace

MulticastOffload* MulticastOffload::running() { return g_offload.load(std::memory_order_acquire); }

MulticastOffload* MulticastOffload::get() {
  if (MulticastOffload* offload = g_offload.load(std::memory_order_acquire)) return offload;
  DatagramHub* hub = DatagramHub::get();
  rdma::Device* device = offload_device();
  if (hub == nullptr || device == nullptr) return nullptr;
  uint32_t address = ipv4_of_gid(device->gid());
  if (address == 0) return nullptr;  // no IPv4 address on the device: no IPv4 groups over UD
  std::lock_guard<std::mutex> held(g_lock);
  if (MulticastOffload* offload = g_offload.load(std::memory_order_acquire)) return offload;
  // Never destroyed, as the hub.
  auto* offload = new MulticastOffload(*hub, address, ifindex_of(address));
  g_offload.store(offload, std::memory_order_release);
  return offload;
}

bool MulticastOffload::offloads(uint32_t group) {
  return core::multicast_prefixes_contain(core::config().settings.udp_mcast_offload, group);
}

MulticastOffload::MulticastOffload(DatagramHub& hub, uint32_t device_address, int device_ifindex)
    : hub_(hub), device_address_(device_address), device_ifindex_(device_ifindex) {}

// ------------------------------------------------------------- joining --

bool MulticastOffload::join_group(uint32_t group, bool send_only) {
  const int64_t now = core::monotonic_ms();
  {
    std::lock_guard<std::mutex> held(mu_);
    if (state_[group].failed_until_ms > now) return false;
  }
  const core::Settings& settings = core::config().settings;
  if (cm_ == nullptr) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    local.sin_addr.s_addr = htonl(device_address_);
    core::Result<rdma::CmMulticast> made = rdma::CmMulticast::create(local);
    if (made) cm_ = std::make_unique<rdma::CmMulticast>(std::move(made.value()));
  }
  const in_addr address{htonl(group)};
  core::Result<rdma::MulticastPath> joined = core::Result<rdma::MulticastPath>::fail(ENODEV);
  if (cm_ != nullptr) {
    // A full join replaces a send-only one (one membership per group).
    if (!send_only && cm_->joined(address)) cm_->leave(address);
    joined = cm_->join(address, send_only, static_cast<int>(settings.upgrade_timeout_ms));
    // A device that knows no send-only membership gets a full one.
    if (!joined && send_only && joined.error() != ETIMEDOUT)
      joined = cm_->join(address, false, static_cast<int>(settings.upgrade_timeout_ms));
  }
  // Our queue pair takes only its own qkey: a group with another cannot
  // reach it (rdma_cm gives RoCE groups RDMA_UDP_QKEY, ours).
  if (joined && joined.value().qkey != hub_.endpoint().qkey()) {
    VSOCK_LOG(kInfo, "udp multicast: group qkey 0x%x is not ours (0x%x): the group stays on the kernel",
              joined.value().qkey, hub_.endpoint().qkey());
    cm_->leave(address);
    joined = core::Result<rdma::MulticastPath>::fail(EPROTO);
  }
  bool attach_failed = false;
  if (joined && !send_only && !hub_.endpoint().attach_multicast(joined.value().gid(), joined.value().lid())) {
    cm_->leave(address);
    attach_failed = true;  // e.g. the device's attach limit: the kernel's
  }
  std::lock_guard<std::mutex> held(mu_);
  Group& state = state_[group];
  if (!joined || attach_failed) {
    state.member = state.send_only = state.attached = false;
    state.failed_until_ms = now + int64_t{settings.peer_fail_cache_s} * 1000;
    core::stat_add(core::Stat::udp_mcast_join_failures);
    VSOCK_LOG(kInfo, "udp multicast: no %s join of %u.%u.%u.%u (%s): it stays on the kernel",
              send_only ? "send-only" : "full", group >> 24, (group >> 16) & 0xFF, (group >> 8) & 0xFF,
              group & 0xFF, std::strerror(joined ? ENOSPC : joined.error()));
    return false;
  }
  state.path = joined.value();
  state.member = !send_only;
  state.send_only = send_only;
  state.attached = !send_only;
  core::stat_add(core::Stat::udp_mcast_joins);
  VSOCK_LOG(kDebug, "udp multicast: joined %u.%u.%u.%u (%s), qkey 0x%x", group >> 24, (group >> 16) & 0xFF,
            (group >> 8) & 0xFF, group & 0xFF, send_only ? "send-only" : "full", state.path.qkey);
  return true;
}

void MulticastOffload::leave_group(uint32_t group) {
  rdma::MulticastPath path;
  bool attached;
  {
    std::lock_guard<std::mutex> held(mu_);
    auto it = state_.find(group);
    if (it == state_.end() || !(it->second.member || it->second.send_only)) return;
    path = it->second.path;
    attached = it->second.attached;
    it->second.member = it->second.send_only = it->second.attached = false;
  }
  if (attached) hub_.endpoint().detach_multicast(path.gid(), path.lid());
  if (cm_ != nullptr) cm_->leave(in_addr{htonl(group)});
  core::stat_add(core::Stat::udp_mcast_leaves);
}

void MulticastOffload::join(uint64_t cookie, uint32_t group, uint32_t source) {
  if (!offloads(group)) return;
  std::lock_guard<std::mutex> joining(join_mu_);
  MulticastGroups::Change change;
  {
    std::lock_guard<std::mutex> held(mu_);
    change = groups_.join(cookie, group, source);
  }
  if (change == MulticastGroups::Change::kFirstMember) join_group(group, false);
}

void MulticastOffload::leave(uint64_t cookie, uint32_t group, uint32_t source) {
  if (!offloads(group)) return;
  std::lock_guard<std::mutex> joining(join_mu_);
  MulticastGroups::Change change;
  {
    std::lock_guard<std::mutex> held(mu_);
    change = groups_.leave(cookie, group, source);
  }
  if (change == MulticastGroups::Change::kLastMemberLeft) leave_group(group);
}

void MulticastOffload::forget(uint64_t cookie) {
  std::lock_guard<std::mutex> joining(join_mu_);
  std::vector<uint32_t> left;
  {
    std::lock_guard<std::mutex> held(mu_);
    left = groups_.forget(cookie);
    options_.erase(cookie);
  }
  for (uint32_t group : left) leave_group(group);
}

void MulticastOffload::block(uint64_t cookie, uint32_t group, uint32_t source, bool blocked) {
  std::lock_guard<std::mutex> held(mu_);
  if (blocked)
    groups_.block(cookie, group, source);
  else
    groups_.unblock(cookie, group, source);
}

void MulticastOffload::set_filter(uint64_t cookie, uint32_t group, bool include,
                                  const std::vector<uint32_t>& sources) {
  if (!offloads(group)) return;
  std::lock_guard<std::mutex> joining(join_mu_);
  MulticastGroups::Change change;
  {
    std::lock_guard<std::mutex> held(mu_);
    change = groups_.set_filter(cookie, group, include, sources);
  }
  if (change == MulticastGroups::Change::kLastMemberLeft) leave_group(group);
}

void MulticastOffload::set_loop(uint64_t cookie, bool on) {
  std::lock_guard<std::mutex> held(mu_);
  options_[cookie].loop = on;
}

void MulticastOffload::set_ttl(uint64_t cookie, int ttl) {
  std::lock_guard<std::mutex> held(mu_);
  options_[cookie].ttl = static_cast<uint8_t>(ttl < 0 ? 1 : ttl > 255 ? 255 : ttl);  // -1: the default, 1
}

void MulticastOffload::set_all(uint64_t cookie, bool on) {
  std::lock_guard<std::mutex> held(mu_);
  groups_.set_multicast_all(cookie, on);
}

void MulticastOffload::set_interface(uint64_t cookie, int ifindex, in_addr address) {
  bool on_device;
  if (ifindex != 0)
    on_device = ifindex == device_ifindex_;
  else
    on_device = address.s_addr == INADDR_ANY || ntohl(address.s_addr) == device_address_;
  std::lock_guard<std::mutex> held(mu_);
  options_[cookie].on_device = on_device;
}

void MulticastOffload::bound(uint64_t cookie, const sockaddr* local, socklen_t length) {
  uint16_t port = 0;
  uint32_t address = 0;
  bool reaches_ipv4 = false;
  if (local->sa_family == AF_INET && length >= sizeof(sockaddr_in)) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(local);
    port = ntohs(in->sin_port);
    address = ntohl(in->sin_addr.s_addr);
    reaches_ipv4 = true;
  } else if (local->sa_family == AF_INET6 && length >= sizeof(sockaddr_in6)) {
    // A dual-stack socket on :: hears IPv4 groups too (a V6ONLY one left UD).
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(local);
    port = ntohs(in6->sin6_port);
    reaches_ipv4 = IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr);
  }
  std::lock_guard<std::mutex> held(mu_);
  groups_.bound(cookie, port, address, reaches_ipv4);
}

// ------------------------------------------------------------- sending --

ibv_ah* MulticastOffload::handle_for(Group& group, uint8_t hop_limit) {
  auto it = group.handles.find(hop_limit);
  if (it != group.handles.end()) return it->second->get();
  ibv_ah_attr attr = group.path.ah_attr;
  attr.grh.hop_limit = hop_limit;
  core::Result<rdma::AddressHandle> ah = rdma::AddressHandle::create(hub_.endpoint().pd(), attr);
  if (!ah) return nullptr;
  auto kept = std::make_unique<rdma::AddressHandle>(std::move(ah.value()));
  ibv_ah* handle = kept->get();
  group.handles[hop_limit] = std::move(kept);
  return handle;
}

bool MulticastOffload::send(DatagramHub& hub, uint32_t group, wire::DatagramHeader header, const iovec* iov,
                            int count, size_t length) {
  if (!offloads(group)) return false;
  SocketOptions options;
  bool usable;
  {
    std::lock_guard<std::mutex> held(mu_);
    auto o = options_.find(header.source_cookie);
    if (o != options_.end()) options = o->second;
    auto g = state_.find(group);
    usable = g != state_.end() && (g->second.member || g->second.send_only);
  }
  if (!options.on_device) return false;
  if (!usable) {
    // A sender that is no member: a send-only join, once.
    std::lock_guard<std::mutex> joining(join_mu_);
    bool joined;
    {
      std::lock_guard<std::mutex> held(mu_);
      Group& g = state_[group];
      joined = g.member || g.send_only;
    }
    if (!joined && !join_group(group, true)) return false;
  }
  ibv_ah* ah = nullptr;
  bool member;
  {
    std::lock_guard<std::mutex> held(mu_);
    Group& g = state_[group];
    if (!(g.member || g.send_only)) return false;  // left meanwhile
    member = g.member;
    if (options.ttl != 0) ah = handle_for(g, options.ttl);
  }
  if (options.ttl != 0 && ah == nullptr) return false;
  header.flags = wire::kDatagramFlagMulticast | (options.loop ? 0 : wire::kDatagramFlagNoLoop);
  header.destination_cookie = 0;
  // TTL 0: the datagram stays on this host (only the loop below sees it).
  if (ah != nullptr && !hub.endpoint().send_datagram(ah, kMulticastQpn, header, iov, count, length)) return false;
  core::stat_add(core::Stat::udp_mcast_sends);
  if (options.loop && member) {
    std::vector<uint8_t> payload(length);
    size_t at = 0;
    for (int i = 0; i < count && at < length; ++i) {
      size_t n = iov[i].iov_len < length - at ? iov[i].iov_len : length - at;
      std::memcpy(payload.data() + at, iov[i].iov_base, n);
      at += n;
    }
    // What the kernel's looped copy would say: sent to the group, with the
    // socket's TTL.
    ArrivalFacts facts;
    facts.destination = ipv4_address(group);
    facts.hop_limit = options.ttl;
    clock_gettime(CLOCK_REALTIME, &facts.received);
    deliver(hub, group, device_address_, header.source_port, header.destination_port, payload.data(), length, facts);
  }
  return true;
}

// ----------------------------------------------------------- receiving --

void MulticastOffload::arrival(DatagramHub& hub, const UdArrival& arrival, const PathKey& key, const sockaddr* from,
                               const uint8_t* payload, size_t length) {
  const uint32_t group = ipv4_of(arrival.grh.destination);
  const uint32_t source = ipv4_of(arrival.grh.source);
  if (group == 0 || (group >> 28) != 0xE || source == 0) {
    core::stat_add(core::Stat::udp_drops_malformed);
    return;
  }
  const bool from_this_host = source == device_address_;
  // Our own send, looped back by the device: its sockets here had it at
  // send time. From another process of this host with loop off: Linux
  // delivers it to no socket of the host.
  if (from_this_host &&
      (arrival.source_qpn == hub.endpoint().qpn() || (arrival.header.flags & wire::kDatagramFlagNoLoop))) {
    core::stat_add(core::Stat::udp_mcast_drops_loop);
    return;
  }
  hub.learn_from_multicast(arrival, key, from, htonl(device_address_));  // the receivers' answers go back over UD
  ArrivalFacts facts;
  facts.destination = arrival.grh.destination;
  facts.hop_limit = arrival.grh.hop_limit;
  facts.traffic_class = arrival.grh.traffic_class;
  clock_gettime(CLOCK_REALTIME, &facts.received);
  deliver(hub, group, source, arrival.header.source_port, arrival.header.destination_port, payload, length, facts);
}

void MulticastOffload::deliver(DatagramHub& hub, uint32_t group, uint32_t source, uint16_t source_port,
                               uint16_t port, const uint8_t* payload, size_t length, const ArrivalFacts& facts) {
  std::vector<uint64_t> receivers;
  {
    std::lock_guard<std::mutex> held(mu_);
    receivers = groups_.receivers(group, source, port);
  }
  sockaddr_storage from{};
  auto* in = reinterpret_cast<sockaddr_in*>(&from);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(source);
  in->sin_port = htons(source_port);
  PathKey key;
  if (!path_key_of(reinterpret_cast<const sockaddr*>(&from), sizeof(sockaddr_in), &key)) return;
  for (uint64_t cookie : receivers) {
    DatagramSocket* socket = hub.find_socket(cookie);
    if (socket == nullptr) continue;  // not on UD (closed, left): the kernel's
    socket->deliver(from, sizeof(sockaddr_in), key, payload, length, facts);
    socket->release();
    core::stat_add(core::Stat::udp_mcast_receives);
  }
}

}  // namespace vsock::sock::dgram
