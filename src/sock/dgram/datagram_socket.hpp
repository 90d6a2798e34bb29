// DatagramSocket: one UDP socket whose datagrams may go over the process's
// UD queue pair (DESIGN decision 5), behind the ManagedSocket interface.
// The kernel socket stays the socket's identity and its second path: every
// datagram that cannot go over UD goes through it, and a receive takes
// from both it and the socket's UD queue, neither starving the other.
//
// A datagram goes over UD when its destination is a resolved path (a
// libvsock socket answered there), it is no larger than UDP allows (one
// message, or fragments the receiving hub reassembles), and it asks for
// nothing UD cannot give (control data, MSG_MORE, MSG_OOB, a TOS or TTL of
// its own, ...); else it goes through the kernel, and an unknown
// destination is resolved meanwhile (off this thread). A datagram taken
// from the UD queue carries the control messages the socket asked for
// (IP_PKTINFO, SO_TIMESTAMP, IP_RECVTTL, ...: receive_controls.hpp), as
// one from the kernel does. A socket can
// receive over UD once it is attached to the hub: when it is bound to an
// explicit port (it then answers resolutions there), when it first sent
// over UD (replies come back the same way), or when it sent through the
// kernel while its destination was being resolved (it is announced there
// once resolved: ANNOUNCE, so replies come over UD even if it never sends
// again).
//
// Leaving UD (fork, a socket passed to another process, an option UD
// cannot honour at all): the socket detaches, so peers
// that still send to it are told to go back to the kernel (REVOKE); what
// its UD queue holds is still delivered, then every call is the kernel's
// (kernel_only()). A fork() child forgets the queue (the parent delivers
// it): no datagram is delivered twice.
//
// Threads: mu_ guards the state and the queue; it is never held across a
// system call that can block, nor while the hub's endpoint is polled.
// Lifetime: counted (retain/release): the SocketState holds one reference,
// the hub one while attached.
#pragma once
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "sock/blocking_mode.hpp"
#include "sock/dgram/kernel_turns.hpp"
#include "sock/dgram/path_cache.hpp"
#include "sock/dgram/receive_controls.hpp"
#include "sock/dgram/receive_queue.hpp"
#include "sock/dgram/sleeper_wake.hpp"
#include "sock/dgram/ud_endpoint.hpp"
#include "sock/managed_socket.hpp"

namespace vsock::sock::dgram {

class DatagramHub;

class DatagramSocket final : public ManagedSocket {
 public:
  explicit DatagramSocket(int domain);
  DatagramSocket(const DatagramSocket&) = delete;
  DatagramSocket& operator=(const DatagramSocket&) = delete;

  void retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release();

  // --- the entry points' hooks ---
  // bind() succeeded and the socket is at `local` (getsockname): it becomes
  // reachable over UD.
  void on_bound(int fd, const sockaddr* local, socklen_t length);
  // connect() succeeded: datagrams go to (and only come from) `peer`;
  // AF_UNSPEC dissolves the association.
  void on_connected(int fd, const sockaddr* peer, socklen_t length);
  // An option that asks for control messages on receive was set: read
  // again which ones the kernel socket has on (UD datagrams get the same).
  void receive_options_changed(int fd);
  // SO_TIMESTAMP(NS) is on: arrivals for it read the clock.
  bool wants_timestamps() const { return wants_timestamps_.load(std::memory_order_relaxed); }
  // An option that shapes what is sent (IP_TOS, IP_TTL, ...) was set: the
  // UD path's address handles cannot carry it, so the socket's datagrams
  // go through the kernel from now on (it still receives over UD).
  void send_through_kernel() { send_through_kernel_.store(true, std::memory_order_release); }
  // setsockopt(UDP_SEGMENT) went through: read the size the kernel keeps.
  void segment_size_changed(int fd);
  // setsockopt(SO_RCVBUF or SO_RCVBUFFORCE) went through: the UD queue's
  // budget becomes the size the kernel keeps (what is queued stays).
  void receive_buffer_changed(int fd);
  // An option that UD cannot honour at all (a filter, SO_REUSEPORT, ...),
  // or the socket goes to another process: leave UD.
  void leave_ud();
  // In a fork() child: the parent keeps the UD side; this copy is the
  // kernel's from now on, with nothing queued.
  void abandon_in_child();
  // The last fd was closed.
  void on_last_close();

