// StreamSocket: one TCP connection that may move onto an RC queue pair
// (DESIGN decisions 2-4, 8). It ties together the pieces of the upgrade —
// UpgradeState (where the upgrade stands), SwitchWriter/SwitchReader (the
// byte-exact switch), the StreamChannel (the data path) and the rdma_cm
// connection — and gives the entry points socket-shaped calls that read
// and write TCP, the ring, or both, as the switch requires.
//
// Threads: every member is guarded by mu_, which is never held across a
// sleep or a blocking system call (TCP calls under it are MSG_DONTWAIT);
// blocking calls wait with the lock released, on the kernel socket and the
// channel's completion fd together, then look again. The side-band thread
// (UpgradeEngine) drives the rdma_cm part under the same lock. A call takes
// the lock once: a blocking call spins with it held, and lets it go only
// while another thread waits for it (lock_waiters_), so that a second
// thread sending on the socket is not held off by a reader's spin.
//
// Lifetime: counted (retain/release): the SocketState holds one reference
// while any fd refers to the socket; the engine one while it has rdma_cm
// work or a close to finish for it.
#pragma once
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/result.hpp"
#include "rdma/cm_connection.hpp"
#include "rdma/cm_connector.hpp"
#include "sock/blocking_mode.hpp"
#include "sock/managed_socket.hpp"
#include "sock/stream/stream_channel.hpp"
#include "sock/stream/stream_mutex.hpp"
#include "sock/stream/switch_reader.hpp"
#include "sock/stream/switch_writer.hpp"
#include "sock/upgrade/rendezvous_board.hpp"
#include "sock/upgrade/upgrade_state.hpp"
#include "sock/wire/bound_message.hpp"
#include "sock/wire/resume_record.hpp"

namespace vsock::sock {

struct StreamSnapshot;  // socket_report.hpp

class StreamSocket final : public ManagedSocket {
 public:
  StreamSocket(UpgradeRole role, uint64_t nonce);
  ~StreamSocket();
  StreamSocket(const StreamSocket&) = delete;
  StreamSocket& operator=(const StreamSocket&) = delete;

  void retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release();

  // Fast path: once true, every call on the fd goes straight to the kernel.
  bool kernel_only() const override { return kernel_only_.load(std::memory_order_acquire); }
  UpgradeRole role() const { return upgrade_.role(); }
  uint64_t nonce() const { return nonce_; }
  void set_nonce(uint64_t nonce) { nonce_ = nonce; }  // the server's, from the request
  // close() saw SO_LINGER {1, 0}: the last close resets the connection.
  void set_abort_on_close() { abort_on_close_.store(true, std::memory_order_relaxed); }
  // SO_RCVLOWAT (the kernel keeps its own copy: this one is for the ring).
  void set_receive_low_water(int bytes) { receive_low_water_.store(bytes, std::memory_order_relaxed); }
  // TCP_NODELAY (copied from the kernel socket and on every setsockopt): with
  // the nagle setting, small writes coalesce only while it is off.
  void set_no_delay(bool on);
  // fcntl(F_SETFL) or ioctl(FIONBIO) / setsockopt(SO_RCVTIMEO or
  // SO_SNDTIMEO) went through on an fd of this socket: the cached copies
  // are stale (BlockingMode). Lock-free.
  void file_flags_changed() override { blocking_.file_flags_changed(); }
  void timeouts_changed() override { blocking_.timeouts_changed(); }
  // Once it is attached: what the library knows of the blocking mode
  // stands in for asking the kernel (BlockingMode::assume).
  void assume_known_mode(const std::atomic<uint8_t>& known_mode) {
    StreamLock held = lock_call();
    blocking_.assume(known_mode);
  }
  // Held data the application has not flushed by a later call: the
  // side-band thread posts it once the completion it waits for has come, as
  // the kernel sends what Nagle held when the ACK arrives. Lock held.
  bool holds_data_locked() const;
  // The receive ring may still grow (docs/protocol.md §3.1): the side-band
  // thread takes the peer's writes now and then, so that the ring grows
  // while the application does not read. Lock held.
  bool ring_may_grow_locked() const;

