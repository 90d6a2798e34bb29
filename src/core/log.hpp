// Logging: one line per message, "libvsock[pid]: level: text", written with
// a raw write(2) system call so it never re-enters the interposed write().
#pragma once
#include <cstddef>
#include <string_view>

namespace vsock::core {

enum class LogLevel { kError = 0, kWarn, kInfo, kDebug, kTrace };

// Parses "error|warn|info|debug|trace" or a digit 0-4; false if neither.
bool parse_log_level(std::string_view text, LogLevel* out);
const char* log_level_name(LogLevel level);

// Sends further messages to `path` (appended; "" or "stderr" = stderr).
// Returns false and keeps stderr if the file cannot be opened.
bool log_open_file(const char* path);
void log_set_level(LogLevel level);
bool log_enabled(LogLevel level);
// Writes one preformatted line to the log destination, whatever the level.
// Lines for stderr are dropped while stderr is a TCP/UDP socket (an inetd
// service's connection): the library never writes into the application's
// stream.
void log_write_line(const char* text, size_t len);
void log_message(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace vsock::core

#define VSOCK_LOG(level, ...)                                                 \
  do {                                                                        \
    if (::vsock::core::log_enabled(::vsock::core::LogLevel::level))           \
      ::vsock::core::log_message(::vsock::core::LogLevel::level, __VA_ARGS__); \
  } while (0)
