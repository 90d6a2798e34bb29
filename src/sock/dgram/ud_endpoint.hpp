// UdEndpoint: the process's one UD queue pair on a device (DESIGN decision
// 5), with its registered buffers: what every datagram socket of the
// process sends and receives through. It knows messages (a DatagramHeader
// and its payload), not sockets: which socket a message is for is the
// demultiplexer's job, where to send one is the path cache's.
//
// Receive: a pool of `receive_depth` buffers, each the GRH slot (40 bytes)
// plus the path MTU, all posted at creation. poll() parses each arrival's
// GRH and header; a malformed one is dropped and counted (never read past
// its length), a good one is handed to the caller's handler, which must
// copy what it keeps: the buffer is posted again right after, in batches
// of `repost_batch` (one doorbell per batch).
//
// Send: `send_slots` registered slots of one MTU each, used in turn. The
// header and payload are copied into the next slot (inline when they fit
// the QP's inline size) and posted; every `signal_every`-th send asks for
// a completion, which frees every slot up to it (a UD QP completes its
// sends in order). With every slot in flight, send() reaps completions
// once and otherwise fails with EAGAIN: the caller sends that datagram
// through the kernel. Nothing above the MTU is ever posted (rxe drops it
// without a word): EMSGSIZE.
//
// Failure: a UD send that fails (its port went down, the device reset)
// takes the queue pair out of RTS, and from then on every datagram posted
// would be lost. The endpoint notices (a failed completion or post, or
// flushed receives), and its sends fail with ENETDOWN — the caller sends
// through the kernel — until it has restarted the queue pair (same number,
// so peers that know it reach it again) and posted its receives again: at
// the next send or poll, at most once per kRestartEveryMs.
//
// Threads: every call takes the endpoint's mutex (held for a post or one
// poll, never across a sleep). polls() and last_arm_ms() are read without
// it, by the receive progress thread (receive_progress.hpp).
#pragma once
#include <infiniband/verbs.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/result.hpp"
#include "rdma/completion_queue.hpp"
#include "rdma/device.hpp"
#include "rdma/grh.hpp"
#include "rdma/memory_region.hpp"
#include "rdma/protection_domain.hpp"
#include "rdma/status.hpp"
#include "rdma/ud_queue_pair.hpp"
#include "sock/wire/datagram_header.hpp"

namespace vsock::sock::dgram {

struct UdEndpointConfig {
  uint32_t receive_depth = 2048;  // the udp_receive_buffers setting
  uint32_t repost_batch = 16;
  uint32_t send_slots = 128;
  uint32_t signal_every = 16;
};

// One message as poll() hands it out: valid only inside the handler.
struct UdArrival {
  wire::DatagramHeader header;
  const uint8_t* payload = nullptr;  // header.payload_length bytes
  rdma::GrhInfo grh;                 // the sender's address, TTL, TOS
  uint32_t source_qpn = 0;
  const ibv_wc* completion = nullptr;  // for the reverse path's address handle
  const ibv_grh* grh_slot = nullptr;
};

// One datagram to send: where to, its header (type, flags, ports,
// cookies, datagram id; the fragment fields are filled by the endpoint)
// and its `length` bytes gathered from iov, `offset` bytes in.
struct UdOutgoing {
  ibv_ah* ah = nullptr;
  uint32_t qpn = 0;
  wire::DatagramHeader header;
  const iovec* iov = nullptr;
  int iov_count = 0;
  size_t offset = 0;  // where its bytes start in the iovecs (UDP_SEGMENT)
  size_t length = 0;
};

struct UdEndpointCounters {
  uint64_t sent = 0;
  uint64_t received = 0;
  uint64_t malformed = 0;      // a GRH or header that did not parse: dropped
  uint64_t receive_errors = 0; // a receive completion with an error status
  uint64_t send_errors = 0;
  uint64_t slots_exhausted = 0;  // send() found every slot in flight: EAGAIN
};

class UdEndpoint {
 public:
  using ArrivalHandler = void (*)(void* context, const UdArrival& arrival);

  static core::Result<std::unique_ptr<UdEndpoint>> create(const rdma::Device& device, const UdEndpointConfig& config);
  ~UdEndpoint();
  UdEndpoint(const UdEndpoint&) = delete;
  UdEndpoint& operator=(const UdEndpoint&) = delete;

  uint32_t qpn() const { return qp_.qpn(); }
  uint32_t qkey() const { return qp_.qkey(); }
  uint8_t port() const { return port_; }
  uint32_t receive_depth() const { return config_.receive_depth; }
  const rdma::ProtectionDomain& pd() const { return pd_; }
  // The most a message may carry after its header (path MTU minus header).
  size_t max_payload() const { return mtu_bytes_ - wire::kDatagramHeaderSize; }
  // Readable after arm() once a message came (DESIGN decision 6's sleep).
  int completion_fd() const { return receive_cq_.channel_fd(); }

