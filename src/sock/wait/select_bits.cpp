#include "sock/wait/select_bits.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace vsock::sock {
namespace {

constexpr int kBitsPerWord = CHAR_BIT * sizeof(unsigned long);

// The size of the kernel's fd table ("FDSize:" in /proc/self/status), or
// INT_MAX if it cannot be read. Raw system calls: the library must not
// call interposed functions by name.
int read_fd_table_size() {
  int fd = static_cast<int>(::syscall(SYS_openat, AT_FDCWD, "/proc/self/status", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return INT_MAX;
  char text[4096];
  ssize_t n = ::syscall(SYS_read, fd, text, sizeof text - 1);
  ::syscall(SYS_close, fd);
  if (n <= 0) return INT_MAX;
  text[n] = '\0';
  const char* field = std::strstr(text, "\nFDSize:");
  if (field == nullptr) return INT_MAX;
  long size = std::strtol(field + 8, nullptr, 10);
  return size > 0 && size < INT_MAX ? static_cast<int>(size) : INT_MAX;
}

// The table only grows: a cached size is a lower bound, re-read only when
// a select reaches past it.
std::atomic<int> g_fd_table_size{0};

}  // namespace

int select_fd_limit(int nfds) {
  int size = g_fd_table_size.load(std::memory_order_relaxed);
  if (nfds <= size) return nfds;
  size = read_fd_table_size();
  g_fd_table_size.store(size, std::memory_order_relaxed);
  return nfds < size ? nfds : size;
}

bool fd_bit(const fd_set* set, int fd) {
  const auto* words = reinterpret_cast<const unsigned long*>(set);
  return (words[fd / kBitsPerWord] >> (fd % kBitsPerWord)) & 1UL;
}

void put_fd_bit(fd_set* set, int fd, bool on) {
  auto* words = reinterpret_cast<unsigned long*>(set);
  unsigned long bit = 1UL << (fd % kBitsPerWord);
  if (on) words[fd / kBitsPerWord] |= bit;
  else words[fd / kBitsPerWord] &= ~bit;
}

}  // namespace vsock::sock
