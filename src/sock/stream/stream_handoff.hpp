// Handing upgraded TCP connections to another process (docs/protocol.md
// §5): before fork(), vfork(), daemon() and a sendmsg() that passes a
// socket with SCM_RIGHTS, every such connection goes back to TCP, byte-
// exact, so that whichever process uses the fd afterwards reads and writes
// the kernel socket with the kernel's semantics. Bounded: at most about
// kHandoffMs + kHandoffFlushMs, never a wait on the peer's application.
#pragma once

#include <vector>

namespace vsock::sock {

class StreamSocket;

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
  // upgrade between the handoff and the fork).
  void release(bool in_child);

 private:
  friend void hand_off_all_streams(HandoffHold* hold);
  friend void hand_off_stream_fd(int fd);
  struct Entry {
    StreamSocket* stream;
    int fd;
  };
  void hand_off();
  std::vector<Entry> entries_;
  bool locked_ = false;
};

inline constexpr int kHandoffMs = 2000;       // for the Reverts to be acknowledged
inline constexpr int kHandoffFlushMs = 1000;  // for bytes a crossing Revert gave back

// Every stream of the process (fork, vfork, daemon). The streams stay
// locked in `hold` until its release().
void hand_off_all_streams(HandoffHold* hold);
// The stream of one fd, if it has one (SCM_RIGHTS).
void hand_off_stream_fd(int fd);
// Every fd an SCM_RIGHTS message in `control` passes: its stream goes back
// to TCP, its datagram socket leaves UD.
void hand_off_passed_fds(const void* control, unsigned long control_length);

}  // namespace vsock::sock
