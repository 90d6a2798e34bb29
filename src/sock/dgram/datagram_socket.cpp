#include "sock/dgram/datagram_socket.hpp"

#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/ioctl.h>

#include <linux/sock_diag.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/clock.hpp"
#include "core/config.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "sock/dgram/datagram_hub.hpp"
#include "sock/dgram/interface_index.hpp"
#include "sock/dgram/option_names.hpp"
#include "sock/offload_rules.hpp"
#include "sock/upgrade/upgrade_engine.hpp"
#include "sock/wait/signal_restart.hpp"
#include "sock/wait/spin_budget.hpp"
#include "sys/real_calls.hpp"

namespace vsock::sock::dgram {
namespace {

// Flags a datagram over UD can honour as the kernel does. Anything else
// (MSG_MORE corks, MSG_OOB fails, MSG_PROBE sends nothing...) goes to the
// kernel, which gives its own answer.
constexpr int kUdSendFlags = MSG_DONTWAIT | MSG_NOSIGNAL | MSG_CONFIRM;
// Receive flags only the kernel's queue answers (its error queue, urgent
// data): such a call goes to the kernel alone. Any other flag (MSG_PEEK,
// MSG_TRUNC, MSG_DONTWAIT; MSG_NOSIGNAL, MSG_WAITALL, MSG_CMSG_CLOEXEC,
// which mean nothing more on UDP) is served from both paths.
constexpr int kKernelOnlyReceiveFlags = MSG_ERRQUEUE | MSG_OOB;
// How long a sleep lasts at most before looking again, where nothing else
// would wake it: a socket not attached to UD yet (another thread's send
// may attach it), or one that could get no wake-up fd (sleeper_wake.hpp).
constexpr int kSleepSliceMs = 100;
// The hub this thread counted itself a sleeper of in wake_fds() (a poll or
// epoll sleep), until its next look (poll_events).
thread_local DatagramHub* t_sleeping_on = nullptr;
// The budget until the kernel socket's SO_RCVBUF is read (at attach):
// Linux's default rmem.
constexpr size_t kDefaultReceiveBudget = 212992;

size_t total_length(const msghdr& msg) {
  size_t total = 0;
  for (size_t i = 0; i < msg.msg_iovlen; ++i) total += msg.msg_iov[i].iov_len;
  return total;
}

bool is_loopback(const PathKey& key) {
  static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(key.address, v4_prefix, 12) == 0) return key.address[12] == 127;
  static const uint8_t v6_loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return std::memcmp(key.address, v6_loopback, 16) == 0;
}

}  // namespace

DatagramSocket::DatagramSocket(int domain)
    : domain_(domain), cookie_(new_nonce()), queue_(kDefaultReceiveBudget) {}

void DatagramSocket::release() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

// ------------------------------------------------------------- the hooks --

uint16_t DatagramSocket::local_port(int fd) {
  if (port_ != 0) return port_;
  sockaddr_storage local{};
  socklen_t length = sizeof local;
  if (sys::real().getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) return 0;
  PathKey key;
  if (path_key_of(reinterpret_cast<sockaddr*>(&local), length, &key)) port_ = key.port;
  return port_;
}

// A socket that never bound gets the port the kernel would give it on its
// first send (the family's any address, an ephemeral port), so that its
// first datagram can go over UD too: a resolver that opens a socket per
// query (dig, libc's stub resolver) sends exactly one datagram per socket.
bool DatagramSocket::bind_as_first_send(int fd) {
  sockaddr_storage any{};
  socklen_t length = sizeof(sockaddr_in);
  any.ss_family = static_cast<sa_family_t>(domain_);
  if (domain_ == AF_INET6) length = sizeof(sockaddr_in6);
  else if (domain_ != AF_INET) return false;
  if (sys::real().bind(fd, reinterpret_cast<const sockaddr*>(&any), length) != 0) return false;
  port_ = 0;
  return local_port(fd) != 0;
}

void DatagramSocket::read_budget_locked(int fd) {
  int receive_buffer = 0;
  socklen_t option_length = sizeof receive_buffer;
  if (sys::real().getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, &option_length) == 0 && receive_buffer > 0)
    queue_.set_budget(static_cast<size_t>(receive_buffer));
}

void DatagramSocket::receive_buffer_changed(int fd) {
  std::lock_guard<std::mutex> held(mu_);
  read_budget_locked(fd);
}

