// Small writes held back (Nagle, autocork) must not wait for the
// application's next call: the side-band thread posts them once the
// completion they wait for has come (UpgradeEngine::check_timers). This is
// how a writer tells that thread to look, without a system call per write:
// only the first note after the thread's last look wakes it.
#pragma once

namespace vsock::sock {

using HeldDataWaker = void (*)(void* context);

// The engine, when its thread starts (nullptr: nobody to wake, e.g. in a
// child of fork()).
void set_held_data_waker(HeldDataWaker waker, void* context);
// A writer left bytes held: wakes the thread unless it already knows.
void note_held_data();
// The thread, before it looks at every socket: later notes wake it again.
void clear_held_data_note();

}  // namespace vsock::sock
