// kernel_epoll_wait (src/sock/wait/kernel_epoll.*): the kernel's epoll wait
// with a timespec timeout, also where the kernel has no epoll_pwait2 (Linux
// before 5.11): a child process whose seccomp filter answers that system
// call with ENOSYS waits as well, and never less than asked.
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "sock/wait/kernel_epoll.hpp"

namespace vsock::sock {
namespace {

double now_ms() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// epoll_pwait2 fails with ENOSYS from here on, as on a kernel without it.
bool refuse_epoll_pwait2() {
#ifdef __NR_epoll_pwait2
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_epoll_pwait2, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
#else
  return false;
#endif
}

// The checks, in the calling process: 0 if all hold, else the failed one's number.
int wait_checks() {
  int epfd = epoll_create1(0);
  int pipe_fds[2];
  if (epfd < 0 || pipe(pipe_fds) != 0) return 1;
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = 42;
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, pipe_fds[0], &event) != 0) return 2;
  epoll_event got[4];
  // Nothing ready: the wait lasts at least the 30.5 ms asked (not 30).
  timespec limit{0, 30500000};
  double start = now_ms();
  if (kernel_epoll_wait(epfd, got, 4, &limit, nullptr) != 0) return 3;
  if (now_ms() - start < 30.5) return 4;
  // A zero timeout does not wait.
  timespec zero{0, 0};
  if (kernel_epoll_wait(epfd, got, 4, &zero, nullptr) != 0) return 5;
  // Ready: the event, at once, with no limit.
  if (write(pipe_fds[1], "x", 1) != 1) return 6;
  if (kernel_epoll_wait(epfd, got, 4, nullptr, nullptr) != 1 || got[0].data.u64 != 42) return 7;
  // Errors are the kernel's: not an epoll fd, a timeout out of range.
  if (kernel_epoll_wait(pipe_fds[0], got, 4, &zero, nullptr) != -1 || errno != EINVAL) return 8;
  timespec negative{-1, 0}, too_many_ns{0, 1000000000};
  if (kernel_epoll_wait(epfd, got, 4, &negative, nullptr) != -1 || errno != EINVAL) return 9;
  if (kernel_epoll_wait(epfd, got, 4, &too_many_ns, nullptr) != -1 || errno != EINVAL) return 10;
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  close(epfd);
  return 0;
}

TEST(KernelEpoll, TimeoutsRoundUpToWholeMilliseconds) {
  timespec t{0, 1};
  EXPECT_EQ(epoll_timeout_ms(&t), 1);
  t = timespec{2, 0};
  EXPECT_EQ(epoll_timeout_ms(&t), 2000);
  t = timespec{0, 30500000};
  EXPECT_EQ(epoll_timeout_ms(&t), 31);
  t = timespec{0, 0};
  EXPECT_EQ(epoll_timeout_ms(&t), 0);
  t = timespec{4000000, 0};
  EXPECT_EQ(epoll_timeout_ms(&t), INT32_MAX);
  EXPECT_EQ(epoll_timeout_ms(nullptr), -1);
}

TEST(KernelEpoll, WaitsWithTheKernelsOwnCall) { EXPECT_EQ(wait_checks(), 0); }

TEST(KernelEpoll, WaitsWhereTheKernelHasNoEpollPwait2) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (!refuse_epoll_pwait2()) _exit(100);
    // The filter works: the system call itself now fails so.
    timespec zero{0, 0};
    epoll_event got[1];
    int epfd = epoll_create1(0);
    if (syscall(__NR_epoll_pwait2, epfd, got, 1, &zero, nullptr, 0) != -1 || errno != ENOSYS) _exit(101);
    _exit(wait_checks());
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 100) GTEST_SKIP() << "SKIPPED: no seccomp filter could be installed here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the check that failed (1-10 as in wait_checks, 101: the filter)";
}

}  // namespace
}  // namespace vsock::sock