void DatagramSocket::attach_locked(int fd) {
  if (hub_ != nullptr || leaving_) return;
  DatagramHub* hub = DatagramHub::get();
  if (hub == nullptr) return;
  // The UD queue's budget is the kernel socket's SO_RCVBUF (read again when set).
  read_budget_locked(fd);
  hub_ = hub;
  retain();
  hub->attach(cookie_, this);
  wake_.signal();  // a sleeper that had no UD side to watch looks again
}

void DatagramSocket::on_bound(int fd, const sockaddr* local, socklen_t length) {
  std::lock_guard<std::mutex> held(mu_);
  PathKey key;
  port_ = path_key_of(local, length, &key) ? key.port : 0;
  if (leaving_ || port_ == 0) return;
  attach_locked(fd);
  if (hub_ == nullptr) return;
  // A wildcard address listens on every RDMA device's address.
  listening_ = hub_->engine().listen_datagrams(local, hub_->endpoint().qpn(), cookie_);
  VSOCK_LOG(kDebug, "udp fd %d: bound to port %u, %s", fd, static_cast<unsigned>(port_),
            listening_ ? "answers resolutions there" : "not reachable by resolution");
}

void DatagramSocket::on_connected(int fd, const sockaddr* peer, socklen_t length) {
  std::lock_guard<std::mutex> held(mu_);
  if (peer == nullptr || peer->sa_family == AF_UNSPEC || !path_key_of(peer, length, &peer_key_)) {
    connected_ = false;
    peer_length_ = 0;
  } else {
    connected_ = true;
    peer_length_ = length < sizeof peer_ ? length : static_cast<socklen_t>(sizeof peer_);
    std::memcpy(&peer_, peer, peer_length_);
  }
  port_ = 0;  // connect() binds an unbound socket
  (void)local_port(fd);
}

void DatagramSocket::detach(bool closing) {
  DatagramHub* hub = nullptr;
  bool listening = false;
  std::vector<PathKey> peers;
  uint16_t port;
  {
    std::lock_guard<std::mutex> held(mu_);
    leaving_ = true;
    hub = hub_;
    hub_ = nullptr;
    listening = listening_;
    listening_ = false;
    peers.swap(peers_);
    port = port_;
    if (queue_.empty()) {
      kernel_only_.store(true, std::memory_order_release);
      note_route_changed();
    }
  }
  wake_.signal();  // its sleepers no longer watch the UD side
  if (hub == nullptr) {
    // It left UD before (its cookie is remembered as departed): closed now.
    if (closing) {
      if (DatagramHub* running = DatagramHub::running()) running->forget_departed(cookie_);
    }
    return;
  }
  if (listening) hub->engine().stop_listening_datagrams(cookie_);
  hub->detach(cookie_, !closing);  // drops the hub's reference
  // Peers that would still send here over UD go back to the kernel now.
  hub->revoke_peers(cookie_, port, peers);
}

void DatagramSocket::note_peer_locked(const PathKey& peer) {
  if (!peers_.empty() && peers_.back() == peer) return;
  for (const PathKey& known : peers_)
    if (known == peer) return;
  if (peers_.size() < kMaxPeers) peers_.push_back(peer);
}

void DatagramSocket::on_unreachable(const PathKey& from) {
  std::lock_guard<std::mutex> held(mu_);
  if (!connected_ || !(from == peer_key_)) return;  // an unconnected socket is not told, as with ICMP
  pending_error_.store(ECONNREFUSED, std::memory_order_release);
  activity_.fetch_add(1, std::memory_order_acq_rel);
  wake_.signal();
}

void DatagramSocket::leave_ud() { detach(false); }

void DatagramSocket::abandon_in_child() {
  std::lock_guard<std::mutex> held(mu_);
  // The hub of the parent is not this process's: forget it without a call.
  if (hub_ != nullptr) refs_.fetch_sub(1, std::memory_order_relaxed);
  hub_ = nullptr;
  listening_ = false;
  leaving_ = true;
  queue_.clear();
  queued_.store(0, std::memory_order_release);
  kernel_only_.store(true, std::memory_order_release);
  note_route_changed();
}

void DatagramSocket::on_last_close() { detach(true); }

int DatagramSocket::match(uint16_t port, const PathKey& from) {
  std::lock_guard<std::mutex> held(mu_);
  if (leaving_ || port_ != port) return 0;
  if (!connected_) return 1;
  return from == peer_key_ ? 2 : 0;
}

