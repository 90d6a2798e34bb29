#include "sock/wait/signal_restart.hpp"

#include <signal.h>

namespace vsock::sock {

bool handlers_restart_calls() {
  for (int signo = 1; signo < NSIG; ++signo) {
    struct sigaction action;
    if (sigaction(signo, nullptr, &action) != 0) continue;  // not a signal number (32, 33: libc's)
    const bool handled = (action.sa_flags & SA_SIGINFO) != 0 ||
                         (action.sa_handler != SIG_DFL && action.sa_handler != SIG_IGN);
    if (handled && (action.sa_flags & SA_RESTART) == 0) return false;
  }
  return true;
}

}  // namespace vsock::sock
