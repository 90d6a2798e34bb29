#include "core/small_file.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace vsock::core {

bool read_small_file(const char* path, std::string* out) {
  long fd = ::syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  long n;
  while ((n = ::syscall(SYS_read, fd, buf, sizeof buf)) > 0 && out->size() < (1u << 20))
    out->append(buf, static_cast<size_t>(n));
  ::syscall(SYS_close, fd);
  return n >= 0;
}

}  // namespace vsock::core