bool DatagramSocket::deliver(const sockaddr_storage& source, socklen_t source_length, const PathKey& from,
                             const uint8_t* payload, size_t length, const ArrivalFacts& arrival) {
  ReceivedDatagram datagram;
  datagram.arrival = arrival;
  datagram.source_length = source_length;
  datagram.source = source;
  // An IPv6 socket sees an IPv4 sender as ::ffff:a.b.c.d, as from the kernel.
  if (domain_ == AF_INET6 && source.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&source);
    sockaddr_in6 mapped{};
    mapped.sin6_family = AF_INET6;
    mapped.sin6_port = in->sin_port;
    mapped.sin6_addr.s6_addr[10] = 0xff;
    mapped.sin6_addr.s6_addr[11] = 0xff;
    std::memcpy(&mapped.sin6_addr.s6_addr[12], &in->sin_addr, 4);
    std::memcpy(&datagram.source, &mapped, sizeof mapped);
    datagram.source_length = sizeof mapped;
  } else if (domain_ == AF_INET && source.ss_family != AF_INET) {
    return true;  // an IPv6 sender cannot reach an IPv4 socket
  }
  datagram.bytes.assign(payload, payload + length);
  std::lock_guard<std::mutex> held(mu_);
  if (leaving_) return true;  // it left UD while this was on its way: lost, as UDP may
  // A connected socket hears only its peer, as the kernel's.
  if (connected_ && !(from == peer_key_)) return false;
  note_peer_locked(from);
  if (!queue_.push(std::move(datagram))) {
    core::stat_add(core::Stat::udp_drops_budget);
    return true;
  }
  queued_.store(queue_.count(), std::memory_order_release);
  activity_.fetch_add(1, std::memory_order_acq_rel);
  ud_bytes_received_ += length;
  core::stat_add(core::Stat::udp_ud_receives);  // an empty datagram is one too
  core::stat_add(core::Stat::udp_ud_bytes_received, length);
  wake_.signal();
  return true;
}

// ------------------------------------------------------------------ send --

bool DatagramSocket::segment_size_for(const msghdr& msg, uint16_t* size) const {
  *size = segment_size_.load(std::memory_order_relaxed);
  if (msg.msg_controllen == 0) return true;
  if (msg.msg_control == nullptr || msg.msg_controllen < sizeof(cmsghdr)) return false;
  auto& m = const_cast<msghdr&>(msg);
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
    // Anything but a well-formed UDP_SEGMENT is the kernel's to answer.
    if (c->cmsg_level != SOL_UDP || c->cmsg_type != UDP_SEGMENT || c->cmsg_len != CMSG_LEN(sizeof(uint16_t)))
      return false;
    std::memcpy(size, CMSG_DATA(c), sizeof *size);
  }
  return true;
}

size_t DatagramSocket::segment_count(size_t length, uint16_t segment_size) {
  if (segment_size == 0 || length <= segment_size) return 1;  // one datagram, as the kernel sends it
  const size_t count = (length + segment_size - 1) / segment_size;
  // What the kernel itself would refuse, or might (a path MTU below the
  // segment), is left to it: 0.
  if (segment_size > kMaxUdSegment || count > kMaxSegments || length > kMaxUdpPayload) return 0;
  return count;
}

