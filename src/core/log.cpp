#include "core/log.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace vsock::core {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};
std::atomic<int> g_fd{2};

// Raw system calls: the library's own write/close are interposed symbols.
void raw_write_all(int fd, const char* data, size_t len) {
  while (len > 0) {
    long n = ::syscall(SYS_write, fd, data, len);
    if (n <= 0) return;
    data += n;
    len -= static_cast<size_t>(n);
  }
}

// A stderr that is a network connection belongs to the application's peer:
// inetd hands its services the connection as stdin, stdout and stderr, and
// a log line there would be bytes in the application's stream. (A unix
// socket, journald's, is a log.)
bool is_network_socket(int fd) {
  struct stat st{};
  if (::syscall(SYS_fstat, fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  int domain = 0;
  socklen_t len = sizeof domain;
  if (::syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) return false;
  return domain == AF_INET || domain == AF_INET6;
}

// Where a line goes: the log file, or stderr unless that is a network
// connection (then nowhere: docs/configuration.md, log_file).
void write_line(const char* data, size_t len) {
  const int fd = g_fd.load();
  if (fd == 2 && is_network_socket(fd)) return;
  raw_write_all(fd, data, len);
}

}  // namespace

bool parse_log_level(std::string_view text, LogLevel* out) {
  static constexpr const char* kNames[] = {"error", "warn", "info", "debug", "trace"};
  for (int i = 0; i < 5; ++i) {
    if (text == kNames[i] || (text.size() == 1 && text[0] == '0' + i)) {
      *out = static_cast<LogLevel>(i);
      return true;
    }
  }
  return false;
}

const char* log_level_name(LogLevel level) {
  static constexpr const char* kNames[] = {"error", "warn", "info", "debug", "trace"};
  return kNames[static_cast<int>(level)];
}

bool log_open_file(const char* path) {
  if (path == nullptr || path[0] == '\0' || std::strcmp(path, "stderr") == 0) {
    g_fd.store(2);
    return true;
  }
  long fd = ::syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  int old = g_fd.exchange(static_cast<int>(fd));
  if (old != 2) ::syscall(SYS_close, old);
  return true;
}

void log_set_level(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool log_enabled(LogLevel level) { return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed); }

void log_write_line(const char* text, size_t len) { write_line(text, len); }

void log_message(LogLevel level, const char* format, ...) {
  char line[1024];
  int head = std::snprintf(line, sizeof line, "libvsock[%ld]: %s: ", static_cast<long>(::syscall(SYS_getpid)),
                           log_level_name(level));
  if (log_enabled(LogLevel::kDebug)) {
    // With debug logging on, every line carries the monotonic clock (s.µs):
    // the lines are read to see what took how long, across processes (the
    // failure tests time a resume from the fault to these lines).
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    head += std::snprintf(line + head, sizeof line - head, "[%ld.%06ld] ", static_cast<long>(now.tv_sec),
                          now.tv_nsec / 1000);
  }
  va_list args;
  va_start(args, format);
  int body = std::vsnprintf(line + head, sizeof line - head - 1, format, args);
  va_end(args);
  size_t len = static_cast<size_t>(head) + (body < 0 ? 0 : static_cast<size_t>(body));
  if (len > sizeof line - 2) len = sizeof line - 2;
  line[len++] = '\n';
  write_line(line, len);
}

}  // namespace vsock::core
