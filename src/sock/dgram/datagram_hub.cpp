#include "sock/dgram/datagram_hub.hpp"

#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "core/clock.hpp"
#include "core/config.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "sock/dgram/datagram_socket.hpp"
#include "sock/dgram/multicast_offload.hpp"
#include "sock/dgram/receive_progress.hpp"
#include "sock/offload_rules.hpp"
#include "sock/offload_policy.hpp"
#include "sock/upgrade/upgrade_engine.hpp"
#include "sys/reentry_guard.hpp"

namespace vsock::sock::dgram {
namespace {

std::mutex g_hub_lock;
std::atomic<DatagramHub*> g_hub{nullptr};
bool g_hub_failed = false;

// A fork() child cannot use its parent's queue pair: it makes its own hub
// if it needs one (the parent's is leaked in the child, never touched).
void forget_hub_in_child() {
  new (&g_hub_lock) std::mutex();
  g_hub.store(nullptr, std::memory_order_relaxed);
  g_hub_failed = false;
}

__attribute__((constructor)) void install_fork_handler() { pthread_atfork(nullptr, nullptr, forget_hub_in_child); }

constexpr int kProgressBatch = 32;
// The fewest receive buffers a memlock limit may leave the UD pool with.
constexpr uint32_t kFewestReceiveBuffers = 256;

socklen_t with_port(const sockaddr_storage& address, uint16_t port, sockaddr_storage* out) {
  *out = address;
  if (address.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(out)->sin_port = htons(port);
    return sizeof(sockaddr_in);
  }
  if (address.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(out)->sin6_port = htons(port);
    return sizeof(sockaddr_in6);
  }
  return 0;
}

}  // namespace

DatagramHub* DatagramHub::running() { return g_hub.load(std::memory_order_acquire); }

DatagramHub* DatagramHub::get() {
  if (DatagramHub* hub = running()) return hub;
  std::lock_guard<std::mutex> held(g_hub_lock);
  if (DatagramHub* hub = running()) return hub;
  if (g_hub_failed) return nullptr;
  g_hub_failed = true;
  rdma::Device* device = offload_device();
  if (device == nullptr) return nullptr;
  UpgradeEngine* engine = upgrade_engine();
  if (engine == nullptr) return nullptr;
  sys::ReentryGuard guard;
  UdEndpointConfig endpoint_config;
  endpoint_config.receive_depth = core::config().settings.udp_receive_buffers;
  core::Result<std::unique_ptr<UdEndpoint>> endpoint = UdEndpoint::create(*device, endpoint_config);
  // A memlock limit too small for the pool: fewer buffers rather than no UD.
  while (!endpoint && endpoint.error() == ENOMEM && endpoint_config.receive_depth > kFewestReceiveBuffers) {
    endpoint_config.receive_depth = std::max(endpoint_config.receive_depth / 2, kFewestReceiveBuffers);
    VSOCK_LOG(kInfo, "udp: no room to register the UD receive pool (memlock limit?): trying %u buffers",
              endpoint_config.receive_depth);
    endpoint = UdEndpoint::create(*device, endpoint_config);
  }
  if (!endpoint) {
    VSOCK_LOG(kInfo, "udp: no UD endpoint (%s): datagrams stay on the kernel", std::strerror(endpoint.error()));
    return nullptr;
  }
  // Never destroyed: sockets closed by static destructors may reach it.
  auto* hub = new DatagramHub();
  hub->device_ = device;
  hub->engine_ = engine;
  hub->endpoint_ = std::move(endpoint.value());
  hub->paths_.set_failure_hold_ms(int64_t{core::config().settings.peer_fail_cache_s} * 1000);
  DatagramPathSink sink;
  sink.resolved = [](const ResolvedPath& path) {
    if (DatagramHub* h = DatagramHub::running()) h->on_resolved(path);
  };
  sink.failed = [](const sockaddr* destination, socklen_t length, rdma::SidrOutcome reason) {
    if (DatagramHub* h = DatagramHub::running())
      h->on_resolution_failed(destination, length, rdma::sidr_outcome_name(reason));
  };
  engine->set_datagram_sink(sink);
  VSOCK_LOG(kDebug, "udp: UD endpoint up, qpn %u, %zu bytes per datagram", hub->endpoint_->qpn(),
            hub->endpoint_->max_payload());
  g_hub_failed = false;
  g_hub.store(hub, std::memory_order_release);
  start_receive_progress(hub, core::config().settings.udp_progress_us);
  return hub;
}

uint64_t DatagramHub::new_cookie() { return new_nonce(); }

void DatagramHub::attach(uint64_t cookie, DatagramSocket* socket) {
  std::lock_guard<std::mutex> held(sockets_mu_);
  sockets_[cookie] = socket;  // the caller retained it for us
}

void DatagramHub::detach(uint64_t cookie, bool still_open) {
  DatagramSocket* socket = nullptr;
  {
    std::lock_guard<std::mutex> held(sockets_mu_);
    auto it = sockets_.find(cookie);
    if (it == sockets_.end()) return;
    socket = it->second;
    sockets_.erase(it);
    if (still_open) {
      if (departed_.size() >= kMaxDeparted) departed_.erase(departed_.begin());
      departed_.insert(cookie);
    }
  }
  socket->release();
}

void DatagramHub::forget_departed(uint64_t cookie) {
  std::lock_guard<std::mutex> held(sockets_mu_);
  departed_.erase(cookie);
}

int DatagramHub::progress() {
  int taken = endpoint_->poll(&DatagramHub::on_arrival, this, kProgressBatch);
  // Answers to unknown cookies are sent here, after the poll: the endpoint's lock is held
  // while arrivals are handled, and a send takes it too.
  if (!controls_pending_.load(std::memory_order_acquire)) return taken;
  std::vector<PendingControl> controls;
  {
    std::lock_guard<std::mutex> held(controls_mu_);
    controls.swap(controls_);
    controls_pending_.store(false, std::memory_order_release);
  }
  for (const PendingControl& c : controls)
    if (endpoint_->send(c.ah, c.qpn, c.header, nullptr, 0))
      core::stat_add(c.header.type == wire::DatagramType::kRevoke ? core::Stat::udp_revokes_sent
                                                                  : core::Stat::udp_unreach_sent);
  return taken;
}

void DatagramHub::after_event_taken() {
  if (sleepers_.load(std::memory_order_seq_cst) <= 0) return;
  endpoint_->arm();
  progress();
}

bool DatagramHub::finish_sends(int timeout_ms) {
  if (!self_handle_) {
    ibv_ah_attr attr{};
    attr.is_global = 1;
    attr.grh.dgid = device_->gid();
    attr.grh.sgid_index = static_cast<uint8_t>(device_->gid_index());
    attr.grh.hop_limit = 1;
    attr.dlid = device_->lid();
    attr.port_num = device_->port();
    core::Result<rdma::AddressHandle> ah = rdma::AddressHandle::create(endpoint_->pd(), attr);
    if (!ah) return false;
    self_handle_ = std::make_unique<rdma::AddressHandle>(std::move(ah.value()));
    fence_cookie_.store(new_cookie(), std::memory_order_relaxed);
  }
  wire::DatagramHeader fence;
  fence.type = wire::DatagramType::kRevoke;
  fence.source_port = 1;  // a control message names one; nobody reads it
  fence.source_cookie = fence_cookie_.load(std::memory_order_relaxed);
  return endpoint_->finish_sends(self_handle_->get(), endpoint_->qpn(), fence, timeout_ms);
}

void DatagramHub::on_arrival(void* context, const UdArrival& arrival) {
  static_cast<DatagramHub*>(context)->arrival(arrival);
}

bool DatagramHub::learn_path(const PathKey& key, const sockaddr* source, const UdArrival& arrival, UdPath* path,
                             uint32_t multicast_local) {
  UdPath known;
  if (!paths_.needs_learning(key, arrival.source_qpn, arrival.header.source_cookie, &known)) {
    if (known.ah == nullptr) return false;  // no room to learn it
    *path = known;
    return true;
  }
  // Replies to a destination that a rule keeps on the kernel go there.
  if (!rules_offload(core::Proto::kUdp, source, core::Role::kClient)) return false;
  ibv_ah* handle = paths_.handle_for(key);  // one per address: every port and socket there shares it
  if (handle == nullptr) {
    const ibv_grh* slot = arrival.grh_slot;
    uint8_t unicast_slot[rdma::kGrhSize];
    if (multicast_local != 0) {
      rdma::grh_with_destination(reinterpret_cast<const uint8_t*>(slot), arrival.grh.form, multicast_local,
                                 unicast_slot);
      slot = reinterpret_cast<const ibv_grh*>(unicast_slot);
    }
    core::Result<rdma::AddressHandle> ah =
        rdma::AddressHandle::from_completion(endpoint_->pd(), endpoint_->port(), *arrival.completion, slot);
    if (!ah) return false;
    handle = paths_.keep_handle(key, std::make_unique<rdma::AddressHandle>(std::move(ah.value())));
    if (handle == nullptr) return false;
  }
  paths_.resolved(key, handle, arrival.source_qpn, arrival.header.source_cookie);
  return paths_.find(key, core::monotonic_ms(), path) == PathLookup::kResolved;
}

void DatagramHub::arrival(const UdArrival& arrival) {
  const wire::DatagramHeader& header = arrival.header;
  sockaddr_storage source{};
  socklen_t source_length = with_port(arrival.grh.source, header.source_port, &source);
  PathKey key;
  if (source_length == 0 || !path_key_of(reinterpret_cast<sockaddr*>(&source), source_length, &key)) {
    core::stat_add(core::Stat::udp_drops_malformed);
    return;
  }
  if (header.type == wire::DatagramType::kAnnounce) {
    // The path back to its sender and nothing else: no delivery, and no
    // answer when the socket it names is not here (closed, or left UD since
    // the sender resolved it): dropped, counted as received only. The
    // sender's DATA, if any comes, gets the usual UNREACH or REVOKE.
    core::stat_add(core::Stat::udp_announces_received);
    if (DatagramSocket* socket = find_socket(header.destination_cookie)) {
      socket->release();
      UdPath back;
      learn_path(key, reinterpret_cast<const sockaddr*>(&source), arrival, &back);
    }
    return;
  }
  if (header.type == wire::DatagramType::kRevoke) {
    if (header.source_cookie == fence_cookie_.load(std::memory_order_relaxed) &&
        arrival.source_qpn == endpoint_->qpn())
      return;  // finish_sends()'s fence
    core::stat_add(core::Stat::udp_revokes_received);
    paths_.revoke(key, header.source_cookie);
    return;
  }
  if (header.type == wire::DatagramType::kUnreach) {
    core::stat_add(core::Stat::udp_unreach_received);
    paths_.revoke(key, header.source_cookie);
    if (DatagramSocket* socket = find_socket(header.destination_cookie)) {
      socket->on_unreachable(key);
      socket->release();
    }
    return;
  }
  std::vector<uint8_t> whole;
  const uint8_t* payload = arrival.payload;
  size_t length = header.payload_length;
  if (header.fragment_count != 1) {
    if (!reassemble(arrival, key, &whole)) return;
    payload = whole.data();
    length = whole.size();
  }
  if (header.flags & wire::kDatagramFlagMulticast) {
    // The group and the port pick the sockets (multicast_offload.hpp).
    // A process that never joined or sent to a group has no offload: such
    // a message is no one's (a peer's made-up flag).
    if (MulticastOffload* multicast = MulticastOffload::running())
      multicast->arrival(*this, arrival, key, reinterpret_cast<const sockaddr*>(&source), payload, length);
    else
      core::stat_add(core::Stat::udp_drops_malformed);
    return;
  }
  DatagramSocket* socket = find_socket(header.destination_cookie);
  if (socket == nullptr) {
    core::stat_add(core::Stat::udp_drops_unknown_socket);
    answer_unknown_cookie(arrival);
    return;
  }
  UdPath back;
  learn_path(key, reinterpret_cast<const sockaddr*>(&source), arrival, &back);  // replies need no resolution
  ArrivalFacts facts;
  facts.destination = arrival.grh.destination;
  facts.hop_limit = arrival.grh.hop_limit;
  facts.traffic_class = arrival.grh.traffic_class;
  // The clock is read only for a socket that asked for timestamps.
  if (socket->wants_timestamps()) clock_gettime(CLOCK_REALTIME, &facts.received);
  if (!socket->deliver(source, source_length, key, payload, length, facts)) {
    // It names a socket connected to another peer: the kernel would give
    // it to the socket on that port that takes it (iperf3 -u --bidir: a
    // second socket on the port for the second stream).
    if (DatagramSocket* other = socket_for(header.destination_port, key, header.destination_cookie)) {
      if (other->wants_timestamps()) clock_gettime(CLOCK_REALTIME, &facts.received);
      other->deliver(source, source_length, key, payload, length, facts);
      other->release();
    }
  }
  socket->release();
}

void DatagramHub::learn_from_multicast(const UdArrival& arrival, const PathKey& key, const sockaddr* source,
                                       uint32_t local) {
  if (arrival.header.source_cookie == 0) return;
  UdPath back;
  learn_path(key, source, arrival, &back, local);
}

bool DatagramHub::reassemble(const UdArrival& arrival, const PathKey& from, std::vector<uint8_t>* whole) {
  // The sender, folded into the reassembler's opaque name: its QP and
  // address (the cookie and datagram id complete the key).
  uint64_t source = uint64_t{arrival.source_qpn} << 32;
  for (int i = 0; i < 16; ++i) source ^= uint64_t{from.address[i]} << (8 * (i % 4));
  DatagramKey key{source, arrival.header.source_cookie, arrival.header.datagram_id};
  FragmentFields fields{arrival.header.total_length, arrival.header.fragment_count, arrival.header.fragment_index};
  const uint64_t dropped_before = reassembly_drops();
  FragmentVerdict verdict = reassembler_.add(key, fields, arrival.payload, arrival.header.payload_length,
                                             static_cast<uint64_t>(core::monotonic_ms()), whole);
  if (uint64_t dropped = reassembly_drops() - dropped_before)
    core::stat_add(core::Stat::udp_drops_reassembly, dropped);
  return verdict == FragmentVerdict::kComplete;
}

uint64_t DatagramHub::reassembly_drops() const {
  const ReassemblyCounters& c = reassembler_.counters();
  return c.bad_layout + c.duplicates + c.mismatched + c.too_large + c.evicted + c.timed_out;
}

DatagramSocket* DatagramHub::find_socket(uint64_t cookie) {
  std::lock_guard<std::mutex> held(sockets_mu_);
  auto it = sockets_.find(cookie);
  if (it == sockets_.end()) return nullptr;
  it->second->retain();
  return it->second;
}

DatagramSocket* DatagramHub::socket_for(uint16_t port, const PathKey& from, uint64_t except) {
  std::lock_guard<std::mutex> held(sockets_mu_);
  DatagramSocket* best = nullptr;
  int best_match = 0;
  for (const auto& [cookie, socket] : sockets_) {
    if (cookie == except) continue;
    int match = socket->match(port, from);
    if (match > best_match) {
      best = socket;
      best_match = match;
    }
  }
  if (best != nullptr) best->retain();
  return best;
}

void DatagramHub::answer_unknown_cookie(const UdArrival& arrival) {
  sockaddr_storage source{};
  socklen_t source_length = with_port(arrival.grh.source, arrival.header.source_port, &source);
  PathKey key;
  UdPath back;
  if (!path_key_of(reinterpret_cast<sockaddr*>(&source), source_length, &key) ||
      !learn_path(key, reinterpret_cast<const sockaddr*>(&source), arrival, &back))
    return;
  bool departed;
  {
    std::lock_guard<std::mutex> held(sockets_mu_);
    departed = departed_.count(arrival.header.destination_cookie) != 0;
  }
  // The socket it named is gone here: UNREACH (its path is forgotten; a
  // connected socket sees ECONNREFUSED, as after the kernel's ICMP port
  // unreachable). Or it left UD and its kernel socket lives on: REVOKE
  // (the sender's next datagram goes through the kernel, to it).
  wire::DatagramHeader answer;
  answer.type = departed ? wire::DatagramType::kRevoke : wire::DatagramType::kUnreach;
  answer.source_port = arrival.header.destination_port;
  answer.source_cookie = arrival.header.destination_cookie;
  answer.destination_port = arrival.header.source_port;
  answer.destination_cookie = arrival.header.source_cookie;
  answer.datagram_id = departed ? 0 : arrival.header.datagram_id;
  answer.total_length = 0;
  answer.payload_length = 0;
  std::lock_guard<std::mutex> held(controls_mu_);
  if (controls_.size() < kMaxPendingControls) controls_.push_back(PendingControl{back.ah, back.qpn, answer});
  controls_pending_.store(true, std::memory_order_release);
}

void DatagramHub::revoke_peers(uint64_t cookie, uint16_t port, const std::vector<PathKey>& peers) {
  if (port == 0) return;
  const int64_t now = core::monotonic_ms();
  for (const PathKey& peer : peers) {
    UdPath path;
    if (paths_.find(peer, now, &path) != PathLookup::kResolved) continue;
    wire::DatagramHeader revoke;
    revoke.type = wire::DatagramType::kRevoke;
    revoke.source_port = port;
    revoke.source_cookie = cookie;
    revoke.destination_port = peer.port;
    revoke.destination_cookie = path.cookie;
    revoke.datagram_id = 0;
    revoke.total_length = 0;
    revoke.payload_length = 0;
    if (endpoint_->send(path.ah, path.qpn, revoke, nullptr, 0)) core::stat_add(core::Stat::udp_revokes_sent);
  }
}

void DatagramHub::on_resolved(const ResolvedPath& path) {
  PathKey key;
  if (!path_key_of(reinterpret_cast<const sockaddr*>(&path.destination), path.destination_length, &key)) return;
  ibv_ah* handle = paths_.handle_for(key);
  if (handle == nullptr) {
    core::Result<rdma::AddressHandle> ah = rdma::AddressHandle::create(endpoint_->pd(), path.ah_attr);
    if (ah) handle = paths_.keep_handle(key, std::make_unique<rdma::AddressHandle>(std::move(ah.value())));
  }
  if (handle == nullptr) {
    note_resolution_failed(key, "no address handle");
  } else {
    paths_.resolved(key, handle, path.qpn, path.cookie);
    core::stat_add(core::Stat::udp_resolutions);
  }
  announce_owed(key);  // after the path changed: see owed_mu_
}

void DatagramHub::note_resolution_failed(const PathKey& key, const char* why) {
  const int64_t hold_ms = paths_.failed(key, core::monotonic_ms());
  core::stat_add(core::Stat::udp_resolution_failures);
  // Once per hold, and the holds double: a destination that is no libvsock
  // socket logs a line a minute at most.
  if (hold_ms > 0)
    VSOCK_LOG(kInfo, "udp: no UD path to %s (%s): datagrams to it go through the kernel for %lld ms",
              path_key_text(key).c_str(), why, static_cast<long long>(hold_ms));
}

void DatagramHub::on_resolution_failed(const sockaddr* destination, socklen_t length, const char* why) {
  PathKey key;
  if (!path_key_of(destination, length, &key)) return;
  note_resolution_failed(key, why);
  // A datagram from there may have taught the path meanwhile (failed()
  // keeps it): then the owed sockets are announced over it.
  announce_owed(key);
}

void DatagramHub::owe_announcement(const PathKey& destination, uint16_t port, uint64_t cookie) {
  UdPath path;
  PathLookup found;
  {
    std::lock_guard<std::mutex> held(owed_mu_);
    found = paths_.find(destination, core::monotonic_ms(), &path);
    if (found == PathLookup::kResolving) {
      owed_.owe(destination, OwedSocket{port, cookie});  // past its bounds: not announced
      return;
    }
  }
  // The resolution ended between the kernel's send and this look (or a
  // datagram from there taught the path): its outcome is known already.
  if (found == PathLookup::kResolved && is_unicast(destination))
    send_announcement(path, destination.port, OwedSocket{port, cookie});
}

void DatagramHub::announce_owed(const PathKey& destination) {
  std::vector<OwedSocket> owed;
  {
    std::lock_guard<std::mutex> held(owed_mu_);
    owed = owed_.take(destination);
  }
  if (owed.empty()) return;
  UdPath path;
  if (paths_.find(destination, core::monotonic_ms(), &path) != PathLookup::kResolved) return;
  for (const OwedSocket& from : owed) send_announcement(path, destination.port, from);
}

void DatagramHub::send_announcement(const UdPath& path, uint16_t destination_port, const OwedSocket& from) {
  // A socket that closed or left UD since its send is not announced: its
  // peer must not learn a path to a socket that no longer takes UD. (One
  // that leaves right after this look may see its REVOKE overtaken by the
  // announcement; the peer's next DATA to it is then answered with an
  // UNREACH, which forgets the path.)
  DatagramSocket* socket = find_socket(from.cookie);
  if (socket == nullptr) return;
  socket->release();
  wire::DatagramHeader announce;
  announce.type = wire::DatagramType::kAnnounce;
  announce.source_port = from.port;
  announce.source_cookie = from.cookie;
  announce.destination_port = destination_port;
  announce.destination_cookie = path.cookie;
  announce.datagram_id = 0;
  announce.total_length = 0;
  announce.payload_length = 0;
  // Lost if the queue pair cannot take it now (slots in flight, a failed
  // port): the peer then answers through the kernel, as without it.
  if (endpoint_->send(path.ah, path.qpn, announce, nullptr, 0)) core::stat_add(core::Stat::udp_announces_sent);
}

}  // namespace vsock::sock::dgram