  // What vsock-stat shows of the socket (socket_report.cpp).
  struct Snapshot {
    bool on_ud = false;   // attached: datagrams can come over UD
    bool left_ud = false; // it left UD (fork, SCM_RIGHTS, an option)
    uint64_t ud_bytes_sent = 0;
    uint64_t ud_bytes_received = 0;
    uint64_t queued = 0;  // datagrams waiting in the UD queue
  };
  Snapshot snapshot();

  // --- the hub's delivery (DatagramHub::progress) ---
  uint64_t cookie() const { return cookie_; }
  // An UNREACH from `from`: the socket we sent to there is gone. A socket
  // connected to `from` gets ECONNREFUSED, as after an ICMP port
  // unreachable (once: the next call, SO_ERROR, POLLERR).
  void on_unreachable(const PathKey& from);
  // False when the socket is connected to another peer than the source
  // (the kernel would have given the datagram to another socket on the
  // port, if any: the hub looks for it).
  // `from` is the source's key (the hub has it already).
  bool deliver(const sockaddr_storage& source, socklen_t source_length, const PathKey& from, const uint8_t* payload,
               size_t length, const ArrivalFacts& arrival);
  // How well a datagram from `from` to `port` fits this socket, as the
  // kernel's socket lookup ranks it: 2 connected to `from`, 1 unconnected,
  // 0 not at all (another port, another peer, leaving).
  int match(uint16_t port, const PathKey& from);

  // --- ManagedSocket ---
  bool kernel_only() const override { return kernel_only_.load(std::memory_order_acquire); }
  core::Result<size_t> send_message(int fd, const msghdr& msg, int flags) override;
  core::Result<unsigned> send_messages(int fd, mmsghdr* msgs, unsigned count, int flags) override;
  core::Result<size_t> receive_message(int fd, msghdr& msg, int flags) override;
  core::Result<bool> shutdown(int fd, int how) override;
  core::Result<int> readable_bytes(int fd) override;
  bool take_so_error(int fd, int* error) override;
  short poll_events(int fd, short events, Look look) override;
  int wake_fds(int fd, short events, pollfd* out, int* slice_ms) override;
  uint64_t activity(int /*fd*/) override { return activity_.load(std::memory_order_acquire); }
  void file_flags_changed() override { blocking_.file_flags_changed(); }
  void timeouts_changed() override { blocking_.timeouts_changed(); }
  // Once it is on its SocketState: what the library knows of the blocking
  // mode stands in for asking the kernel (BlockingMode::assume).
  void assume_known_mode(const std::atomic<uint8_t>& known_mode) {
    std::lock_guard<std::mutex> held(mu_);
    blocking_.assume(known_mode);
  }