bool DatagramSocket::route_over_ud(int fd, const msghdr& msg, int flags, UdRoute* route) {
  route->resolving = false;
  const sockaddr* to = static_cast<const sockaddr*>(msg.msg_name);
  socklen_t to_length = msg.msg_namelen;
  sockaddr_storage peer{};
  if (to == nullptr || to_length == 0) {
    std::lock_guard<std::mutex> held(mu_);
    if (!connected_) return false;  // the kernel's EDESTADDRREQ
    peer = peer_;
    to = reinterpret_cast<const sockaddr*>(&peer);
    to_length = peer_length_;
  }
  PathKey key;
  // An address of another family than the socket's is the kernel's to
  // refuse (an IPv6 socket may send to IPv4 addresses, not the reverse).
  if (domain_ == AF_INET && to->sa_family != AF_INET) return false;
  if (!path_key_of(to, to_length, &key) || is_loopback(key) || !is_unicast(key)) return false;
  if ((flags & ~kUdSendFlags) != 0) return false;
  if (send_through_kernel_.load(std::memory_order_acquire)) return false;
  uint16_t segment_size = 0;
  if (!segment_size_for(msg, &segment_size)) return false;
  const size_t length = total_length(msg);
  const size_t count = segment_count(length, segment_size);
  if (count == 0) return false;
  DatagramHub* hub = DatagramHub::get();
  if (hub == nullptr) return false;
  const int64_t now = core::monotonic_ms();
  UdPath path;
  PathLookup found = hub->paths().find(key, now, &path);
  if (found == PathLookup::kUnknown) {
    if (!rules_offload(core::Proto::kUdp, to, core::Role::kClient)) {
      // A rule keeps this destination on the kernel: held as a failure,
      // so the rules are asked again only after the hold.
      hub->paths().failed(key, now);
      return false;
    }
    if (hub->paths().begin_resolution(key, now) && !hub->engine().resolve_datagram_path(to, to_length)) {
      hub->note_resolution_failed(key, "not started");
      return false;
    }
    found = PathLookup::kResolving;  // by this call, or by another thread just before
  }
  if (found == PathLookup::kResolving) {
    route->resolving = true;
    route->destination = key;
    route->hub = hub;
    return false;
  }
  if (found != PathLookup::kResolved) return false;
  {
    std::lock_guard<std::mutex> held(mu_);
    if (leaving_ || (local_port(fd) == 0 && !bind_as_first_send(fd))) return false;
    attach_locked(fd);  // replies come back over UD
    if (hub_ == nullptr) return false;
    route->whole.header.source_port = port_;
    route->whole.header.datagram_id = next_datagram_id_;
    next_datagram_id_ += static_cast<uint32_t>(count);  // one id per segment
    note_peer_locked(key);
  }
  UdOutgoing& out = route->whole;
  out.header.type = wire::DatagramType::kData;
  out.header.destination_port = key.port;
  out.header.destination_cookie = path.cookie;
  out.header.source_cookie = cookie_;
  out.ah = path.ah;
  out.qpn = path.qpn;
  out.iov = msg.msg_iov;
  out.iov_count = static_cast<int>(msg.msg_iovlen);
  out.length = length;
  route->segments = count;
  route->segment_size = segment_size;
  route->hub = hub;
  return true;
}

bool DatagramSocket::send_segments(const UdRoute& route) {
  // Each segment is a datagram of its own, as the kernel's GSO sends them;
  // all go as one chain or none does (the kernel then segments it).
  std::vector<UdOutgoing> segments(route.segments, route.whole);
  for (size_t i = 0; i < route.segments; ++i) {
    UdOutgoing& segment = segments[i];
    segment.header.datagram_id = route.whole.header.datagram_id + static_cast<uint32_t>(i);
    segment.offset = i * route.segment_size;
    segment.length = std::min<size_t>(route.segment_size, route.whole.length - segment.offset);
  }
  size_t posted = 0;
  route.hub->endpoint().send_datagrams(segments.data(), segments.size(), &posted, true);
  if (posted != segments.size()) return false;
  count_ud_sent(posted, route.whole.length);
  return true;
}

void DatagramSocket::count_ud_sent(uint64_t datagrams, uint64_t bytes) {
  core::stat_add(core::Stat::udp_ud_sends, datagrams);
  core::stat_add(core::Stat::udp_ud_bytes_sent, bytes);
  ud_bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
}

core::Result<size_t> DatagramSocket::send_message(int fd, const msghdr& msg, int flags) {
  using R = core::Result<size_t>;
  if (int error = take_pending_error()) return R::fail(error);
  if (send_multicast_over_ud(fd, msg, flags)) return R::ok(total_length(msg));
  UdRoute route;
  // EAGAIN (every slot in flight) or a device error: the kernel takes it.
  if (route_over_ud(fd, msg, flags, &route)) {
    if (route.segments > 1) {
      if (send_segments(route)) return R::ok(route.whole.length);
    } else {
      size_t posted = 0;
      route.hub->endpoint().send_datagrams(&route.whole, 1, &posted);
      if (posted == 1) {
        count_ud_sent(1, route.whole.length);
        return R::ok(route.whole.length);
      }
    }
  }
  ssize_t n = sys::real().sendmsg(fd, &msg, flags);
  if (n < 0) return R::fail(errno);
  core::stat_add(core::Stat::udp_kernel_sends);
  if (route.resolving) owe_announcement(fd, route);
  return R::ok(static_cast<size_t>(n));
}

void DatagramSocket::owe_announcement(int fd, const UdRoute& route) {
  uint16_t port;
  {
    std::lock_guard<std::mutex> held(mu_);
    // The kernel's send bound an unbound socket: its port is known now.
    if (leaving_ || local_port(fd) == 0) return;
    // The peer will learn the way here: what it sends over UD must find
    // the socket attached (else it would be answered with UNREACH).
    attach_locked(fd);
    if (hub_ == nullptr) return;
    note_peer_locked(route.destination);  // told (REVOKE) when the socket leaves
    port = port_;
  }
  route.hub->owe_announcement(route.destination, port, cookie_);
}

