#include "sock/upgrade/process_liveness.hpp"

#include <fcntl.h>
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "sys/real_calls.hpp"

namespace vsock::sock {

bool process_alive(uint32_t pid) {
  if (pid == 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  // /proc/PID/stat: "pid (comm) S ...": the state follows the last ')'.
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%u/stat", pid);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;  // no /proc: trust kill()
  char buffer[512];
  ssize_t n = sys::real().read(fd, buffer, sizeof buffer - 1);
  sys::real().close(fd);
  if (n <= 0) return true;
  buffer[n] = '\0';
  const char* end = std::strrchr(buffer, ')');
  return end == nullptr || end[1] == '\0' || end[2] != 'Z';
}

}  // namespace vsock::sock