  // --- the entry points' calls (fd: the caller's fd for this socket) ----
  // send/sendmsg/write/writev. MSG_NOSIGNAL, MSG_DONTWAIT honoured; EPIPE
  // raises SIGPIPE as the kernel does.
  core::Result<size_t> send(int fd, const iovec* iov, int count, int flags);
  // recv/recvmsg/read/readv: MSG_PEEK, MSG_WAITALL, MSG_DONTWAIT.
  core::Result<size_t> recv(int fd, const iovec* iov, int count, int flags);
  // ManagedSocket's sendmsg/recvmsg: send()/recv() of the message's
  // iovecs; no peer address and no control data, as the kernel's TCP.
  core::Result<size_t> send_message(int fd, const msghdr& msg, int flags) override;
  core::Result<size_t> receive_message(int fd, msghdr& msg, int flags) override;
  core::Result<bool> shutdown(int fd, int how) override;
  core::Result<int> readable_bytes(int fd) override;  // FIONREAD
  // poll()-style readiness for `events` (POLLIN, POLLOUT, POLLRDHUP; POLLHUP
  // and POLLERR always): progresses the channel first. Every look asks the
  // kernel socket while TCP still matters to it (`look` is not used).
  short poll_events(int fd, short events, Look look) override;
  // Fills `out` (at most 3 entries) with what a sleeper must watch to learn
  // that poll_events() may have changed; arms the channel. Returns the
  // count, and in *slice_ms how long to sleep at most before looking again
  // (the upgrade may change things no fd reports).
  int wake_fds(int fd, short events, pollfd* out, int* slice_ms) override;
  // True once the connection is on its ring for good (switched, no
  // resume, no hold, no error): then the completion channel (and the TCP
  // socket, while it is among the wake fds) reports every change.
  bool wake_fds_tell_all(int fd) override;
  short ready_now(int fd, short events) override;
  // Changes whenever something may have become newly ready (data or
  // credit arrived on the ring or on TCP, a call found nothing and will
  // wait): edge-triggered epoll reports a ready socket again after it changed.
  uint64_t activity(int fd) override;
  // getsockopt(SO_ERROR) once a byte may be in a ring: the connection's
  // error, once, as the kernel reports its pending error (docs/protocol.md
  // §4). False: the kernel socket answers.
  bool take_so_error(int fd, int* error) override;
  // The process exits with the socket open: sends a FIN after the data and
  // waits (until deadline_ms at most) until both are delivered, or, when
  // RDMA fails meanwhile, until the connection resumed on TCP (§5.1) and
  // the kernel holds what we resend: the kernel's own sockets deliver
  // what they hold after the process is gone, our rings cannot.
  void finish_at_exit(int64_t deadline_ms);
  // The process exits while the engine still drains this closed socket:
  // waits for what close_finished() waits for, until deadline_ms at most.
  void finish_closed_at_exit(int64_t deadline_ms);
  // The last fd is being closed: posts what is queued and the FIN, and
  // waits (bounded) until the peer's device has acknowledged them, so that
  // an _exit() right after close() loses nothing. Returns true if the
  // engine must finish the close (what is left to send, disconnect).
  bool on_last_close();

