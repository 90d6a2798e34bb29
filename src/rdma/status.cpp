#include "rdma/status.hpp"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "core/log.hpp"

namespace vsock::rdma {

int report_error(int error, const char* format, ...) {
  if (error <= 0) error = EIO;
  if (!core::log_enabled(core::LogLevel::kError)) return error;
  char what[256];
  va_list args;
  va_start(args, format);
  std::vsnprintf(what, sizeof what, format, args);
  va_end(args);
  // strerrordesc_np: thread-safe and allocation-free, unlike strerror().
  const char* text = strerrordesc_np(error);
  core::log_message(core::LogLevel::kError, "rdma: %s: %s (errno %d)", what, text ? text : "unknown error", error);
  return error;
}

}  // namespace vsock::rdma