core::Result<unsigned> DatagramSocket::send_messages(int fd, mmsghdr* msgs, unsigned count, int flags) {
  using R = core::Result<unsigned>;
  unsigned done = 0;
  UdOutgoing run[kSendRun];
  while (done < count) {
    // The longest run of datagrams that UD can take now, posted as one
    // chain: one doorbell for all of them.
    // A message cut in segments (UDP_SEGMENT) goes alone.
    size_t prepared = 0;
    DatagramHub* hub = nullptr;
    UdRoute route;
    while (done + prepared < count && prepared < kSendRun) {
      const msghdr& msg = msgs[done + prepared].msg_hdr;
      if (msg.msg_iovlen > static_cast<size_t>(IOV_MAX) || !route_over_ud(fd, msg, flags, &route) ||
          route.segments > 1)
        break;
      run[prepared++] = route.whole;
      hub = route.hub;
    }
    if (prepared > 0) {
      size_t posted = 0;
      hub->endpoint().send_datagrams(run, prepared, &posted);
      uint64_t bytes = 0;
      for (size_t i = 0; i < posted; ++i) {
        msgs[done + i].msg_len = static_cast<unsigned>(run[i].length);
        bytes += run[i].length;
      }
      if (posted > 0) {
        count_ud_sent(posted, bytes);
        done += static_cast<unsigned>(posted);
        continue;
      }
    }
    // This one alone: through the kernel (or UD, once more, if room came).
    if (msgs[done].msg_hdr.msg_iovlen > static_cast<size_t>(IOV_MAX)) {
      if (done > 0) break;
      return R::fail(EMSGSIZE);
    }
    core::Result<size_t> sent = send_message(fd, msgs[done].msg_hdr, flags);
    if (!sent) {
      if (done > 0) break;
      return R::fail(sent.error());
    }
    msgs[done].msg_len = static_cast<unsigned>(sent.value());
    ++done;
  }
  return R::ok(done);
}

// --------------------------------------------------------------- receive --

size_t DatagramSocket::take_queued(int fd, msghdr& msg, int flags) {
  const ReceivedDatagram& front = queue_.front();
  ArrivalFacts arrival = front.arrival;
  ReceiverFacts receiver;
  receiver.domain = domain_;
  receiver.local_port = port_;
  receiver.drops = front.drops_before;
  size_t n = queue_.take(msg, flags);
  if (receive_options_.any()) {
    if (receive_options_.ip_pktinfo || receive_options_.v6_pktinfo)
      receiver.interface_index = interface_index_of(arrival.destination);
    if (receive_options_.rxq_ovfl) receiver.drops += kernel_drops(fd);
    // Queued before timestamps were asked for: stamped now, as the kernel
    // stamps an skb that came without one.
    if (receive_options_.timestamp && arrival.received.tv_sec == 0 && arrival.received.tv_nsec == 0)
      clock_gettime(CLOCK_REALTIME, &arrival.received);
    write_receive_controls(msg, receive_options_, arrival, receiver);
  } else {
    msg.msg_controllen = 0;
  }
  queued_.store(queue_.count(), std::memory_order_release);
  if (queue_.empty() && leaving_) {
    kernel_only_.store(true, std::memory_order_release);
    note_route_changed();
  }
  if (!(flags & MSG_PEEK)) turns_.took_from_ud();
  return n;
}

void DatagramSocket::receive_options_changed(int fd) {
  auto on = [fd](int level, int name) {
    int value = 0;
    socklen_t length = sizeof value;
    return sys::real().getsockopt(fd, level, name, &value, &length) == 0 && value != 0;
  };
  ReceiveOptions options;
  const bool old_form = on(SOL_SOCKET, SO_TIMESTAMP_OLD), old_ns = on(SOL_SOCKET, SO_TIMESTAMPNS_OLD);
  const bool new_form = on(SOL_SOCKET, SO_TIMESTAMP_NEW), new_ns = on(SOL_SOCKET, SO_TIMESTAMPNS_NEW);
  options.timestamp = old_form || old_ns || new_form || new_ns;
  options.timestamp_ns = old_ns || new_ns;
  options.timestamp_new = new_form || new_ns;
  options.rxq_ovfl = on(SOL_SOCKET, SO_RXQ_OVFL);
  options.ip_pktinfo = on(IPPROTO_IP, IP_PKTINFO);
  options.ip_ttl = on(IPPROTO_IP, IP_RECVTTL);
  options.ip_tos = on(IPPROTO_IP, IP_RECVTOS);
  options.ip_origdstaddr = on(IPPROTO_IP, IP_RECVORIGDSTADDR);
  if (domain_ == AF_INET6) {
    options.v6_pktinfo = on(IPPROTO_IPV6, IPV6_RECVPKTINFO);
    options.v6_hoplimit = on(IPPROTO_IPV6, IPV6_RECVHOPLIMIT);
    options.v6_tclass = on(IPPROTO_IPV6, IPV6_RECVTCLASS);
    options.v6_origdstaddr = on(IPPROTO_IPV6, IPV6_RECVORIGDSTADDR);
  }
  std::lock_guard<std::mutex> held(mu_);
  receive_options_ = options;
  wants_timestamps_.store(options.timestamp, std::memory_order_relaxed);
}