  // --- the rendezvous (DESIGN decision 2, revised) ----------------------
  // An accepted socket is upgraded by the process that first reads,
  // writes or waits on it (a fork may hand it on before that): every call
  // below begins with claim_if_awaited(), which hands the socket to the
  // claim handler once.
  void await_claim(std::shared_ptr<RendezvousBoard> board) {
    rendezvous_ = std::move(board);
    awaiting_claim_.store(true, std::memory_order_release);
  }
  bool awaiting_claim() const { return awaiting_claim_.load(std::memory_order_acquire); }
  // The engine claims it for this process without a use (true once).
  bool take_claim() { return awaiting_claim_.exchange(false, std::memory_order_acq_rel); }
  void claim_if_awaited(int fd) {
    if (awaiting_claim_.load(std::memory_order_relaxed)) claim_now(fd);
    if (parked_.load(std::memory_order_relaxed)) leave_parked(fd);
  }
  const std::shared_ptr<RendezvousBoard>& rendezvous() const { return rendezvous_; }
  // Who claims (the upgrade engine): called without any lock held.
  using ClaimHandler = void (*)(StreamSocket* stream, int fd);
  static void set_claim_handler(ClaimHandler handler);

  // --- the side band (UpgradeEngine), under lock() -----------------------
  StreamLock lock() { return lock_call(); }
  // The handoff keeps the lock past lock()'s scope (unique_lock::release)
  // and gives it back here.
  void unlock_after_handoff() { mu_.unlock(); }
  UpgradeState& upgrade() { return upgrade_; }
  StreamChannel* channel() { return channel_.get(); }
  void set_channel(std::unique_ptr<StreamChannel> channel) {
    channel_ = std::move(channel);
    apply_coalescing_locked();
  }
  // The channel, out of the socket (a closed connection's, to be parked;
  // an Attach that failed, for the rdma_cm path). Under the socket's lock.
  std::unique_ptr<StreamChannel> take_channel() { return std::move(channel_); }
  rdma::CmConnector& connector() { return connector_; }
  rdma::CmConnection& connection() { return connection_; }
  // Applies an UpgradeAction the state machine returned.
  void apply(UpgradeAction action);
  // Takes in what the channel delivered (the peer's Switch) and sends our
  // own Switch when it is due. Called after every progress of the channel.
  // `fd`: the application's fd of the call under way (the socket's own
  // until the call returns: the token's peek and write use it), or -1
  // (the engine's thread, a call that has none): then they use a dup of
  // the socket's own, checked by inode (three system calls).
  void advance(int fd = -1);
  // Our direction is on the ring, the peer's still all on TCP.
  bool peer_never_switched() const;
  // The peer closed (its FIN came on the ring) and its side of the queue
  // pair is gone since: writes go to the kernel socket, which answers them
  // as it answers a write to a closed peer (accepted, then the peer's RST
  // makes the next one EPIPE).
  bool peer_closed_ring() const;
  // Our direction switched, the peer's never did, its queue pair is gone,
  // and nothing of ours reached the ring: writes go to the kernel socket.
  bool peer_gone_unswitched() const;
  // Whether send() goes to the kernel socket now.
  bool writes_to_kernel() const;
  // What wait_settled() waits for.
  bool upgrade_settled() const;
  // Whether hold_writes_until_settled() still holds writes back (ends the
  // hold once the upgrade settled, the time is up or, with fd, the kernel
  // socket has an error).
  bool writes_held(int fd = -1);
  // Polls the channel, then advance(fd): what a call on the socket does first.
  void progress_locked(int fd = -1);
  // rdma_cm said the connection ended (DISCONNECTED) or failed.
  void on_transport_lost();
  // Draining after the last close: true once nothing is left to send (and,
  // after a resume on TCP, the peer's Resume record is taken).
  bool close_finished();
  // In a fork child: closes the dups of the socket this object holds (the
  // child's copies; only the parent's engine drains the connection).
  void close_own_dups_in_child();
  // Wakes waiters in wait_settled() (the upgrade phase changed).
  void notify() { settled_.notify_all(); }
  // Blocking connect(): waits until the upgrade left kConnecting (at most
  // timeout_ms), and, when the server promised its Bound (its socket was
  // accepted already), until our Switch is sent: the first bytes written
  // after connect() then go on the ring.
  void wait_settled(int timeout_ms);
  // Non-blocking connect(): the same wait, done by the socket's readiness
  // instead: no POLLOUT and EAGAIN from send() until the upgrade settles
  // or timeout_ms pass, so that the first request goes on the ring
  // (protocol §1, early bytes). Any other call is unaffected.
  void hold_writes_until_settled(int timeout_ms);
  // The server asked for our first bytes before it can answer (Reject
  // kAfterData): connect() and the write hold end now, and the engine asks
  // again once wrote_on_tcp(). Under the lock.
  void await_first_write_locked();
  bool awaiting_first_write() const { return awaiting_first_write_; }
  void first_write_seen() { awaiting_first_write_ = false; }
  bool wrote_on_tcp() const { return writer_.tcp_written() > 0; }
  void set_bound_promised(bool promised) { bound_promised_ = promised; }
  // The engine drops the attempt (takes the lock: callers must not hold it).
  void fall_back_now(FallbackReason reason, const char* why);
  int fd_hint() const { return fd_hint_; }
  // Also notes which kernel socket it is (its inode): an fd number may be
  // closed and reused, and the library writes through a dup of it (§5).
  void set_fd_hint(int fd);

