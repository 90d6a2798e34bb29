#include "sock/dgram/receive_progress.hpp"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <mutex>
#include <new>
#include <thread>

#include "core/clock.hpp"
#include "core/log.hpp"
#include "sock/dgram/datagram_hub.hpp"
#include "sys/real_calls.hpp"
#include "sys/reentry_guard.hpp"

namespace vsock::sock::dgram {
namespace {

// Held by the thread for each tick, and by fork() (pthread_atfork).
std::mutex g_tick_lock;

void lock_for_fork() { g_tick_lock.lock(); }
void unlock_in_parent() { g_tick_lock.unlock(); }
void reset_in_child() { new (&g_tick_lock) std::mutex(); }

// Registered at the first thread's start, after every handler the library
// registers from its constructors: prepare handlers run in reverse order,
// so fork() waits for the tick before it takes any lock a tick may need
// (e.g. the verbs fork guard).
void install_fork_handlers_once() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(lock_for_fork, unlock_in_parent, reset_in_child); });
}

class ProgressLoop {
 public:
  ProgressLoop(DatagramHub* hub, uint32_t tick_us) : hub_(hub), tick_us_(tick_us) {}

  void run() {
    sys::ReentryGuard guard;  // everything this thread calls goes straight to libc
    int idle_ticks = 0;
    uint64_t pause_us = tick_us_;
    uint64_t seen = hub_->endpoint().productive_polls();
    for (;;) {
      bool app_looks = false;
      int took = 0;
      {
        std::lock_guard<std::mutex> tick(g_tick_lock);
        app_looks = hub_->endpoint().productive_polls() != seen;  // it takes arrivals itself
        if (!app_looks) took = drain();
        seen = hub_->endpoint().productive_polls();
      }
      idle_ticks = app_looks || took > 0 ? 0 : idle_ticks + 1;
      if (idle_ticks >= ReceiveProgressTiming::kIdleTicks) {
        while (!sleep_until_event()) {
        }
        idle_ticks = 0;
        pause_us = tick_us_;
        seen = hub_->endpoint().productive_polls();
        continue;
      }
      pause_us = next_pause_us(pause_us, app_looks, took);
      timespec pause{static_cast<time_t>(pause_us / 1'000'000), static_cast<long>(pause_us % 1'000'000) * 1000};
      nanosleep(&pause, nullptr);
    }
  }

 private:
  // While the application takes arrivals itself, tick less often (each
  // wake-up may delay it on its CPU). When the thread took `took` arrivals
  // after a pause of `last_us`, the next pause is the time that rate needs
  // to fill a quarter of the pool (a flood into a receiver that does not
  // read is taken as it comes), at most one tick.
  uint64_t next_pause_us(uint64_t last_us, bool app_looks, int took) const {
    if (app_looks) return std::min<uint64_t>(last_us * 2, uint64_t{tick_us_} * ReceiveProgressTiming::kBusyTickFactor);
    if (took <= 0) return tick_us_;
    const uint64_t quarter_fill_us = last_us * hub_->endpoint().receive_depth() / 4 / static_cast<uint64_t>(took);
    return std::clamp<uint64_t>(quarter_fill_us, ReceiveProgressTiming::kMinPauseUs, tick_us_);
  }

  // Takes everything that is there now, bounded by one pool's worth (more
  // keeps arriving only under a flood, which the next tick takes).
  int drain() {
    const int bound = static_cast<int>(hub_->endpoint().receive_depth());
    int total = 0;
    while (total < bound) {
      int taken = hub_->progress();
      if (taken == 0) break;
      total += taken;
    }
    return total;
  }

  // Sleeps until an event is pending on the completion channel (true: tick
  // again) or kIdleSleepMs passed without one (false: sleep again).
  bool sleep_until_event() {
    UdEndpoint& endpoint = hub_->endpoint();
    {
      std::lock_guard<std::mutex> tick(g_tick_lock);
      if (endpoint.channel_readable()) {
        // An event nobody took. If a sleeper may be about to take it, tick on.
        if (core::monotonic_ms() - endpoint.last_arm_ms() < ReceiveProgressTiming::kArmQuietMs) return true;
        endpoint.drain_events();
      }
      endpoint.arm_for_watcher();
      if (drain() > 0) return true;  // it came before the arm: no event for it
    }
    pollfd channel{endpoint.completion_fd(), POLLIN, 0};
    return sys::real().poll(&channel, 1, ReceiveProgressTiming::kIdleSleepMs) != 0;
  }

  DatagramHub* hub_;
  uint32_t tick_us_;
};

}  // namespace

void start_receive_progress(DatagramHub* hub, uint32_t tick_us) {
  if (tick_us == 0) return;
  install_fork_handlers_once();
  // Never destroyed, as the hub it serves.
  auto* loop = new ProgressLoop(hub, tick_us);
  // The thread takes no signal: the application's handlers run on its own
  // threads, interrupting their calls as the kernel would.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  try {
    std::thread([loop] { loop->run(); }).detach();
  } catch (...) {
    VSOCK_LOG(kInfo, "udp: no receive progress thread: datagrams are taken only inside the application's calls");
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

}  // namespace vsock::sock::dgram
