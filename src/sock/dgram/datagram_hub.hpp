// DatagramHub: the process's UDP-over-UD machinery in one place (DESIGN
// decision 5): the UD endpoint, the path cache, and the table of datagram
// sockets that can receive over UD (by cookie). Made at the first datagram
// socket that needs it (bind to an explicit port, or a send to a resolved
// destination), never destroyed (sockets closed by static destructors at
// exit may still reach it); a fork() child makes its own.
//
// progress() is how datagrams arrive: any thread in a call on a datagram
// socket (recv, poll, epoll) polls the endpoint, and each message goes to
// its socket's queue (DATA), forgets a path (REVOKE, UNREACH: a connected
// socket then sees ECONNREFUSED), or — for a cookie no socket here has — is
// answered with an UNREACH so that its sender goes back to the kernel. A
// datagram from a peer teaches the path back to it, and so does an
// ANNOUNCE (which delivers nothing): a socket that sent through the kernel
// while its destination was being resolved is announced there once the
// resolution succeeds (owed_announcements.hpp). A socket that leaves
// tells the peers it knows (REVOKE).
//
// Locking: endpoint → sockets table → a socket's queue, never the other
// way round; a socket calls progress() and send() without its own lock.
#pragma once
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <vector>

#include "rdma/device.hpp"
#include "sock/dgram/owed_announcements.hpp"
#include "sock/dgram/path_cache.hpp"
#include "sock/dgram/reassembler.hpp"
#include "sock/dgram/ud_endpoint.hpp"
#include "sock/upgrade/datagram_resolution.hpp"

namespace vsock::sock {
class UpgradeEngine;
}

namespace vsock::sock::dgram {

class DatagramSocket;

class DatagramHub {
 public:
  // What partial datagrams may hold, process-wide: bytes, datagrams in
  // progress, and how long a missing fragment is waited for.
  static constexpr size_t kReassemblyBytes = 4 << 20;
  static constexpr size_t kReassemblyDatagrams = 256;
  static constexpr uint64_t kReassemblyMs = 1000;

  // The process's hub, made on first call; null when there is no device,
  // no side band, or the endpoint could not be made (sockets stay on the
  // kernel).
  static DatagramHub* get();
  // The hub if this process has made one (never makes it).
  static DatagramHub* running();

  UdEndpoint& endpoint() { return *endpoint_; }
  PathCache& paths() { return paths_; }
  UpgradeEngine& engine() { return *engine_; }
  // A fresh cookie for a socket (never 0, unique in the process).
  uint64_t new_cookie();

  // `socket` may receive over UD from now on (retained) / no longer.
  void attach(uint64_t cookie, DatagramSocket* socket);
  // `still_open`: the socket left UD but its kernel socket lives on (an
  // option, a fork, SCM_RIGHTS): a datagram that still names it is answered
  // with REVOKE (go back to the kernel, which still delivers to it), not
  // with UNREACH (nobody is there).
  void detach(uint64_t cookie, bool still_open);
  // The socket that left UD with `still_open` is closed now.
  void forget_departed(uint64_t cookie);
  // The socket (`cookie`, bound to `port`) is gone: tells each of `peers`
  // that has a path here to forget it (REVOKE), so their next datagrams go
  // through the kernel. Not from inside progress().
  void revoke_peers(uint64_t cookie, uint16_t port, const std::vector<PathKey>& peers);

  // Waits, at most `timeout_ms`, until what was sent over UD has left the
  // queue pair (UdEndpoint::finish_sends, the fence an empty REVOKE to this
  // process's own queue pair under a cookie no socket has, ignored on
  // arrival). False on timeout.
  bool finish_sends(int timeout_ms);

  // Takes what arrived (up to a batch) and delivers it. Returns how many
  // messages were taken.
  int progress();

  // The threads asleep on the endpoint's completion channel (a blocking
  // receive, a poll or epoll sleep). Its one event is taken by one of
  // them, which may not be the one the arrival is for: the taker, when
  // others sleep, arms the CQ again and takes what came, so each socket's
  // sleeper is woken through its SleeperWake and the next arrival raises
  // an event again (sleeper_wake.hpp).
  void sleeper_in() { sleepers_.fetch_add(1, std::memory_order_seq_cst); }
  void sleeper_out() { sleepers_.fetch_sub(1, std::memory_order_seq_cst); }
  // After taking the channel's event (the caller no longer counted).
  void after_event_taken();

  // A multicast datagram from another process (`source`, whose key is
  // `key`) teaches the way back to its sender's socket, as a unicast one
  // does, so the receivers' unicast answers go over UD without a
  // resolution. `local`: this host's IPv4 address on the device (network
  // order), which the address handle is made from (a group is no source
  // for an answer). Inside progress().
  void learn_from_multicast(const UdArrival& arrival, const PathKey& key, const sockaddr* source, uint32_t local);

