// Finding and reading the stats segments of this user's libvsock processes
// (core/stats_segment.hpp), and removing those their process left behind.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/stats_segment.hpp"

namespace vsock::tools {

// One process's segment, as read.
struct ProcessStats {
  long pid = 0;
  std::string path;
  core::SegmentSnapshot snapshot;
  // The process published in answer to our request within the wait (false:
  // stopped, busy, or exec'd into a program without the library; what is
  // shown is its last publication).
  bool fresh = false;
};

struct ScanResult {
  std::vector<ProcessStats> processes;  // by pid
  std::vector<std::string> errors;      // segments that could not be read, with why
  int removed_stale = 0;                // segments of dead processes removed
};

// Whether the process that made a segment (pid, start_ticks) is gone: no
// such pid, or a pid reused by a process that started at another time.
bool segment_owner_gone(long pid, uint64_t start_ticks);
// Field 22 of /proc/PID/stat, or 0 if unreadable.
uint64_t process_start_ticks(long pid);

// Reads the segments in `dirs` (every one, or only `only_pid`'s if > 0):
// asks each process for a fresh publication and waits for it at most
// wait_ms (all processes are asked first, then waited for together).
// Removes segments (and half-made temporary files) of dead processes.
ScanResult scan_segments(const std::vector<std::string>& dirs, long only_pid, int wait_ms);

}  // namespace vsock::tools
