#include "sock/stream/stream_wait.hpp"

#include <poll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include "core/clock.hpp"
#include "sock/wait/spin_budget.hpp"

namespace vsock::sock {
namespace {

// One progress() step; true when the wait is over (ready or failed).
core::Result<bool> step(StreamChannel& channel, WaitPredicate ready, void* context) {
  core::Result<int> progressed = channel.progress();
  if (!progressed) return core::Result<bool>::fail(progressed.error());
  return core::Result<bool>::ok(channel.error() != 0 || ready(channel, context));
}

}  // namespace

core::Result<bool> wait_until(StreamChannel& channel, WaitPredicate ready, void* context, int timeout_ms,
                              uint32_t spin_us) {
  using R = core::Result<bool>;
  const int64_t start = core::monotonic_us();
  const int64_t deadline = timeout_ms < 0 ? INT64_MAX : start + int64_t{timeout_ms} * 1000;
  // The caller waits: what coalescing holds goes now (it may be what the
  // peer needs to answer).
  channel.flush();

  // 1. Spin (SpinBudget: at most spin_us, never past the deadline).
  SpinBudget spin(spin_us, deadline == INT64_MAX ? -1 : deadline);
  do {
    core::Result<bool> done = step(channel, ready, context);
    if (!done || done.value()) return done;
  } while (spin.next());
  if (core::monotonic_us() >= deadline) return R::ok(false);  // timeout 0: no arm either

  // 2 and 3. Arm, poll once more, sleep; repeat.
  for (;;) {
    rdma::Status armed = channel.arm();
    if (!armed) return R::fail(armed.error());
    core::Result<bool> done = step(channel, ready, context);
    if (!done || done.value()) return done;

    int64_t now = core::monotonic_us();
    if (now >= deadline) return R::ok(false);
    int64_t left_ms = (deadline - now + 999) / 1000;
    int slice = left_ms < kWaitSliceMs ? static_cast<int>(left_ms) : kWaitSliceMs;
    pollfd pfd{channel.completion_fd(), POLLIN, 0};
    timespec timeout{slice / 1000, (slice % 1000) * 1000000L};
    long n = ::syscall(SYS_ppoll, &pfd, 1, &timeout, nullptr, 0);
    if (n < 0) return R::fail(errno);  // EINTR included: the caller decides about restarting
    if (n == 0) {
      channel.note_idle(slice);
      continue;  // the CQ is still armed; arming again is harmless
    }
    core::Result<int> drained = channel.take_event();
    if (!drained) return R::fail(drained.error());
    // The event disarmed the CQ. Poll before arming again: the completion
    // that woke us is usually the one we wait for, and arming is a system
    // call on some providers (rxe).
    done = step(channel, ready, context);
    if (!done || done.value()) return done;
  }
}

}  // namespace vsock::sock
