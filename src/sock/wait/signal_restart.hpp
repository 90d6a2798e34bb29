// Whether a blocking socket call the library waits in should restart after
// a signal handler ran, as the kernel restarts it for a handler installed
// with SA_RESTART (signal(7)). The library sleeps in poll(), which the
// kernel never restarts, and cannot tell which signal interrupted it; so it
// restarts only if every installed handler has SA_RESTART. Mixed handlers
// give EINTR, which is always a legal answer of the call.
#pragma once

namespace vsock::sock {

bool handlers_restart_calls();

}  // namespace vsock::sock
