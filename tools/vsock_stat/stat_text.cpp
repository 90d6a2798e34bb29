#include "tools/vsock_stat/stat_text.hpp"

#include <cstdarg>
#include <cstdio>
#include <ctime>

#include "tools/vsock_stat/process_totals.hpp"

namespace vsock::tools {
namespace {

std::string format(const char* pattern, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* pattern, ...) {
  char line[512];
  va_list args;
  va_start(args, pattern);
  std::vsnprintf(line, sizeof line, pattern, args);
  va_end(args);
  return line;
}

std::string seconds_text(int64_t ns) {
  if (ns < 0) ns = 0;
  return format("%.1f s", static_cast<double>(ns) / 1e9);
}

void append_process(std::string& out, const ProcessStats& p, int64_t now_unix_ns) {
  const core::SegmentSnapshot& s = p.snapshot;
  const ProcessTotals t = process_totals(s);
  out += format("pid %ld  %s  profile %s  libvsock %s  up %s  %s\n", p.pid, fixed_text(s.header.program).c_str(),
                fixed_text(s.header.profile).c_str(), fixed_text(s.header.library_version).c_str(),
                seconds_text(now_unix_ns - s.header.created_unix_ns).c_str(),
                p.fresh ? "live" : ("not answering; as of " + seconds_text(now_unix_ns - s.info.published_unix_ns) +
                                    " ago").c_str());
  out += format("  rdma    sent %8sB %8s msgs   received %8sB %8s msgs\n", short_count(t.rdma_bytes_sent).c_str(),
                short_count(t.rdma_messages_sent).c_str(), short_count(t.rdma_bytes_received).c_str(),
                short_count(t.rdma_messages_received).c_str());
  out += format("  kernel  sent %8sB %8s msgs   received %8sB %8s msgs\n", short_count(t.kernel_bytes_sent).c_str(),
                short_count(t.kernel_messages_sent).c_str(), short_count(t.kernel_bytes_received).c_str(),
                short_count(t.kernel_messages_received).c_str());
  std::string reasons;
  for (const auto& [reason, count] : t.fallbacks)
    if (count != 0) reasons += format(" %s=%llu", reason.c_str(), static_cast<unsigned long long>(count));
  out += format("  upgrades %llu of %llu attempted, %llu reset; on the kernel by reason:%s\n",
                static_cast<unsigned long long>(t.upgrades_done), static_cast<unsigned long long>(t.upgrade_attempts),
                static_cast<unsigned long long>(t.upgrade_resets), reasons.empty() ? " none" : reasons.c_str());
  out += format("  parked channels %llu (kept for the next connection to the same peer)\n",
                static_cast<unsigned long long>(counter_value(s, "parked_now")));
  out += format("  sockets %u", s.info.sockets_seen);
  if (s.rows.size() < s.info.sockets_seen) out += format(" (first %zu listed)", s.rows.size());
  out += "\n";
  if (s.rows.empty()) return;
  out += format("  %5s %-4s %-8s %-23s %-23s %-9s %-15s %7s %7s %7s %7s %7s %6s\n", "FD", "PROT", "ROLE", "LOCAL",
                "PEER", "PATH", "WHY", "TCP-TX", "TCP-RX", "RDMA-TX", "RDMA-RX", "INFLT", "STALLS");
  for (const core::SocketRecord& r : s.rows)
    out += format("  %5d %-4s %-8s %-23s %-23s %-9s %-15s %7s %7s %7s %7s %7s %6s\n", r.fd, protocol_name(r.protocol),
                  role_name(r.role), endpoint_text(r.family, r.local_addr, r.local_port).c_str(),
                  endpoint_text(r.family, r.peer_addr, r.peer_port).c_str(),
                  core::socket_path_name(static_cast<core::SocketPath>(r.path)),
                  core::kernel_why_name(static_cast<core::KernelWhy>(r.why)), short_count(r.tcp_bytes_sent).c_str(),
                  short_count(r.tcp_bytes_received).c_str(), short_count(r.rdma_bytes_sent).c_str(),
                  short_count(r.rdma_bytes_received).c_str(), short_count(r.rdma_in_flight).c_str(),
                  short_count(r.credit_stalls).c_str());
}

}  // namespace

std::string short_count(uint64_t value) {
  if (value < 10'000) return std::to_string(value);
  const char* units = "kMGTPE";
  double scaled = static_cast<double>(value);
  int unit = -1;
  while (scaled >= 1000 && unit < 5) {
    scaled /= 1000;
    ++unit;
  }
  return format(scaled < 100 ? "%.1f%c" : "%.0f%c", scaled, units[unit]);
}

std::string render_text(const ScanResult& scan, int64_t now_unix_ns) {
  std::string out;
  time_t now = static_cast<time_t>(now_unix_ns / 1'000'000'000);
  tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &local);
  out += format("vsock-stat %s: %zu libvsock process%s\n", stamp, scan.processes.size(),
                scan.processes.size() == 1 ? "" : "es");
  for (const ProcessStats& p : scan.processes) append_process(out, p, now_unix_ns);
  for (const std::string& error : scan.errors) out += "  cannot read " + error + "\n";
  return out;
}

}  // namespace vsock::tools
