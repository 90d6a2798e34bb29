#include "tools/vsock_stat/segment_scan.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace vsock::tools {
namespace {

struct Mapped {
  long pid = 0;
  std::string path;
  void* base = nullptr;
  size_t size = 0;
  uint64_t count_before = 0;
};

int64_t monotonic_ms() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1000 + now.tv_nsec / 1'000'000;
}

// "PID" of ".PID.stat.new" (a publisher's temporary file), or -1.
long temporary_file_pid(const char* name) {
  if (name[0] != '.') return -1;
  std::string rest(name + 1);
  const std::string suffix = ".new";
  if (rest.size() <= suffix.size() || rest.compare(rest.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  return core::segment_file_pid(rest.substr(0, rest.size() - suffix.size()).c_str());
}

// Maps `path` read-write (a request is a write). An error text, or "".
std::string map_segment(const std::string& path, Mapped* out) {
  int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::strerror(errno);
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return "not a regular file";
  }
  if (st.st_uid != ::getuid()) {
    ::close(fd);
    return "owned by another user";
  }
  if (st.st_size < static_cast<off_t>(sizeof(core::SegmentHeader))) {
    ::close(fd);
    return "too short for a stats segment";
  }
  void* base = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int error = errno;
  ::close(fd);
  if (base == MAP_FAILED) return std::strerror(error);
  out->base = base;
  out->size = static_cast<size_t>(st.st_size);
  std::string why = core::segment_check(base, out->size);
  if (!why.empty()) {
    ::munmap(base, out->size);
    out->base = nullptr;
  }
  return why;
}

}  // namespace

uint64_t process_start_ticks(long pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[1024];
  ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  const char* p = std::strrchr(text, ')');
  for (int field = 2; field < 22 && p != nullptr; ++field) p = std::strchr(p + 1, ' ');
  return p != nullptr ? std::strtoull(p + 1, nullptr, 10) : 0;
}

bool segment_owner_gone(long pid, uint64_t start_ticks) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return true;
  uint64_t now = process_start_ticks(pid);
  return now != 0 && start_ticks != 0 && now != start_ticks;
}

ScanResult scan_segments(const std::vector<std::string>& dirs, long only_pid, int wait_ms) {
  ScanResult result;
  std::vector<Mapped> mapped;
  for (const std::string& dir : dirs) {
    DIR* listing = ::opendir(dir.c_str());
    if (listing == nullptr) continue;
    while (dirent* entry = ::readdir(listing)) {
      const std::string path = dir + "/" + entry->d_name;
      if (long pid = temporary_file_pid(entry->d_name); pid > 0) {
        // A publisher that died between creating and renaming its file.
        if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH && ::unlink(path.c_str()) == 0)
          ++result.removed_stale;
        continue;
      }
      long pid = core::segment_file_pid(entry->d_name);
      if (pid <= 0) continue;
      Mapped m;
      m.pid = pid;
      m.path = path;
      std::string why = map_segment(path, &m);
      if (!why.empty()) {
        // Unreadable, and its process is gone: nothing will ever read it.
        if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH && ::unlink(path.c_str()) == 0)
          ++result.removed_stale;
        else if (only_pid <= 0 || only_pid == pid)
          result.errors.push_back(path + ": " + why);
        continue;
      }
      const auto* header = static_cast<const core::SegmentHeader*>(m.base);
      if (segment_owner_gone(pid, header->start_ticks)) {
        if (::unlink(path.c_str()) == 0) ++result.removed_stale;
        ::munmap(m.base, m.size);
        continue;
      }
      if (only_pid > 0 && pid != only_pid) {
        ::munmap(m.base, m.size);
        continue;
      }
      m.count_before = core::segment_publish_count(m.base);
      core::segment_request(m.base);
      mapped.push_back(std::move(m));
    }
    ::closedir(listing);
  }
  // Wait (bounded) until each asked process has published once more.
  const int64_t deadline = monotonic_ms() + wait_ms;
  std::vector<bool> fresh(mapped.size(), false);
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < mapped.size(); ++i) {
      if (!fresh[i]) fresh[i] = core::segment_publish_count(mapped[i].base) > mapped[i].count_before;
      all = all && fresh[i];
    }
    if (all || monotonic_ms() >= deadline) break;
    timespec pause{0, 2'000'000};
    nanosleep(&pause, nullptr);
  }
  for (size_t i = 0; i < mapped.size(); ++i) {
    ProcessStats stats;
    stats.pid = mapped[i].pid;
    stats.path = mapped[i].path;
    stats.fresh = fresh[i];
    if (core::segment_read(mapped[i].base, mapped[i].size, &stats.snapshot))
      result.processes.push_back(std::move(stats));
    else
      result.errors.push_back(mapped[i].path + ": no consistent copy (the publisher kept writing)");
    ::munmap(mapped[i].base, mapped[i].size);
  }
  std::sort(result.processes.begin(), result.processes.end(),
            [](const ProcessStats& a, const ProcessStats& b) {
              if (a.pid != b.pid) return a.pid < b.pid;
              return a.snapshot.header.created_unix_ns > b.snapshot.header.created_unix_ns;
            });
  // The same pid in two directories (its environment changed between two
  // programs exec'd under one pid): the newer segment only.
  auto same = std::unique(result.processes.begin(), result.processes.end(),
                          [](const ProcessStats& a, const ProcessStats& b) { return a.pid == b.pid; });
  result.processes.erase(same, result.processes.end());
  return result;
}

}  // namespace vsock::tools
