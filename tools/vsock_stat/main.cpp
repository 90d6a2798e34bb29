// vsock-stat: live counters of this user's libvsock processes, read from
// the stats segments the library publishes (core/stats_segment.hpp).
// Usage and exit status: docs/man/vsock-stat.1.
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/stats_segment.hpp"
#include "tools/vsock_stat/segment_scan.hpp"
#include "tools/vsock_stat/stat_json.hpp"
#include "tools/vsock_stat/stat_text.hpp"

namespace {

constexpr int kExitShown = 0;
constexpr int kExitNone = 1;
constexpr int kExitUsage = 2;

struct Options {
  long pid = 0;
  double interval_s = 1.0;
  long count = 0;  // 0: until interrupted
  bool json = false;
  int wait_ms = 500;
};

void usage(FILE* to) {
  std::fprintf(to,
               "usage: vsock-stat [-p PID] [-i SECS] [-n COUNT] [--once] [--json] [-w MS]\n"
               "  -p, --pid PID       only this process\n"
               "  -i, --interval SECS refresh every SECS seconds (default 1)\n"
               "  -n, --count COUNT   stop after COUNT refreshes (default: until interrupted)\n"
               "      --once          one refresh (-n 1)\n"
               "      --json          one JSON document per refresh\n"
               "  -w, --wait MS       wait at most MS ms for each process to publish (default 500)\n"
               "exit status: 0 shown, 1 no libvsock process found, 2 usage error\n");
}

[[noreturn]] void usage_error(const std::string& why) {
  std::fprintf(stderr, "vsock-stat: %s\n", why.c_str());
  usage(stderr);
  std::exit(kExitUsage);
}

double number(const char* flag, const char* text, double min, double max) {
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(value >= min && value <= max))
    usage_error(std::string(flag) + " expects a number in " + std::to_string(min) + ".." + std::to_string(max) +
                ", not '" + text + "'");
  return value;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      usage(stdout);
      std::exit(kExitShown);
    }
    if (flag == "--once") {
      o.count = 1;
      continue;
    }
    if (flag == "--json") {
      o.json = true;
      continue;
    }
    if (i + 1 >= argc) usage_error(flag + " needs a value");
    const char* value = argv[++i];
    if (flag == "-p" || flag == "--pid")
      o.pid = static_cast<long>(number("-p", value, 1, 4194304));
    else if (flag == "-i" || flag == "--interval")
      o.interval_s = number("-i", value, 0.1, 3600);
    else if (flag == "-n" || flag == "--count")
      o.count = static_cast<long>(number("-n", value, 1, 1e9));
    else if (flag == "-w" || flag == "--wait")
      o.wait_ms = static_cast<int>(number("-w", value, 0, 60000));
    else
      usage_error("unknown option " + flag);
  }
  return o;
}

int64_t unix_ns() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  const auto dirs = vsock::core::segment_directories(std::getenv("XDG_RUNTIME_DIR"), ::getuid());
  const bool terminal = !options.json && isatty(STDOUT_FILENO) && options.count != 1;
  int status = kExitNone;
  for (long round = 0; options.count == 0 || round < options.count; ++round) {
    if (round > 0) {
      double whole = 0;
      double fraction = modf(options.interval_s, &whole);
      timespec pause{static_cast<time_t>(whole), static_cast<long>(fraction * 1e9)};
      while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
      }
    }
    vsock::tools::ScanResult scan = vsock::tools::scan_segments(dirs, options.pid, options.wait_ms);
    std::string text = options.json ? vsock::tools::render_json(scan, unix_ns())
                                    : vsock::tools::render_text(scan, unix_ns());
    if (terminal) std::fputs("\033[H\033[2J", stdout);  // like top: the screen holds the latest refresh
    else if (round > 0 && !options.json) std::fputs("\n", stdout);
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    status = scan.processes.empty() ? kExitNone : kExitShown;
    if (scan.processes.empty() && options.count == 1) {
      if (options.pid > 0)
        std::fprintf(stderr, "vsock-stat: no stats segment for pid %ld (not running libvsock, VSOCK_STATS_SHM=0, "
                             "another user's, or no socket yet)\n", options.pid);
      else
        std::fprintf(stderr, "vsock-stat: no libvsock process of this user publishes stats (looked in %s)\n",
                     [&] {
                       std::string all;
                       for (const auto& d : dirs) all += (all.empty() ? "" : ", ") + d;
                       return all;
                     }().c_str());
    }
  }
  return status;
}