  // --- handing the connection to another process (docs/protocol.md §5;
  // stream_socket_revert.cpp). The caller (stream_handoff.cpp) holds
  // lock() across the three steps, for every socket it hands off at once.
  // 1. Stops using RDMA: posts our Revert (true: wait for it with
  //    revert_pending()/revert_poll()), or falls back when nothing of
  //    ours can be in a ring yet (false). `fd` is an fd of the socket.
  bool revert_begin(int fd);
  // 2. Our Revert is posted and neither delivered nor failed yet.
  bool revert_pending() const;
  void revert_poll();
  // 3. Takes what arrived last (a Revert that crossed ours), writes on TCP
  //    what the peer gave up (by deadline_ms at most), then leaves the
  //    socket to the kernel. A Revert that could not be delivered, or bytes
  //    that could not be written in time, reset the TCP connection: the
  //    other process must not read a stream with a hole.
  void revert_finish(int fd, int64_t deadline_ms);
  // In a child of fork(): the channel and rdma_cm objects are the
  // parent's; forgets them (never destroys: their handles would act on
  // the parent's resources) and serves the socket from the kernel.
  void abandon_in_child();

  // --- a fork() that keeps the connection on RDMA (docs/protocol.md §5.2;
  // stream_socket_fork.cpp). Under lock(), before the fork:
  // Whether this process can keep the connection (on RDMA, or upgrading)
  // across a fork: no error, not resuming, no Revert under way, and not a
  // server socket that goes up for claim. Any other state is handed off
  // as before.
  bool stays_across_fork_locked() const;
  // It stays, on the fork numbered `sequence` (fork_children.hpp).
  void keep_across_fork_locked(uint64_t sequence) {
    if (kept_since_fork_.load(std::memory_order_relaxed) == 0)
      kept_since_fork_.store(sequence, std::memory_order_relaxed);
  }
  // The first fork that kept it (0: none): its children may hold the fd.
  uint64_t kept_since_fork() const { return kept_since_fork_.load(std::memory_order_relaxed); }
  // In the child: forgets the parent's channel as abandon_in_child() does,
  // but the connection stays on RDMA in `owner`: the first use here asks
  // the owner to hand it back to TCP (leave_parked).
  void park_in_child(pid_t owner);
  bool parked() const { return parked_.load(std::memory_order_acquire); }
  // A parked socket's first use here, or its handoff to a program that
  // knows nothing of the owner (vfork+exec, SCM_RIGHTS): asks the owner to
  // hand the connection back to TCP (bounded), then serves the socket from
  // the kernel. If the owner is gone or does not answer, the TCP connection
  // is reset: the bytes in its rings cannot be had any more.
  void leave_parked(int fd);
  void leave_parked_locked(int fd);
  // A dup of this socket's fd (checked by inode), or -1: of one the
  // stream remembers, else of `candidate` (an fd it was found through).
  // Under lock().
  int dup_own_fd(int candidate = -1) const;
  // The handoff that follows is the owner's close (hand_back_before_close):
  // its Revert, if one is sent, counts as close_handbacks too. Under lock().
  void mark_handback_at_close_locked() { handback_at_close_ = true; }
  // The engine: a peer's Revert left bytes to write on TCP.
  bool resend_pending() const { return !resend_.empty(); }

