// Small writes held back (Nagle, autocork) must not wait for the
// application's next call: the side-band thread posts them once the
// completion they wait for has come (UpgradeEngine::check_timers). This is
// how a writer tells that thread which stream to look at, without a system
// call per write: a stream notes once, until the thread has seen it hold
// nothing again (StreamSocket::held_noted_).
#pragma once

namespace vsock::sock {

class StreamSocket;

using HeldDataWaker = void (*)(void* context, StreamSocket* stream);

// The engine, when its thread starts (nullptr: nobody to wake, e.g. in a
// child of fork()).
void set_held_data_waker(HeldDataWaker waker, void* context);
// A writer left bytes held on `stream` (its lock held): tells the thread.
void note_held_data(StreamSocket* stream);

}  // namespace vsock::sock
