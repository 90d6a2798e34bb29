// DatagramHub: the process's UDP-over-UD machinery in one place (DESIGN
// decision 5): the UD endpoint, the path cache, and the table of datagram
// sockets that can receive over UD (by cookie). Made at the first datagram
// socket that needs it (bind to an explicit port, or a send to a resolved
// destination), never destroyed (sockets closed by static destructors at
// exit may still reach it); a fork() child makes its own.
//
// progress() is how datagrams arrive: any thread in a call on a datagram
// socket (recv, poll, epoll) polls the endpoint, and each message goes to
// its socket's queue (DATA), forgets a path (REVOKE), or — for a cookie no
// socket here has — is answered with a REVOKE so that its sender goes back
// to the kernel. A datagram from a peer teaches the path back to it.
//
// Locking: endpoint → sockets table → a socket's queue, never the other
// way round; a socket calls progress() and send() without its own lock.
#pragma once
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "rdma/device.hpp"
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
  void detach(uint64_t cookie);

  // Takes what arrived (up to a batch) and delivers it. Returns how many
  // messages were taken.
  int progress();

  // Resolution outcomes (the engine's thread, through DatagramPathSink).
  void on_resolved(const ResolvedPath& path);
  void on_resolution_failed(const sockaddr* destination, socklen_t length);

 private:
  DatagramHub() = default;
  static void on_arrival(void* context, const UdArrival& arrival);
  void arrival(const UdArrival& arrival);
  // A fragment: the whole datagram into *whole once complete (true).
  bool reassemble(const UdArrival& arrival, const PathKey& from, std::vector<uint8_t>* whole);
  uint64_t reassembly_drops() const;
  // Queues a REVOKE for the arrival's sender; progress() sends it.
  void send_revoke(const UdArrival& arrival);
  // The path back to the arrival's sender, learnt if new; null if none.
  bool learn_path(const PathKey& key, const UdArrival& arrival, UdPath* path);

  const rdma::Device* device_ = nullptr;
  UpgradeEngine* engine_ = nullptr;
  std::unique_ptr<UdEndpoint> endpoint_;
  PathCache paths_;
  // Fragments of datagrams larger than one message (under the endpoint's
  // lock: arrivals are handled inside its poll).
  Reassembler reassembler_{ReassemblyLimits{kReassemblyBytes, kReassemblyDatagrams, kReassemblyMs}};
  struct PendingRevoke {
    ibv_ah* ah;
    uint32_t qpn;
    wire::DatagramHeader header;
  };
  // At most this many wait to be sent (more unknown-cookie arrivals in one
  // poll get no answer: their senders hear at their next datagram).
  static constexpr size_t kMaxPendingRevokes = 64;
  std::mutex revokes_mu_;
  std::vector<PendingRevoke> revokes_;
  std::mutex sockets_mu_;
  std::map<uint64_t, DatagramSocket*> sockets_;
  std::atomic<uint64_t> next_cookie_{0};
};

}  // namespace vsock::sock::dgram