  // For vsock-stat: where the connection stands and what it moved, taken
  // under the lock (defined in socket_report.cpp; never on the data path).
  void snapshot(StreamSnapshot* out);

 private:
  // Takes mu_. A thread that finds it held says so in lock_waiters_ while
  // it waits: that is what makes a spinning wait() let go.
  StreamLock lock_call() {
    StreamLock held(mu_, std::try_to_lock);
    if (!held.owns_lock()) relock(held);
    return held;
  }
  void relock(StreamLock& held) {
    lock_waiters_.fetch_add(1, std::memory_order_relaxed);
    held.lock();
    lock_waiters_.fetch_sub(1, std::memory_order_relaxed);
  }
  void apply_coalescing_locked();
  void claim_now(int fd);
  enum class WaitFor : uint8_t { kRead, kWrite };
  // Sleeps (lock released) until the socket may be ready, the timeout
  // passes or a signal arrives. EINTR, EAGAIN (timeout), or ok. ok(true):
  // it ended in a progress() that took completions, so the caller need not
  // poll the CQ again before it looks; ok(false): look as usual.
  core::Result<bool> wait(StreamLock& held, int fd, WaitFor what, int64_t deadline_ms);
  // A send that can go straight to the ring: switched, nothing to resend,
  // no failure known, credit and send-queue room. It posts without polling
  // the CQ first (what the poll could bring — credit, a peer's Revert or
  // reset — is taken by the next call that needs it; a Revert's bytes are
  // recovered from the send buffer either way).
  bool ring_send_ready_locked() const;
  core::Result<size_t> send_urgent(int fd, const iovec* iov, int count, int flags);
  core::Result<size_t> send_once(int fd, const iovec* iov, int count, int flags, bool progress = true);
  core::Result<size_t> recv_once(int fd, const iovec* iov, int count, int flags, bool progress = true);
  core::Result<size_t> recv_tcp_eof();
  bool ring_readable() const;
  // Switched for good: on the ring, no resume, handback, close, error or
  // write hold under way (what wake_fds_tell_all() says).
  bool on_ring_for_good_locked() const;
  // poll_events' quick look: whether the last full look's answer for (fd,
  // events) still holds. It does when that look found every path of the
  // socket on the ring with nothing that time alone can change
  // (look_reusable_locked), nobody took the lock since (mu_.takes() moved by
  // our own taking only: every member changes under it), no sleeper's
  // channel event waits to be drained, and the CQ has nothing new (what it
  // has is taken, and the look is a full one).
  bool last_look_holds_locked(int fd, short events);
  bool look_reusable_locked(short events) const;
  void send_switch();
  // Server: Bound, with the token and our TCP count (§2).
  void send_bound();
  // Server, after Bound and before the client's Switch: Bound again once
  // our application has read every TCP byte that came (fd's kernel socket
  // holds none) at a count not offered yet. The client switches only at
  // such a count (§2, "Where the client switches"): its token is then the
  // next byte on TCP, whichever process reads the socket next.
  void offer_switch_point_locked(int fd);
  // Client: the server's Bound (the first, or a later one with a new count).
  void take_bound(const uint8_t* bytes, size_t length);
  // How long the client's writes wait for the server to catch up after a
  // Bound whose count is behind ours (a hold, as hold_writes_until_settled).
  static constexpr int64_t kCatchUpHoldMs = 50;
  // Server: a Bound went out lately (kSwitchAfterCloseMs) and the client's
  // Switch has not come: it may be on its way (on_last_close waits).
  bool switch_may_be_coming_locked() const;
  // Server: what waits unread on TCP says no Switch can come (a peek).
  bool tcp_rules_out_switch_locked();
  // The socket's close ends an upgrade that never committed: counted, the
  // kernel's from here on (on_last_close, or close_finished after a wait).
  void end_upgrade_at_close_locked();
  static constexpr int64_t kSwitchAfterCloseMs = 250;
  // TCP bytes that came while reads come from TCP (for activity()).
  void note_tcp_arrivals_locked(int fd);
  // poll_events()'s answer from the state as it is (the kernel socket
  // asked while TCP matters). *look_again: the peer's Switch came since
  // the caller's look, so the kernel's bytes may be its token.
  short readiness_locked(int fd, short events, bool* look_again);
  // The token (docs/protocol.md §2, "Who may switch"; stream_socket_token.cpp).
  // Server: what waits unread on TCP where the client's token would be (a
  // peek of fd; the caller knows it is at the switch point): nothing yet
  // (or a 0 after our own SHUT_RD, which still lets the token come), a
  // prefix of the token, the whole token, other bytes, the stream's end,
  // or an error of the socket. One look for both of its readers:
  // check_token_locked and tcp_rules_out_switch_locked.
  enum class TcpAtSwitchPoint : uint8_t { kNothingYet, kTokenPrefix, kToken, kOtherBytes, kEnd, kError };
  TcpAtSwitchPoint peek_switch_point_locked(int fd);
  // Server: looks on TCP for the client's token at the switch point once
  // it is due (fd < 0: through a dup of our own); found, the Switch counts
  // and ours goes out; anything else refuses the Switch.
  void check_token_locked(int fd);
  // Server: the queue pair's peer is not the TCP connection's client: drop
  // the queue pair, count it, and stay on TCP.
  void refuse_switch_locked(const char* why);
  // Server, before the client's Switch is taken: the kernel's bytes a call
  // just saw may be the token only if the Switch is in the completion
  // queue by now. Polls it; true if the Switch came (look again).
  bool switch_came_since_look_locked();
  // Client: writes the token on TCP once our Switch is delivered (non-
  // blocking; true when nothing is owed any more). `fd` as for advance().
  bool flush_token_locked(int fd = -1);
  // Client: waits until the token owed is on TCP (§2), or deadline_ms
  // (monotonic) passes: first for our Switch's delivery, then for room on
  // TCP. Before an urgent byte or a FIN (TCP's, which must come after it),
  // at exit and at a handover. `held` is let go while it sleeps; null when
  // the caller must keep the lock (a handover holds it throughout).
  void wait_for_token_locked(StreamLock* held, int64_t deadline_ms);
  // How long an urgent byte or a FIN waits for the token to go before it
  // (about one round trip: our Switch's acknowledgement), and the slice of
  // each sleep of that wait.
  static constexpr int64_t kTokenBeforeTcpMs = 1000;
  static constexpr int kTokenPollSliceMs = 10;
  // Takes every message the channel holds: Bound, Switch, Revert.
  void take_peer_messages(int fd = -1);
  void take_peer_switch(const uint8_t* bytes, size_t length, int fd);
  // The peer's Revert (stream_socket_revert.cpp).
  void take_peer_revert(const uint8_t* bytes, size_t length);
  // RDMA failed under the switched connection (stream_socket_resume.cpp,
  // docs/protocol.md §5.1): when the channel failed resumably and both
  // directions are on rings, writes our Resume record and what the peer
  // may have missed on TCP and reads on there. True if the connection
  // goes on (or already went on) over TCP; false: it is reset as before.
  bool resume_on_tcp();
  // Takes the peer's Resume record and the bytes it resent that our ring
  // had, once the ring part is read (non-blocking: EAGAIN until they are
  // all in). ok once done; the connection's error if TCP ended or the
  // record is bad (then the connection is reset).
  core::Result<bool> take_resume_record(int fd);
  // After the application's close or at exit, once back on TCP: writes
  // what is left to resend and takes the peer's Resume record and the
  // bytes it resent that our ring had. Left unread, those would make the
  // kernel's close a reset, which drops what we resent and the kernel had
  // not sent yet. True once nothing is left to do.
  bool resume_settled_locked();
  // Closes close_fd_ (the drain is over); returns true.
  bool drop_close_fd_locked();
  core::Result<bool> lose_resume(int error, const char* why);
  // Called once a second while the channel is idle (with its probe): a
  // queue pair that failed on the peer's side only can leave ours silent
  // and working (rxe still acknowledges a probe to a queue pair in the
  // error state), so the peer's Resume record on TCP is how we learn that
  // it resumed. Then we fail the channel and resume too.
  void look_for_peer_resume(int fd);
  // New connections to this peer stay on TCP for a while (failed_paths).
  void note_peer_path_failed() const;
  // Writes what a peer's Revert left to resend (non-blocking), then a
  // shutdown(SHUT_WR) that waited for it; leaves the socket to the kernel
  // once the ring part is read too.
  void flush_resend_locked();
  void finish_peer_revert_locked();
  // Resets the kernel's TCP connection (RST to the peer, ECONNRESET here).
  void reset_tcp(int fd, const char* why);
  // A server socket whose upgrade has not begun, of a listener that
  // processes share: a handoff or fork puts it up for claim (§1.1).
  bool goes_up_for_claim_locked() const;
  // In a fork child: drops the parent's channel and rdma_cm objects
  // without destroying them (abandon_in_child, park_in_child).
  void forget_parent_objects();
  void become_kernel_only();
  void reset_connection(int error, const char* why);
  // Whether a TCP end of file may still be followed by the peer's Switch.
  bool switch_may_come() const;
  int error_locked() const;
  // The connection's error the first time it is asked for, then 0: the
  // kernel reports a reset once (recv, send or SO_ERROR), then end of
  // stream and EPIPE.
  int take_error_locked();
  // recv() after a reset, once the bytes that came before it are read.
  core::Result<size_t> recv_after_reset();
  // Posts the queued data and the FIN and waits, sleeping with the lock
  // released, until they are acknowledged (true), the channel fails (true:
  // nothing more can go), or timeout_ms pass or no completion comes for a
  // while (false: the peer is not taking them).
  // stall_ends: also gives up after kCloseStallMs without a completion (a
  // close, whose engine goes on; not at exit, where nothing goes on).
  bool flush_locked(StreamLock& held, int timeout_ms, bool stall_ends = true);