 private:
  ~DatagramSocket() = default;
  // The most datagrams of one sendmmsg() prepared for one chain.
  static constexpr size_t kSendRun = 64;
  // UDP_SEGMENT over UD: the kernel's limits (UDP_MAX_SEGMENTS, the UDP
  // payload), and segments no larger than any Ethernet path takes (the
  // kernel refuses a segment above the route's MTU; larger ones are left
  // to it).
  static constexpr size_t kMaxSegments = 64;
  static constexpr size_t kMaxUdpPayload = 65507;
  static constexpr uint16_t kMaxUdSegment = 1472;
  // How one sendmsg() goes over UD: the whole message (a datagram id per
  // segment taken from whole.header.datagram_id on), cut in `segments`
  // datagrams of segment_size bytes (UDP_SEGMENT) when there are several.
  // When it may not go over UD only because the destination's resolution
  // is under way (started by this datagram or before), `resolving` is
  // set, with the destination's key and the hub: once the kernel has sent
  // it, the socket owes that destination an announcement.
  struct UdRoute {
    UdOutgoing whole;
    size_t segments = 1;
    uint16_t segment_size = 0;
    DatagramHub* hub = nullptr;
    bool resolving = false;
    PathKey destination;
  };
  // Whether `msg` may go over UD now (its destination, or the connected
  // peer, has a path; nothing in it needs the kernel): then *route says
  // how. Starts a resolution for an unknown destination.
  bool route_over_ud(int fd, const msghdr& msg, int flags, UdRoute* route);
  // A datagram to route.destination went through the kernel while the
  // destination was being resolved: the socket attaches to the hub (the
  // peer's answers may come over UD) and is recorded there, to be
  // announced once the resolution succeeds (DatagramHub::owe_announcement).
  void owe_announcement(int fd, const UdRoute& route);
  // Sends msg over UD when it goes to an IPv4 group in udp_mcast_offload
  // and nothing in it needs the kernel; true if it went
  // (datagram_socket_multicast.cpp, multicast_offload.hpp).
  bool send_multicast_over_ud(int fd, const msghdr& msg, int flags);
  // Posts a segmented message's datagrams as one chain; false (nothing
  // sent) when they do not all fit now.
  bool send_segments(const UdRoute& route);
  // The UDP_SEGMENT size that applies to msg (its control message, else
  // the socket's option; 0: none); false when msg carries any other control
  // message (the kernel's to send).
  bool segment_size_for(const msghdr& msg, uint16_t* size) const;
  // How many datagrams a message of `length` bytes is cut into: 1 without
  // segmentation, 0 when the kernel must decide (a segment above
  // kMaxUdSegment, more than kMaxSegments, above 65,507 bytes).
  static size_t segment_count(size_t length, uint16_t segment_size);
  void count_ud_sent(uint64_t datagrams, uint64_t bytes);
  // Remembers a peer that has a path to this socket (it sent to us over
  // UD) or that we send to over UD, to tell it when we leave; under mu_.
  void note_peer_locked(const PathKey& peer);
  int take_pending_error() {
    return pending_error_.load(std::memory_order_relaxed) == 0 ? 0 : pending_error_.exchange(0);
  }
  // The socket's own port (host order), asked of the kernel once it has one.
  uint16_t local_port(int fd);
  // Takes the front of the UD queue into msg, with the control messages
  // the socket asked for; under mu_.
  size_t take_queued(int fd, msghdr& msg, int flags);
  // Binds a socket that has no port yet as the kernel does on a first send.
  bool bind_as_first_send(int fd);
  // Waits until either path may have a datagram, or the deadline; EAGAIN
  // on timeout, EINTR as the kernel's call would.
  core::Result<bool> wait_readable(int fd, int64_t deadline_ms);
  // The receive timeout's deadline (SO_RCVTIMEO), from now; -1: none.
  int64_t blocking_deadline(int fd);
  // Attaches to the hub (made if need be): UD datagrams can reach it.
  void attach_locked(int fd);
  // The UD queue's budget := the kernel socket's SO_RCVBUF.
  void read_budget_locked(int fd);
  // Leaves the hub; `closing`: the socket is closed (else it lives on,
  // on the kernel alone).
  void detach(bool closing);
  void count_kernel_receive(ssize_t n);
  // The kernel socket's drop count (SO_RXQ_OVFL counts both paths').
  static uint32_t kernel_drops(int fd);
  // poll_events() found the kernel socket readable: a grown receive queue
  // is a new datagram (activity).
  void note_kernel_queue(int fd);
  // Whether a look of a wait for `events` (UD readable or not) asks the
  // kernel socket (KernelTurns says when it may be left out).
  bool asks_kernel(short events, Look look, bool ud_readable);

  std::atomic<uint32_t> refs_{1};
  std::atomic<bool> kernel_only_{false};
  std::atomic<bool> send_through_kernel_{false};
  std::atomic<uint16_t> segment_size_{0};  // the socket's UDP_SEGMENT option
  std::atomic<bool> wants_timestamps_{false};
  std::atomic<uint64_t> activity_{0};
  // Datagrams waiting in the UD queue (read without the lock by waits).
  std::atomic<size_t> queued_{0};
  std::atomic<uint32_t> kernel_queue_bytes_{0};  // the kernel's receive memory, last seen
  const int domain_;
  const uint64_t cookie_;
  BlockingMode blocking_;
  std::mutex mu_;
  DatagramHub* hub_ = nullptr;  // attached to it (receives over UD)
  bool leaving_ = false;
  bool listening_ = false;      // answers resolutions on its bound port
  uint16_t port_ = 0;           // host order; 0: not known yet
  bool connected_ = false;
  PathKey peer_key_;
  sockaddr_storage peer_{};
  socklen_t peer_length_ = 0;
  uint32_t next_datagram_id_ = 1;
  std::atomic<uint64_t> ud_bytes_sent_{0};  // counted without the lock (every send)
  uint64_t ud_bytes_received_ = 0;
  KernelTurns turns_;  // when the kernel socket is asked besides the UD queue
  ReceiveOptions receive_options_;
  // The peers told when the socket leaves UD (REVOKE), at most kMaxPeers:
  // those beyond learn it from an UNREACH at their next datagram.
  static constexpr size_t kMaxPeers = 32;
  std::vector<PathKey> peers_;
  std::atomic<int> pending_error_{0};  // ECONNREFUSED after an UNREACH
  // Wakes this socket's sleepers when the hub queues for it (a datagram,
  // an error, a change of route), whichever thread took the arrival.
  SleeperWake wake_;
  ReceiveQueue queue_;
};

}  // namespace vsock::sock::dgram
