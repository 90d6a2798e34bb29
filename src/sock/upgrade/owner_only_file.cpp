#include "sock/upgrade/owner_only_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

namespace vsock::sock::owner_only {

void* map(int fd, size_t size, bool fresh, struct stat* status) {
  if (fresh && ::ftruncate(fd, static_cast<off_t>(size)) != 0) return nullptr;
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0 ||
      st.st_size != static_cast<off_t>(size))
    return nullptr;
  void* mapped = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapped == MAP_FAILED) return nullptr;
  if (status != nullptr) *status = st;
  return mapped;
}

int open_published(const char* name) { return ::open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC); }

int create(const char* temporary) {
  return ::open(temporary, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

int publish(const char* temporary, const char* name) {
  const int error = ::link(temporary, name) == 0 ? 0 : errno;
  ::unlink(temporary);
  return error;
}

}  // namespace vsock::sock::owner_only
