// MulticastOffload: IPv4 multicast over UD for the groups the
// `udp_mcast_offload` setting names (DESIGN decision 5, issue 11 item 8,
// docs/protocol.md §6.2). One per process, beside the datagram hub.
//
// Joining: the kernel join always happens first (the entry point called
// the real setsockopt()). For an offloaded group the process also joins
// with rdma_cm (CmMulticast) — once, however many of its sockets join —
// and attaches its UD queue pair; the last socket's leave (or close)
// detaches and leaves. The join waits for rdma_cm on the caller's thread,
// at most `upgrade_timeout_ms`; a join that fails leaves the group on the
// kernel for `peer_fail_cache_s`.
//
// Sending: a datagram to an offloaded group goes over UD only, with the
// group's address handle (hop limit = the socket's IP_MULTICAST_TTL), the
// multicast flag, destination cookie 0, and the no-loop flag when the
// socket's IP_MULTICAST_LOOP is off. A process that is no member of the
// group makes a send-only join at its first send (a full join if the
// device refuses send-only). TTL 0 posts nothing (as Linux: the datagram
// never leaves the host). With loop on, the sockets of this process that
// would receive it get it at once, in software: what the device loops
// back to our own queue pair (rxe does, through the IP stack, when the
// host is a member) is dropped on arrival, so delivery does not depend on
// whether it does.
//
// Receiving: a group datagram goes to this process's sockets as
// MulticastGroups::receivers() says (Linux's rules, IP_MULTICAST_ALL
// included); one from this host with the no-loop flag is dropped (Linux's
// IP_MULTICAST_LOOP off keeps a datagram from every socket of the host).
//
// Stays on the kernel: IPv6 groups, groups the setting does not name,
// sockets whose IP_MULTICAST_IF names an interface other than the RDMA
// device's, datagrams with control data or flags UD cannot honour.
//
// Locking: join_mu_ (joins and leaves, held across the rdma_cm wait) →
// mu_ (tables) → the hub's socket table → a socket's lock. mu_ is never
// held while the endpoint is called (arrivals come with its lock held).
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "rdma/address_handle.hpp"
#include "rdma/cm_multicast.hpp"
#include "sock/dgram/multicast_groups.hpp"
#include "sock/dgram/path_cache.hpp"
#include "sock/dgram/receive_controls.hpp"
#include "sock/dgram/ud_endpoint.hpp"
#include "sock/wire/datagram_header.hpp"

namespace vsock::sock::dgram {

class DatagramHub;

class MulticastOffload {
 public:
  // The process's, made on first call (null without a hub: no device).
  static MulticastOffload* get();
  // The process's if it made one (never makes it).
  static MulticastOffload* running();

  // Whether datagrams to `group` (IPv4, host order) may go over UD.
  static bool offloads(uint32_t group);

  // --- the setsockopt() hook (after the kernel accepted the option) ---
  // IP_ADD_MEMBERSHIP & co: `group`/`source` host order, source 0 = any.
  void join(uint64_t cookie, uint32_t group, uint32_t source);
  void leave(uint64_t cookie, uint32_t group, uint32_t source);
  void block(uint64_t cookie, uint32_t group, uint32_t source, bool blocked);
  void set_filter(uint64_t cookie, uint32_t group, bool include, const std::vector<uint32_t>& sources);
  void set_loop(uint64_t cookie, bool on);
  void set_ttl(uint64_t cookie, int ttl);
  void set_all(uint64_t cookie, bool on);
  // IP_MULTICAST_IF: the interface by index (0: by address), or address
  // (network order; both 0: the default route's).
  void set_interface(uint64_t cookie, int ifindex, in_addr address);
  // bind(): where the socket receives.
  void bound(uint64_t cookie, const sockaddr* local, socklen_t length);
  // The socket closed or left UD: its memberships end.
  void forget(uint64_t cookie);

  // Sends `header` (ports, cookies, datagram id filled) and `length`
  // payload bytes to `group` over UD; false if it did not (the kernel
  // sends it). `header` gets the multicast fields here.
  bool send(DatagramHub& hub, uint32_t group, wire::DatagramHeader header, const iovec* iov, int count,
            size_t length);
  // A DATA with the multicast flag, whole (reassembled), from `from`
  // (address and port; `key` its path key): delivers it.
  void arrival(DatagramHub& hub, const UdArrival& arrival, const PathKey& key, const sockaddr* from,
               const uint8_t* payload, size_t length);

 private:
  struct Group {
    bool member = false;       // a full rdma_cm join (and the QP attached)
    bool send_only = false;    // a send-only join (this process only sends)
    bool attached = false;
    int64_t failed_until_ms = 0;
    rdma::MulticastPath path;
    std::map<uint8_t, std::unique_ptr<rdma::AddressHandle>> handles;  // by hop limit; kept for life
  };
  struct SocketOptions {
    bool loop = true;
    uint8_t ttl = 1;
    bool on_device = true;  // IP_MULTICAST_IF is the default or the RDMA device's
  };

  explicit MulticastOffload(DatagramHub& hub, uint32_t device_address, int device_ifindex);
  // Under join_mu_: the rdma_cm join (full or send-only) of `group`.
  bool join_group(uint32_t group, bool send_only);
  void leave_group(uint32_t group);
  // Under mu_: the address handle for `group` at `hop_limit`.
  ibv_ah* handle_for(Group& group, uint8_t hop_limit);
  void deliver(DatagramHub& hub, uint32_t group, uint32_t source, uint16_t source_port, uint16_t port,
               const uint8_t* payload, size_t length, const ArrivalFacts& facts);

  DatagramHub& hub_;
  const uint32_t device_address_;  // host order
  const int device_ifindex_;       // 0: not known
  std::mutex join_mu_;
  std::unique_ptr<rdma::CmMulticast> cm_;  // made at the first join
  std::mutex mu_;
  MulticastGroups groups_;
  std::map<uint32_t, Group> state_;
  std::map<uint64_t, SocketOptions> options_;
};

}  // namespace vsock::sock::dgram
