// Handing upgraded TCP connections to another process (docs/protocol.md
// §5): before vfork(), daemon() and a sendmsg() that passes a socket with
// SCM_RIGHTS, every such connection goes back to TCP, byte-exact, so that
// whichever process uses the fd afterwards reads and writes the kernel
// socket with the kernel's semantics. fork() keeps the switched ones on
// RDMA in the parent (§5.2): a child that uses one asks the parent to hand
// it back then (owner_inbox.hpp), and the parent does the same when it
// closes one while such a child lives. Bounded: at most about kHandoffMs +
// kHandoffFlushMs, never a wait on the peer's application.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "sock/wire/owner_request.hpp"

namespace vsock::sock {

class StreamSocket;

enum class HandoffKind : uint8_t {
  kFork,    // fork(): switched connections stay on RDMA here, parked in the child
  kDaemon,  // daemon(): this process goes away; parked ones stay parked
  kAway,    // vfork+exec, SCM_RIGHTS, a child's request: everything to TCP
};

// The streams a handoff took, locked until release (so that a fork()
// copies none of them half-changed, and none with a lock another thread
// held).
class HandoffHold {
 public:
  HandoffHold() = default;
  HandoffHold(const HandoffHold&) = delete;
  HandoffHold& operator=(const HandoffHold&) = delete;
  ~HandoffHold() { release(false); }

  // Unlocks and drops the references. In a child of fork(), first makes
  // sure no stream still uses the parent's queue pairs (one that began to
  // upgrade between the handoff and the fork); the ones that stayed on
  // RDMA in the parent are parked.
  void release(bool in_child);
  // The number of the fork that kept connections on RDMA (0: none was kept).
  uint64_t fork_sequence() const { return fork_sequence_; }
  // Takes `stream` (and a reference to it), to be handed off through `fd`.
  void add(StreamSocket* stream, int fd) { entries_.push_back({stream, fd}); }
  // Locks every stream taken and hands them off as `kind` says.
  void hand_off(HandoffKind kind);

 private:
  struct Entry {
    StreamSocket* stream;
    int fd;
    bool kept = false;  // stays on RDMA across the fork
  };
  // kFork: keeps what can stay (false: nothing could).
  bool keep_across_fork();
  std::vector<Entry> entries_;
  bool locked_ = false;
  uint64_t fork_sequence_ = 0;
  pid_t owner_ = 0;
};

inline constexpr int kHandoffMs = 2000;       // for the Reverts to be acknowledged
inline constexpr int kHandoffFlushMs = 1000;  // for bytes a crossing Revert gave back
// How long a fork child waits for the owner's answer: the owner's handoff
// and a margin for its side-band thread to come round.
inline constexpr int kOwnerAnswerMs = kHandoffMs + kHandoffFlushMs + 2000;

// Every stream of the process (fork, vfork, daemon). The streams stay
// locked in `hold` until its release().
void hand_off_all_streams(HandoffHold* hold, HandoffKind kind);
// The stream of one fd, if it has one (SCM_RIGHTS).
void hand_off_stream_fd(int fd);
// Every fd an SCM_RIGHTS message in `control` passes: its stream goes back
// to TCP, its datagram socket leaves UD.
void hand_off_passed_fds(const void* control, unsigned long control_length);
// The owner's side-band thread, for a fork child's request
// (serve_owner_inbox): hands the connection `nonce` back to TCP — both of
// its ends if both are in this process.
wire::OwnerAnswer hand_back_for_child(uint64_t nonce);
// The last fd of `stream` is being closed here while a fork child that
// shares it may live: back to TCP first, so that the child's copy goes on.
// `fd`: the one being closed, if still open (else -1).
void hand_back_before_close(StreamSocket* stream, int fd = -1);

}  // namespace vsock::sock
