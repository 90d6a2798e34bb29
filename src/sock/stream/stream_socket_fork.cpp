// StreamSocket across fork() (docs/protocol.md §5.2): the parent keeps a
// switched connection on RDMA; the child's copy is parked, and its first
// use asks the parent (the owner) to hand the connection back to TCP.
#include <cerrno>

#include "core/log.hpp"
#include "sock/stream/owner_inbox.hpp"
#include "sock/stream/stream_handoff.hpp"
#include "sock/stream/stream_socket.hpp"

namespace vsock::sock {

bool StreamSocket::stays_across_fork_locked() const {
  if (kernel_only() || awaiting_claim_.load(std::memory_order_acquire) || parked() || closing_) return false;
  // A server socket whose upgrade has not begun goes up for claim instead:
  // whichever process uses it first upgrades it (revert_begin).
  if (goes_up_for_claim_locked()) return false;
  // An upgrade under way goes on here as if nothing happened: the child's
  // first use hands back whatever state it reached by then.
  const UpgradePhase phase = upgrade_.phase();
  return phase != UpgradePhase::kFailed && phase != UpgradePhase::kFallback && error_ == 0 &&
         (!channel_ || channel_->error() == 0) && !resuming_ && !revert_posted_ && !peer_reverted_ &&
         !resend_pending();
}

void StreamSocket::park_in_child(pid_t owner) {
  forget_parent_objects();
  last_look_ = LastLook{};  // the parent's
  owner_pid_ = owner;
  kept_since_fork_.store(0, std::memory_order_relaxed);  // this process's own forks count anew
  parked_.store(true, std::memory_order_release);
}

void StreamSocket::leave_parked(int fd) {
  StreamLock held = lock_call();
  leave_parked_locked(fd);
}

void StreamSocket::leave_parked_locked(int fd) {
  if (!parked()) return;  // another thread of ours asked already
  core::Result<wire::OwnerAnswer> answer = ask_owner(owner_pid_, nonce_, kOwnerAnswerMs);
  if (!answer) {
    reset_tcp(fd, answer.error() == ETIMEDOUT ? "the process that holds its RDMA path did not hand it back in time"
                                              : "the process that held its RDMA path is gone");
  } else if (answer.value() == wire::OwnerAnswer::kReset) {
    // The owner could not hand it back byte-exact and resets its RDMA
    // side: the TCP connection ends too, for every process that has it.
    reset_tcp(fd, "the process that holds its RDMA path could not hand it back");
  } else {
    VSOCK_LOG(kDebug, "fd %d: first use since the fork: pid %d handed the connection back to TCP (answer %d)", fd,
              static_cast<int>(owner_pid_), static_cast<int>(answer.value()));
  }
  parked_.store(false, std::memory_order_release);
  kernel_only_.store(true, std::memory_order_release);
  note_route_changed();
}

}  // namespace vsock::sock