void DatagramSocket::segment_size_changed(int fd) {
  int size = 0;
  socklen_t length = sizeof size;
  if (sys::real().getsockopt(fd, SOL_UDP, UDP_SEGMENT, &size, &length) != 0) return;
  segment_size_.store(size > 0 && size <= UINT16_MAX ? static_cast<uint16_t>(size) : 0, std::memory_order_relaxed);
}

uint32_t DatagramSocket::kernel_drops(int fd) {
  uint32_t meminfo[SK_MEMINFO_VARS] = {};
  socklen_t length = sizeof meminfo;
  if (sys::real().getsockopt(fd, SOL_SOCKET, SO_MEMINFO, meminfo, &length) != 0) return 0;
  return meminfo[SK_MEMINFO_DROPS];
}

void DatagramSocket::count_kernel_receive(ssize_t n) {
  if (n >= 0) core::stat_add(core::Stat::udp_kernel_receives);
}

core::Result<bool> DatagramSocket::wait_readable(int fd, int64_t deadline_ms) {
  using R = core::Result<bool>;
  DatagramHub* hub;
  {
    std::lock_guard<std::mutex> held(mu_);
    hub = hub_;
  }
  // The spin: the UD queue on every look, the kernel socket now and then.
  SpinBudget spin(core::config().settings.spin_us, deadline_ms < 0 ? -1 : deadline_ms * 1000,
                  SpinHistory::of_this_thread());
  pollfd kernel{fd, POLLIN, 0};
  const timespec now{0, 0};
  if (hub != nullptr) {
    do {
      hub->progress();
      if (queued_.load(std::memory_order_acquire) > 0) return R::ok(true);
      if (spin.checkpoint() && asks_kernel(POLLIN, Look::kCheckpoint, false) &&
          sys::real().ppoll(&kernel, 1, &now, nullptr) > 0)
        return R::ok(true);
    } while (spin.next());
  }
  // Attached: the sleep watches the socket's own wake-up too (another
  // thread may take the arrival meant for it) and needs no slice.
  const int wake_fd = hub != nullptr ? wake_.prepare() : -1;
  if (hub != nullptr) {
    hub->sleeper_in();
    hub->endpoint().arm();
    if (hub->progress() > 0 || queued_.load(std::memory_order_acquire) > 0) {
      hub->sleeper_out();
      return R::ok(true);
    }
  }
  pollfd fds[3] = {{fd, POLLIN, 0},
                   {hub != nullptr ? hub->endpoint().completion_fd() : -1, POLLIN, 0},
                   {wake_fd, POLLIN, 0}};
  // Unattached (another thread's send may attach it) or without a wake-up
  // fd: slices, as the only way to notice.
  int slice = wake_fd >= 0 ? -1 : kSleepSliceMs;
  if (deadline_ms >= 0) {
    int64_t left = deadline_ms - core::monotonic_ms();
    if (left <= 0) {
      if (hub != nullptr) hub->sleeper_out();
      // The spin may have left a quiet kernel socket out: it has the last word.
      if (sys::real().ppoll(&kernel, 1, &now, nullptr) > 0) return R::ok(true);
      return R::fail(EAGAIN);
    }
    if (slice < 0 || left < slice) slice = static_cast<int>(left);
  }
  core::stat_add(core::Stat::wait_sleeps);
  int rc = sys::real().poll(fds, hub == nullptr ? 1 : wake_fd >= 0 ? 3 : 2, slice);
  int saved = errno;
  if (hub != nullptr) {
    hub->sleeper_out();
    if ((fds[1].revents & POLLIN) && hub->endpoint().take_event() > 0) hub->after_event_taken();
    if (wake_fd >= 0) wake_.consume();
  }
  if (rc < 0 && saved == EINTR) {
    // As the kernel: restarted after SA_RESTART handlers unless a timeout is set.
    if (deadline_ms < 0 && handlers_restart_calls()) return R::ok(false);
    return R::fail(EINTR);
  }
  return R::ok(rc > 0);
}