  // Sends `header` and its payload (header.payload_length bytes gathered
  // from iov) to QP `qpn` through `ah`. EMSGSIZE above max_payload() or
  // when the iovecs hold less than payload_length; EAGAIN when every slot
  // is in flight; a verbs error else.
  rdma::Status send(ibv_ah* ah, uint32_t qpn, const wire::DatagramHeader& header, const iovec* iov, int count);
  // Sends a whole datagram of `length` bytes (gathered from iov): one
  // message, or the fewest fragments the MTU allows (fragmenter.hpp), all
  // posted as one chain (one doorbell) once there are slots for all of
  // them, so that a datagram never goes out in part. `header` gives the
  // type, flags, ports, cookies and datagram id; the fragment fields are
  // filled here. EMSGSIZE above wire::kMaxDatagramSize, EAGAIN without
  // room (at most send_slots fragments fit at all).
  rdma::Status send_datagram(ibv_ah* ah, uint32_t qpn, const wire::DatagramHeader& header, const iovec* iov,
                             int count, size_t length);
  // sendmmsg(): posts the longest prefix of `datagrams` that fits, each
  // whole (every fragment) or not at all, as one chain (one doorbell);
  // *posted says how many went. The status says why the next one did not:
  // EMSGSIZE (too large for UD), EAGAIN (no room now: slots in flight, or
  // the chain is full: call again with the rest), or a verbs error (what
  // the device did not take is not counted as posted). With
  // `all_or_none`, nothing is posted unless all of them fit (EAGAIN).
  rdma::Status send_datagrams(const UdOutgoing* datagrams, size_t count, size_t* posted, bool all_or_none = false);

  // Waits, at most `timeout_ms`, until every send posted so far has left
  // the queue pair (a process that exits right after its last sendto()
  // would otherwise destroy the QP under them: the kernel delivers what
  // sendto() took). When the last posted send asked for no completion, it
  // posts `fence` (an empty control message to `ah`/`qpn`) asking for one:
  // a UD QP completes its sends in order. False on timeout.
  bool finish_sends(ibv_ah* ah, uint32_t qpn, const wire::DatagramHeader& fence, int timeout_ms);

  // Takes up to `max` arrivals, hands each good one to handler(context, ·)
  // and posts the buffers again. Returns how many completions it took (0:
  // nothing came).
  int poll(ArrivalHandler handler, void* context, int max);
  // The wait contract of CompletionQueue: arm(), poll() once more, sleep
  // on completion_fd(), take_event() (the sleeper saw it readable) or
  // drain_events() (a poll()-style look after a sleep elsewhere). poll()
  // never takes events: one taken between arm() and the sleep would leave
  // the CQ unarmed and the sleeper without a wake-up.
  rdma::Status arm();
  // arm() for a watcher that never takes an event a sleeper may need (the
  // receive progress thread): not counted in last_arm_ms().
  rdma::Status arm_for_watcher();
  // Each returns how many events it took (0: none, or another thread's).
  int take_event();
  int drain_events();

  UdEndpointCounters counters() const;
  // How many poll() calls have taken at least one completion so far, and
  // when a sleeper last called arm() (monotonic ms; 0: never): read without
  // the lock, by the receive progress thread.
  uint64_t productive_polls() const { return productive_polls_.load(std::memory_order_relaxed); }
  int64_t last_arm_ms() const { return last_arm_ms_.load(std::memory_order_relaxed); }
  // Whether the completion channel has an event waiting (no wait).
  bool channel_readable() const;

  // The queue pair receives what is sent to the multicast group `gid`
  // (`lid`: 0 on RoCE) / no longer does.
  rdma::Status attach_multicast(const ibv_gid& gid, uint16_t lid) { return qp_.attach_multicast(gid, lid); }
  rdma::Status detach_multicast(const ibv_gid& gid, uint16_t lid) { return qp_.detach_multicast(gid, lid); }

 private:
  UdEndpoint() = default;
  static constexpr int kRestartEveryMs = 1000;
  rdma::Status post_receives(const uint32_t* indexes, size_t count);
  // Posts every buffer of the receive pool (at creation, after a restart).
  rdma::Status post_all_receives();
  // Takes back the slots filled from `first` on that were not posted (a
  // failed post: from `bad` on, or all when it is null) and returns the
  // number of the first of them.
  uint64_t release_unposted(uint64_t first, const ibv_send_wr* bad);
  // Copies header + `length` bytes from `offset` of the iovecs into the
  // next slot and fills `wr`/`sge` for it (under mu_, room checked).
  void fill_slot(const wire::DatagramHeader& header, const iovec* iov, int count, size_t offset, size_t length,
                 ibv_ah* ah, uint32_t qpn, ibv_send_wr* wr, ibv_sge* sge, bool signal_it = false);
  void reap_sends();
  // Under mu_: whether sends may be posted now; restarts a broken queue
  // pair when its time has come.
  bool usable_locked();
  void note_broken_locked(const char* why);
  uint8_t* receive_buffer(uint32_t index) const { return receive_pool_.data() + size_t{index} * receive_stride_; }

  mutable std::mutex mu_;
  // The receive CQ's maybe_event(), readable without the lock: a look
  // that finds it false skips drain_events() (and its lock) altogether.
  std::atomic<bool> maybe_event_{false};
  std::atomic<uint64_t> productive_polls_{0};
  std::atomic<int64_t> last_arm_ms_{0};
  std::atomic<bool> broken_{false};
  int64_t restart_at_ms_ = 0;  // when a broken queue pair is tried again
  uint8_t port_ = 0;
  size_t mtu_bytes_ = 0;
  size_t receive_stride_ = 0;
  UdEndpointConfig config_;
  rdma::ProtectionDomain pd_;
  rdma::CompletionQueue send_cq_;
  rdma::CompletionQueue receive_cq_;
  rdma::UdQueuePair qp_;
  rdma::MemoryRegion receive_pool_;
  rdma::MemoryRegion send_pool_;
  std::vector<uint32_t> repost_;  // buffers handled, not yet posted again
  uint64_t posted_sends_ = 0;     // sends posted so far; slot = count % send_slots
  uint64_t completed_sends_ = 0;  // sends known complete (their slots are free)
  uint64_t last_signaled_ = 0;    // number + 1 of the last send that asked for a completion (0: none)
  UdEndpointCounters counters_;
};

}  // namespace vsock::sock::dgram
