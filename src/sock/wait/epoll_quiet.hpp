// Quiet entries of an epoll view (DESIGN decision 6: waits cost O(ready),
// not O(registered)).
//
// A served socket that a look found with nothing to report, and whose
// wake fds report every change but what time brings
// (ManagedSocket::wake_fds_tell_all: a switched stream, whose completion
// channel is armed), becomes quiet: its wake fds go, one-shot, into the
// view's wake set (an epoll fd of the library's own, data = the entry's
// key) and looks leave it out. It is looked at again when
//   - the wake set reports one of its fds (taken on every look that also
//     asks the kernel, and the sleep watches the wake set's fd);
//   - the sweep comes: about every second (setting epoll_sweep_ms; 0:
//     never) each quiet entry's socket is asked for its wake_fds() again
//     (a small batch of them at a time, spread over the period), so
//     probes of idle peers still run (they are due after a second of
//     quiet) and a completion that no event announced (an fd number
//     another entry took in the wake set) is found. No wake-up relies on
//     it otherwise: upgrade_epoll_quiet_device runs without it;
//   - a socket changed route (note_route_changed): a full scan;
//   - a look from outside (observe_view) looked at it;
//   - another wait took a stream's completion event (a poll() on the
//     socket, a blocking call's sleep, another epoll set: the event that
//     was to wake a quiet entry may be gone): every quiet entry, on the
//     next look (managed_socket.hpp, wake_events_taken).
// Sockets in transition, datagram sockets (their completion fd is the
// process's, its events taken by any waiter) and orphans never go quiet.
//
// All under the view's lock.
#pragma once
#include <cstdint>

#include "sock/wait/epoll_view.hpp"

namespace vsock::sock {

class SleepSet;

// How long a socket that a spin keeps finding idle stays looked at before
// the spin makes it quiet (a sleep makes it quiet at once).
inline constexpr int64_t kSpinQuietAfterMs = 50;

// What try_quiet() did with an entry.
enum class QuietOutcome {
  kQuiet,  // quiet now
  kAwake,  // stays awake (not fit to be quiet: in transition, ...)
  // Stays awake and must be looked at before anything sleeps: asking for
  // its wake fds moved the socket on (it took a completion that had come,
  // with perhaps the data a look would report; a resume began), or the
  // socket, armed now, has news its last look did not see (the side-band
  // thread took data into the ring or switched it: ready_now()). Going
  // quiet now would leave news that no event will announce again.
  kLookAgain,
};

// After a look that found nothing to report: makes the entry quiet if its
// socket allows (arming its wake fds); else, if `sleep` is given, adds
// them to it as a sleeper must watch them (kLookAgain makes that sleep
// return at once).
QuietOutcome try_quiet(EpollView& view, int key, EpollEntry& entry, ManagedSocket* socket, SleepSet* sleep);

// The entries whose wake fds fired are awake again. A system call when
// any entry is quiet. (The caller has called forget_wake_set_if_forked.)
void wake_fired(EpollView& view);

// Every quiet entry is awake again (another wait may have taken the
// completion event that was to wake one).
void wake_all_quiet(EpollView& view);

// When the sweep is due: the next batch of quiet entries gets its
// wake_fds() again (probes, re-arm); those that had a completion waiting,
// or are no longer fit to be quiet, are awake again, the others stay
// quiet.
void sweep_quiet(EpollView& view, int64_t now_ms);

// What a sleeper must add for the quiet entries: the wake set's fd (-1:
// none quiet) and, in *slice_ms, how long until the sweep.
int quiet_wake_fd(const EpollView& view, int64_t now_ms, int* slice_ms);

// After a fork the wake set is shared with the other process (one-shot
// events one takes the other misses): this process makes its own, and
// every entry is looked at again.
void forget_wake_set_if_forked(EpollView& view);

}  // namespace vsock::sock