  // The socket `cookie` (attached, bound to `port`) sent a datagram to
  // `destination` through the kernel because the destination's resolution
  // was under way: once it succeeds, the socket is announced there
  // (ANNOUNCE), so that the peer learns the path back even if the socket
  // never sends to it again. If the path is known by now, it is announced
  // at once; if the destination failed, nothing happens. Not from inside
  // progress().
  void owe_announcement(const PathKey& destination, uint16_t port, uint64_t cookie);

  // Resolution outcomes (the engine's thread, through DatagramPathSink).
  // Both settle the announcements owed to the destination.
  void on_resolved(const ResolvedPath& path);
  void on_resolution_failed(const sockaddr* destination, socklen_t length, const char* why);
  // Holds key on the kernel (PathCache::failed), counts and logs it; also
  // for a resolution the side band could not start.
  void note_resolution_failed(const PathKey& key, const char* why);

  // The attached socket with `cookie`, retained; null if none.
  DatagramSocket* find_socket(uint64_t cookie);

 private:
  DatagramHub() = default;
  static void on_arrival(void* context, const UdArrival& arrival);
  void arrival(const UdArrival& arrival);
  // A fragment: the whole datagram into *whole once complete (true).
  bool reassemble(const UdArrival& arrival, const PathKey& from, std::vector<uint8_t>* whole);
  uint64_t reassembly_drops() const;
  // Queues an UNREACH (or, for a socket that left UD but lives, a REVOKE)
  // for the arrival's sender; progress() sends it.
  void answer_unknown_cookie(const UdArrival& arrival);
  // The attached socket other than `except` that the kernel would give a
  // datagram from `from` to `port` (one connected to `from`, else an
  // unconnected one), retained; null if none. A scan: only for datagrams
  // that named a socket connected elsewhere.
  DatagramSocket* socket_for(uint16_t port, const PathKey& from, uint64_t except);
  // The path back to the arrival's sender (`source`, whose key is `key`),
  // learnt if new and the rules let datagrams to it go over UD; false if
  // there is none.
  // `multicast_local` (network order, 0 for a unicast arrival): the
  // arrival was sent to a group; its address handle, if one must be made,
  // is made as if it had been sent to this host's address
  // (rdma::grh_with_destination).
  bool learn_path(const PathKey& key, const sockaddr* source, const UdArrival& arrival, UdPath* path,
                  uint32_t multicast_local = 0);
  // The resolution of `destination` ended: the announcements owed to it
  // are sent if it has a path now (resolved, or learnt from an arrival
  // meanwhile), and forgotten either way.
  void announce_owed(const PathKey& destination);
  // One ANNOUNCE from `from` to the socket at the end of `path` (port
  // `destination_port`), if `from` is still attached here.
  void send_announcement(const UdPath& path, uint16_t destination_port, const OwedSocket& from);

  const rdma::Device* device_ = nullptr;
  UpgradeEngine* engine_ = nullptr;
  std::unique_ptr<UdEndpoint> endpoint_;
  PathCache paths_;
  // Fragments of datagrams larger than one message (under the endpoint's
  // lock: arrivals are handled inside its poll).
  Reassembler reassembler_{ReassemblyLimits{kReassemblyBytes, kReassemblyDatagrams, kReassemblyMs}};
  struct PendingControl {
    ibv_ah* ah;
    uint32_t qpn;
    wire::DatagramHeader header;
  };
  // At most this many wait to be sent (more unknown-cookie arrivals in one
  // poll get no answer: their senders hear at their next datagram).
  static constexpr size_t kMaxPendingControls = 64;
  std::mutex controls_mu_;
  std::vector<PendingControl> controls_;
  // controls_ is not empty: progress() takes controls_mu_ only then.
  std::atomic<bool> controls_pending_{false};
  // Announcements owed (owe_announcement). owed_mu_ is held across the
  // path cache's look and the record, and a resolution's end changes the
  // path before it takes the record: so a socket is either taken with the
  // record or sees the outcome itself, never left behind. Never held
  // while sending.
  std::mutex owed_mu_;
  OwedAnnouncements owed_;
  std::mutex sockets_mu_;
  std::map<uint64_t, DatagramSocket*> sockets_;
  // Cookies of sockets that left UD and are still open (bounded: past it,
  // the oldest are answered with UNREACH, as if closed).
  static constexpr size_t kMaxDeparted = 4096;
  std::set<uint64_t> departed_;
  std::atomic<uint64_t> next_cookie_{0};
  std::atomic<int> sleepers_{0};
  // finish_sends()'s fence: its cookie and the address handle to this host.
  std::atomic<uint64_t> fence_cookie_{0};
  std::unique_ptr<rdma::AddressHandle> self_handle_;
};

}  // namespace vsock::sock::dgram
