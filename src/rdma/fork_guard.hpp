// libibverbs keeps process-wide locks, e.g. the one that records
// fork-protected ranges inside ibv_reg_mr() and ibv_dereg_mr(). A fork()
// while another thread holds one copies it locked into the child, where no
// thread will ever release it: the child's first registration waits
// forever (seen: the side-band thread tearing a closed connection down in
// the parent while the application forked a server child). Registration
// and deregistration hold this guard shared; fork() takes it exclusively
// (pthread_atfork), so no such call is half-done when memory is copied.
#pragma once

namespace vsock::rdma {

class ForkGuard {
 public:
  ForkGuard();
  ~ForkGuard();
  ForkGuard(const ForkGuard&) = delete;
  ForkGuard& operator=(const ForkGuard&) = delete;
};

}  // namespace vsock::rdma