  StreamMutex mu_;
  std::atomic<uint32_t> lock_waiters_{0};  // threads blocked in lock_call()/relock()
  std::condition_variable_any settled_;  // any: it waits on StreamMutex
  std::atomic<int> refs_{1};
  std::atomic<bool> kernel_only_{false};
  std::atomic<bool> abort_on_close_{false};
  std::atomic<bool> no_delay_{false};
  std::atomic<int> receive_low_water_{1};
  std::atomic<bool> awaiting_claim_{false};
  std::atomic<bool> parked_{false};  // a fork child's copy; owner_pid_ has the RDMA path
  pid_t owner_pid_ = 0;
  std::atomic<uint64_t> kept_since_fork_{0};
  std::shared_ptr<RendezvousBoard> rendezvous_;  // the listener's board, for the claim
  UpgradeState upgrade_;
  BlockingMode blocking_;  // O_NONBLOCK, SO_RCVTIMEO, SO_SNDTIMEO
  SwitchWriter writer_;
  SwitchReader reader_;
  uint64_t nonce_;
  // Declared before the connection: destroyed after it, so the queue pair
  // (the channel's) outlives rdma_cm's borrowed handle on it.
  std::unique_ptr<StreamChannel> channel_;
  rdma::CmConnector connector_;
  rdma::CmConnection connection_;
  int error_ = 0;          // the connection was reset (reported once: error_reported_)
  bool error_reported_ = false;
  bool write_shut_ = false;  // shutdown(SHUT_WR) or close before the switch
  bool read_shut_ = false;
  bool closing_ = false;
  bool stats_counted_ = false;
  bool bound_promised_ = false;  // client: UpgradeAccept's kAcceptFlagBound
  int64_t write_hold_until_ms_ = 0;  // hold_writes_until_settled(); 0: none
  bool awaiting_first_write_ = false;
  bool asked_for_first_write_ = false;  // the server did, once: settled for connect()
  bool write_hold_released_ = false;
  int fd_hint_ = -1;
  // Going back to TCP (§5).
  bool revert_posted_ = false;   // our Revert is on the queue pair
  bool handback_at_close_ = false;  // mark_handback_at_close_locked()
  bool peer_reverted_ = false;   // the peer's Revert was taken
  bool resend_shut_wr_ = false;  // shutdown(SHUT_WR) waits for resend_
  std::vector<uint8_t> resend_;  // bytes to write on TCP before any other
  size_t resend_done_ = 0;
  // Resuming over TCP after RDMA failed (§5.1): the peer's record is still
  // to take from TCP (after the ring part), then resume_skip_ bytes.
  bool resuming_ = false;
  bool resumed_ = false;  // it did (for vsock-stat's reason)
  bool resume_skip_known_ = false;
  bool resume_peer_unread_ = false;  // bytes of ours the peer had not credited
  size_t resume_have_ = 0;
  uint64_t resume_skip_ = 0;
  uint8_t resume_in_[wire::kResumeRecordSize] = {};
  bool tcp_closed_under_rings_ = false;  // look_for_peer_resume(): TCP ended, stop looking
  int resend_fd_ = -1;           // our own dup of the socket while resend_ waits
  // Our dup of the socket while a closed connection drains: a queue pair
  // that fails then resumes on TCP (§5.1), which needs the socket open.
  int close_fd_ = -1;
  // The token (§2): the server's, sent in Bound; the client's copy of it.
  uint8_t token_[wire::kSwitchTokenSize] = {};
  bool token_guard_ = false;     // server: Bound sent; reads look before they take (switch_came_since_look_locked)
  uint64_t bound_count_ = 0;     // server: the TCP count of our latest Bound
  int64_t bound_sent_ms_ = 0;    // server: when it went
  bool close_waits_for_switch_ = false;  // server: on_last_close() left the close to close_finished()
  bool bound_seen_ = false;      // client: a Bound came (token_ is its token)
  bool bound_behind_ = false;    // client: the latest Bound's count is behind our TCP bytes
  bool urgent_on_tcp_ = false;   // client: an urgent byte of ours went on TCP before the switch
  bool token_owed_ = false;      // client: token_ goes on TCP once our Switch is delivered
  size_t token_sent_ = 0;
  int token_fd_ = -1;            // client: our dup of the socket while the token is owed
  std::vector<uint8_t> held_revert_;  // server: the peer's Revert, taken once its token is
  int last_fd_ = -1;             // the fd of the latest call (may be closed since)
  uint64_t inode_ = 0;           // the kernel socket's inode (0: unknown)
  uint64_t eagain_count_ = 0;  // for activity()
  uint64_t tcp_arrived_ = 0;   // for activity(): TCP bytes read or waiting, the most seen
  // The last full look of poll_events (last_look_holds_locked).
  struct LastLook {
    uint64_t takes = 0;  // mu_.takes() when it was made (or last found to hold)
    int fd = -1;
    short events = 0;
    short ready = 0;
    int low_water = 1;  // SO_RCVLOWAT then
    bool reusable = false;
  };
  LastLook last_look_;
};

}  // namespace vsock::sock
