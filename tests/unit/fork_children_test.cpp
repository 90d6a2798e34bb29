// Which fork() children may still hold the parent's kept connections
// (src/sock/stream/fork_children.*): a live child of the fork that kept a
// connection, or of a later one, may; an exited child no longer does, even
// before it is reaped; a child of an earlier fork never did.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sock/stream/fork_children.hpp"

namespace vsock::sock {
namespace {

// A child that waits until the parent closes the gate's write end, then
// exits (bounded: 10 s at most).
pid_t start_child(const int gate[2]) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(gate[1]);
    pollfd pfd{gate[0], POLLIN, 0};
    (void)::poll(&pfd, 1, 10000);
    ::_exit(0);
  }
  return pid;
}

// Waits (bounded) until `pid` has exited, without reaping it.
bool exited_unreaped(pid_t pid) {
  for (int i = 0; i < 500; ++i) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid)
      return true;
    ::poll(nullptr, 0, 10);
  }
  return false;
}

TEST(ForkChildren, ALiveChildHoldsWhatItsForkAndEarlierOnesKept) {
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  const uint64_t first = next_keeping_fork();
  pid_t child = start_child(gate);
  ASSERT_GT(child, 0);
  note_fork_child(child, first);
  EXPECT_TRUE(fork_child_may_hold(first));
  EXPECT_FALSE(fork_child_may_hold(first + 1));  // kept only after this child was made
  EXPECT_FALSE(fork_child_may_hold(0));          // never kept
  ::close(gate[1]);                              // the child exits
  ASSERT_TRUE(exited_unreaped(child));
  EXPECT_FALSE(fork_child_may_hold(first));      // a zombie holds nothing
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, 0), child);
  ::close(gate[0]);
}

TEST(ForkChildren, ALaterForksChildHoldsAnEarlierKeptConnection) {
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  const uint64_t earlier = next_keeping_fork();
  const uint64_t later = next_keeping_fork();
  pid_t child = start_child(gate);
  ASSERT_GT(child, 0);
  note_fork_child(child, later);
  EXPECT_TRUE(fork_child_may_hold(earlier));
  EXPECT_TRUE(fork_child_may_hold(later));
  ::close(gate[1]);
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_FALSE(fork_child_may_hold(earlier));
  ::close(gate[0]);
}

}  // namespace
}  // namespace vsock::sock
