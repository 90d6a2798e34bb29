// DatagramSocket: one UDP socket whose datagrams may go over the process's
// UD queue pair (DESIGN decision 5), behind the ManagedSocket interface.
// The kernel socket stays the socket's identity and its second path: every
// datagram that cannot go over UD goes through it, and a receive takes
// from both it and the socket's UD queue, neither starving the other.
//
// A datagram goes over UD when its destination is a resolved path (a
// libvsock socket answered there), it is no larger than UDP allows (one
// message, or fragments the receiving hub reassembles), and it asks for
// nothing UD cannot give (control data, MSG_MORE, MSG_OOB, ...); else it
// goes through the kernel, and an unknown destination is resolved
// meanwhile (off this thread). A socket can
// receive over UD once it is attached to the hub: when it is bound to an
// explicit port (it then answers resolutions there), or when it first sent
// over UD (replies come back the same way).
//
// Leaving UD (fork, a socket passed to another process, an option UD
// cannot honour on received datagrams): the socket detaches, so peers
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

#include "sock/blocking_mode.hpp"
#include "sock/dgram/path_cache.hpp"
#include "sock/dgram/receive_queue.hpp"
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
  // An option that UD cannot honour on what it receives (IP_PKTINFO,
  // SO_TIMESTAMP, ...), or the socket goes to another process: leave UD.
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
  void deliver(const sockaddr_storage& source, socklen_t source_length, const uint8_t* payload, size_t length);

  // --- ManagedSocket ---
  bool kernel_only() const override { return kernel_only_.load(std::memory_order_acquire); }
  core::Result<size_t> send_message(int fd, const msghdr& msg, int flags) override;
  core::Result<size_t> receive_message(int fd, msghdr& msg, int flags) override;
  core::Result<bool> shutdown(int fd, int how) override;
  core::Result<int> readable_bytes(int fd) override;
  bool take_so_error(int fd, int* error) override;
  short poll_events(int fd, short events) override;
  int wake_fds(int fd, short events, pollfd* out, int* slice_ms) override;
  uint64_t activity() override { return activity_.load(std::memory_order_acquire); }
  void file_flags_changed() override { blocking_.file_flags_changed(); }
  void timeouts_changed() override { blocking_.timeouts_changed(); }

 private:
  ~DatagramSocket() = default;
  // Sends over UD if the destination has a path and the datagram fits;
  // true if it went. Starts a resolution for an unknown destination.
  bool send_over_ud(int fd, const msghdr& msg, int flags, const sockaddr* to, socklen_t to_length);
  // The socket's own port (host order), asked of the kernel once it has one.
  uint16_t local_port(int fd);
  // Binds a socket that has no port yet as the kernel does on a first send.
  bool bind_as_first_send(int fd);
  // Takes the front of the UD queue into msg; under mu_.
  size_t take_queued(msghdr& msg, int flags);
  // Waits until either path may have a datagram, or the deadline; EAGAIN
  // on timeout, EINTR as the kernel's call would.
  core::Result<bool> wait_readable(int fd, int64_t deadline_ms);
  // Attaches to the hub (made if need be): UD datagrams can reach it.
  void attach_locked(int fd);
  void detach();
  void count_kernel_receive(ssize_t n);
  // poll_events() found the kernel socket readable: a grown receive queue
  // is a new datagram (activity).
  void note_kernel_queue(int fd);

  std::atomic<uint32_t> refs_{1};
  std::atomic<bool> kernel_only_{false};
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
  uint64_t ud_bytes_sent_ = 0;
  uint64_t ud_bytes_received_ = 0;
  bool prefer_kernel_ = false;  // the last receive came from the UD queue
  ReceiveQueue queue_;
};

}  // namespace vsock::sock::dgram