int64_t DatagramSocket::blocking_deadline(int fd) {
  std::lock_guard<std::mutex> held(mu_);
  return blocking_.deadline_ms(fd, true);
}

core::Result<size_t> DatagramSocket::receive_message(int fd, msghdr& msg, int flags) {
  using R = core::Result<size_t>;
  if ((flags & kKernelOnlyReceiveFlags) != 0) {
    ssize_t n = sys::real().recvmsg(fd, &msg, flags);
    return n < 0 ? R::fail(errno) : R::ok(static_cast<size_t>(n));
  }
  if (int error = take_pending_error()) return R::fail(error);
  const bool nonblocking = (flags & MSG_DONTWAIT) || [&] {
    std::lock_guard<std::mutex> held(mu_);
    return blocking_.nonblocking(fd);
  }();
  int64_t deadline_ms = -2;  // read once, when a wait begins
  const int kernel_flags = (flags & ~MSG_WAITALL) | MSG_DONTWAIT;
  for (bool first = true;; first = false) {
    DatagramHub* hub = DatagramHub::running();
    if (hub != nullptr && queued_.load(std::memory_order_relaxed) == 0) hub->progress();
    bool skip_kernel = false;
    {
      std::lock_guard<std::mutex> held(mu_);
      // The two queues take turns (kernel_turns.hpp).
      if (!queue_.empty() && !turns_.kernel_first()) return R::ok(take_queued(fd, msg, flags));
      // A blocking call with nothing queued on UD and a quiet kernel path
      // goes straight to its wait, which asks the kernel as it ends.
      skip_kernel = first && !nonblocking && queue_.empty() && hub_ != nullptr && !turns_.kernel_active();
    }
    if (skip_kernel) {
      deadline_ms = blocking_deadline(fd);
      core::Result<bool> waited = wait_readable(fd, deadline_ms);
      if (!waited) return R::fail(waited.error());
      continue;
    }
    // msg_controllen is the caller's room; the kernel's call may shrink it.
    const size_t control_room = msg.msg_controllen;
    ssize_t n = sys::real().recvmsg(fd, &msg, kernel_flags);
    if (n >= 0) {
      std::lock_guard<std::mutex> held(mu_);
      if (!(flags & MSG_PEEK)) turns_.took_from_kernel();
      count_kernel_receive(n);
      return R::ok(static_cast<size_t>(n));
    }
    if (errno != EAGAIN) return R::fail(errno);
    msg.msg_controllen = control_room;
    {
      std::lock_guard<std::mutex> held(mu_);
      if (!queue_.empty()) return R::ok(take_queued(fd, msg, flags));
    }
    if (nonblocking) {
      activity_.fetch_add(1, std::memory_order_acq_rel);  // found nothing: the next datagram is an edge
      return R::fail(EAGAIN);
    }
    if (deadline_ms == -2) deadline_ms = blocking_deadline(fd);
    core::Result<bool> waited = wait_readable(fd, deadline_ms);
    if (!waited) return R::fail(waited.error());
  }
}

// ----------------------------------------------------------------- other --

DatagramSocket::Snapshot DatagramSocket::snapshot() {
  std::lock_guard<std::mutex> held(mu_);
  Snapshot s;
  s.on_ud = hub_ != nullptr;
  s.left_ud = leaving_;
  s.ud_bytes_sent = ud_bytes_sent_.load(std::memory_order_relaxed);
  s.ud_bytes_received = ud_bytes_received_;
  s.queued = queue_.count();
  return s;
}

core::Result<bool> DatagramSocket::shutdown(int fd, int how) {
  using R = core::Result<bool>;
  if (sys::real().shutdown(fd, how) != 0) return R::fail(errno);
  return R::ok(true);
}

