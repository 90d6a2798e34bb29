// ReceiveProgress: the thread that keeps the process's UD receive pool
// drained while no application thread looks at it, so that a receiver
// busy elsewhere loses no datagram its sockets' budgets (SO_RCVBUF) would
// hold — as the kernel queues datagrams for a socket nobody reads.
//
// Without it, arrivals are taken only inside application calls (recv,
// poll, epoll: DatagramHub::progress()); a UD queue pair with no posted
// buffer drops what comes, without a word. The pool (udp_receive_buffers)
// absorbs what arrives between two looks; this thread bounds the time
// between looks to one tick (udp_progress_us).
//
// Each tick: if an application thread took completions since the last
// tick, nothing to do (it is looking) and the next tick comes later (the
// pause doubles up to kBusyTickFactor ticks: each wake-up may delay the
// application on its CPU); else the thread takes what came and delivers
// it to the sockets' queues. Its next pause is then the time the rate it
// just saw needs to fill a quarter of the pool (at least kMinPauseUs, at
// most one tick), so a flood into a receiver that does not read is taken
// as it comes. The thread never takes a
// completion-channel event on a path a sleeper may rely on: a completion
// raises its event whoever polls it, so a sleeping application thread
// still wakes, and finds the datagram in its queue.
//
// Idle: after kIdleTicks ticks in which nothing came, the thread sleeps on
// the completion channel instead of ticking (an idle process makes no
// wake-ups). It arms the CQ and sleeps until an event is pending, and goes
// back to ticking when one is; it never consumes that event, which is the
// application's sleepers' to take. A stale event that no sleeper took (the
// application polls without sleeping) is drained by the thread only when
// no thread has armed the CQ for kArmQuietMs; should a sleeper still be
// waiting on it (sleeps have no slice), the thread arms again and takes
// what came at once, and each arrival wakes its socket's sleeper through
// the socket's own fd (sleeper_wake.hpp).
//
// fork(): the thread finishes its tick before the fork (pthread_atfork), so
// no socket lock it takes is copied held into the child; the child has no
// such thread until it makes its own hub.
#pragma once
#include <cstdint>

namespace vsock::sock::dgram {

class DatagramHub;

struct ReceiveProgressTiming {
  static constexpr int kIdleTicks = 64;
  // At most this many ticks between two looks while the application looks
  // itself: a pool of udp_receive_buffers must hold what arrives in that
  // time after it stops (2,048 buffers: 16 ms at 128,000 datagrams/s).
  static constexpr uint32_t kBusyTickFactor = 4;
  static constexpr uint64_t kMinPauseUs = 50;
  static constexpr int64_t kArmQuietMs = 250;
  static constexpr int kIdleSleepMs = 1000;  // re-checked after this, even without an event
};

// Starts the thread for `hub`, ticking every `tick_us` µs (0: no thread:
// arrivals are taken only inside application calls). Logs at info level
// when the thread cannot start.
void start_receive_progress(DatagramHub* hub, uint32_t tick_us);

}  // namespace vsock::sock::dgram
