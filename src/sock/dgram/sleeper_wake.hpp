// SleeperWake: how a thread asleep on one datagram socket learns that the
// hub put something in that socket's queue, without waking every slice.
//
// Every datagram socket of a process is fed by one UD endpoint, whose one
// completion channel all sleepers watch; the thread that takes its event
// takes the arrivals for every socket (DatagramHub::progress) and may not
// be the thread that waits for them. So each socket has an eventfd, made
// at its first sleep: a sleeper asks for a wake-up (prepare), watches the
// fd beside the kernel socket and the completion channel, and whoever
// queues a datagram for the socket, sets its error or changes its route
// writes the fd once (signal) — a system call only when a sleeper asked.
// The sleeper reads the count away after its look (consume). Without an
// fd (EMFILE), the caller sleeps in slices as before.
#pragma once
#include <atomic>
#include <mutex>

namespace vsock::sock::dgram {

class SleeperWake {
 public:
  SleeperWake() = default;
  ~SleeperWake();
  SleeperWake(const SleeperWake&) = delete;
  SleeperWake& operator=(const SleeperWake&) = delete;

  // Before a sleep, after the spin: the fd to watch (a signal from before
  // read away), with a wake-up asked for; -1 if no fd can be made. The
  // caller looks at the queue once more after this, then sleeps.
  int prepare();
  // Something changed for the socket: wakes a sleeper that asked.
  void signal();
  // After a wake-up: reads away what a signal wrote (no call otherwise).
  void consume();

 private:
  std::mutex make_mu_;
  std::atomic<int> fd_{-1};
  std::atomic<bool> wanted_{false};
  std::atomic<bool> written_{false};
};

}  // namespace vsock::sock::dgram