core::Result<int> DatagramSocket::readable_bytes(int fd) {
  using R = core::Result<int>;
  if (DatagramHub* hub = DatagramHub::running()) hub->progress();
  // The size of the datagram the next receive takes: the kernel's when
  // the receive would ask the kernel first (KernelTurns) and it holds one.
  bool ud_queued = false, kernel_first = true;
  size_t ud_next = 0;
  {
    std::lock_guard<std::mutex> held(mu_);
    ud_queued = !queue_.empty();
    if (ud_queued) {
      ud_next = queue_.next_length();
      kernel_first = turns_.kernel_first();
    }
  }
  if (ud_queued && !kernel_first) return R::ok(static_cast<int>(ud_next));
  int bytes = 0;
  if (sys::real().ioctl(fd, FIONREAD, &bytes) != 0) return ud_queued ? R::ok(static_cast<int>(ud_next)) : R::fail(errno);
  // 0: the kernel holds nothing (or an empty datagram, which reads the same).
  if (ud_queued && bytes == 0) return R::ok(static_cast<int>(ud_next));
  return R::ok(bytes);
}

bool DatagramSocket::take_so_error(int, int* error) {
  int pending = take_pending_error();
  if (pending == 0) return false;  // the kernel's own, if any
  *error = pending;
  return true;
}

bool DatagramSocket::asks_kernel(short events, Look look, bool ud_readable) {
  // Writability, urgent data...: only the kernel socket knows.
  if (events & ~(POLLIN | POLLRDNORM)) return true;
  // Readable already: the receive gives the kernel its turn.
  if (ud_readable) return false;
  if (look == Look::kFull) return true;
  if (look == Look::kSpin) return false;
  std::lock_guard<std::mutex> held(mu_);
  return turns_.kernel_active();
}

short DatagramSocket::poll_events(int fd, short events, Look look) {
  if (DatagramHub* hub = DatagramHub::running()) {
    // This thread's sleep (wake_fds) is over: it no longer counts.
    if (t_sleeping_on == hub) {
      hub->sleeper_out();
      t_sleeping_on = nullptr;
    }
    // What a sleeper woke for (no system call if nothing armed).
    if (hub->endpoint().drain_events() > 0) hub->after_event_taken();
    hub->progress();
    wake_.consume();
  }
  const bool ud_readable = (events & POLLIN) && queued_.load(std::memory_order_acquire) > 0;
  short revents = 0;
  if (asks_kernel(events, look, ud_readable)) {
    pollfd kernel{fd, events, 0};
    const timespec now{0, 0};
    revents = sys::real().ppoll(&kernel, 1, &now, nullptr) > 0 ? kernel.revents : 0;
    if ((events & POLLIN) && (revents & POLLIN))
      note_kernel_queue(fd);
    else if (events & POLLIN)
      kernel_queue_bytes_.store(0, std::memory_order_release);  // drained: the next one is new
  }
  if (ud_readable) revents |= (events & (POLLIN | POLLRDNORM));
  if (pending_error_.load(std::memory_order_acquire) != 0) revents |= POLLERR;
  return revents;
}

void DatagramSocket::note_kernel_queue(int fd) {
  // Edge-triggered epoll reports each datagram the kernel queues, even on a
  // socket already readable: the kernel's receive memory grows with each.
  uint32_t meminfo[SK_MEMINFO_VARS] = {};
  socklen_t length = sizeof meminfo;
  if (sys::real().getsockopt(fd, SOL_SOCKET, SO_MEMINFO, meminfo, &length) != 0) return;
  uint32_t queued = meminfo[SK_MEMINFO_RMEM_ALLOC];
  uint32_t before = kernel_queue_bytes_.exchange(queued, std::memory_order_acq_rel);
  if (queued > before) activity_.fetch_add(1, std::memory_order_acq_rel);
}

int DatagramSocket::wake_fds(int fd, short events, pollfd* out, int* slice_ms) {
  int count = 0;
  out[count++] = pollfd{fd, events, 0};
  DatagramHub* hub = DatagramHub::running();
  if (hub != nullptr && (events & POLLIN)) {
    // The completion fd is shared by every datagram socket: its event may
    // be taken by another waiter, which then wakes this one through its
    // own fd (sleeper_wake.hpp); without one, it looks again now and then.
    const int wake_fd = wake_.prepare();
    if (t_sleeping_on != hub) {  // (another hub: the parent's, in a fork child)
      hub->sleeper_in();
      t_sleeping_on = hub;
    }
    hub->endpoint().arm();
    // What came before the arm raises no event: look once more.
    hub->progress();
    out[count++] = pollfd{hub->endpoint().completion_fd(), POLLIN, 0};
    if (wake_fd >= 0) out[count++] = pollfd{wake_fd, POLLIN, 0};
    const bool queued = queued_.load(std::memory_order_acquire) > 0;
    *slice_ms = queued ? 0 : wake_fd >= 0 ? -1 : kSleepSliceMs;
  }
  return count;
}

}  // namespace vsock::sock::dgram
