#include "cm_test_support.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/log.hpp"

namespace vsock::test {

std::string rdma_test_address() {
  const char* vm = getenv("RXE_VM_IPADDR");
  if (vm && *vm) return vm;
  const char* configured = getenv("VSOCK_TEST_RDMA_ADDR");
  return configured && *configured ? configured : "";
}

bool make_address(const std::string& ip, uint16_t port, sockaddr_storage* out) {
  *out = sockaddr_storage{};
  auto* in = reinterpret_cast<sockaddr_in*>(out);
  in->sin_family = AF_INET;
  in->sin_port = htons(port);
  return inet_pton(AF_INET, ip.c_str(), &in->sin_addr) == 1;
}

rdma::CmQpSetup CmSide::setup() const {
  rdma::CmQpSetup setup;
  setup.device = &device;
  setup.pd = &pd;
  setup.send_cq = &cq;
  setup.recv_cq = &cq;
  setup.config.max_send_wr = 16;
  setup.config.max_recv_wr = 16;
  setup.config.max_inline_data = 64;
  setup.config.remote_access = IBV_ACCESS_REMOTE_WRITE;
  return setup;
}

int open_cm_side(const char* program, CmSide* side) {
  // The library reads VSOCK_LOG_LEVEL through its configuration, which a
  // test program does not load: honour it here (e.g. debug, for rdma_cm's
  // QP attributes).
  const char* level_text = getenv("VSOCK_LOG_LEVEL");
  core::LogLevel level;
  if (level_text && core::parse_log_level(level_text, &level)) core::log_set_level(level);
  int exit_code = 0;
  core::Result<rdma::Device> device = open_test_device(program, &exit_code);
  if (!device) return exit_code;
  side->device = std::move(device.value());
  auto pd = rdma::ProtectionDomain::create(side->device);
  auto cq = pd ? rdma::CompletionQueue::create(side->device, 64, true) : core::Result<rdma::CompletionQueue>::fail(EIO);
  auto channel = cq ? rdma::CmEventChannel::create() : core::Result<rdma::CmEventChannel>::fail(EIO);
  if (!channel) {
    fprintf(stderr, "%s: FAILED: PD, CQ or rdma_cm channel\n", program);
    return 1;
  }
  side->pd = std::move(pd.value());
  side->cq = std::move(cq.value());
  side->channel = std::move(channel.value());
  return 0;
}

bool next_cm_event(rdma::CmEventChannel& channel, int timeout_ms, rdma::CmEvent* out, const char* what) {
  Deadline deadline(timeout_ms / 1000.0);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    core::Result<rdma::CmEvent> event = channel.next_event(deadline.remaining_ms(1000));
    if (event) {
      *out = event.value();
      return true;
    }
    if (event.error() != EAGAIN && event.error() != EINTR) {
      fprintf(stderr, "waiting for %s: next_event: %s\n", what, strerror(event.error()));
      return false;
    }
    if (deadline.expired()) break;
  }
  fprintf(stderr, "timeout (%d ms) waiting for %s\n", timeout_ms, what);
  return false;
}

bool wait_cm_event(rdma::CmEventChannel& channel, rdma_cm_id* id, rdma_cm_event_type type, int timeout_ms,
                   rdma::CmEvent* out) {
  Deadline deadline(timeout_ms / 1000.0);
  for (int seen = 0; seen < 64; ++seen) {
    if (!next_cm_event(channel, deadline.remaining_ms(timeout_ms), out, rdma::cm_event_name(type))) return false;
    if (out->type == type && (id == nullptr || out->id == id)) return true;
    fprintf(stderr, "  (while waiting for %s: %s status %d)\n", rdma::cm_event_name(type),
            rdma::cm_event_name(out->type), out->status);
    if (deadline.expired()) break;
  }
  return false;
}

int count_rdma_resources(const char* kind) {
  char command[128];
  snprintf(command, sizeof command, "rdma resource show %s 2>/dev/null", kind);
  FILE* pipe = popen(command, "r");
  if (!pipe) return -1;
  char needle[32];
  snprintf(needle, sizeof needle, " pid %d ", static_cast<int>(getpid()));
  int count = 0;
  char line[1024];
  for (int lines = 0; lines < 100000 && fgets(line, sizeof line, pipe); ++lines)
    if (strstr(line, needle) != nullptr) ++count;
  // The tool fails without NETLINK_RDMA (no RDMA in this kernel): unknown.
  if (pclose(pipe) != 0) return -1;
  return count;
}

int count_open_fds() {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int count = 0;
  while (dirent* entry = readdir(dir))
    if (entry->d_name[0] != '.') ++count;
  closedir(dir);
  return count - 1;  // the directory's own fd
}

double elapsed_ms(double since_seconds) { return (now_seconds() - since_seconds) * 1000.0; }

std::string summarize_ms(std::vector<double> samples) {
  if (samples.empty()) return "no samples";
  std::sort(samples.begin(), samples.end());
  char text[128];
  snprintf(text, sizeof text, "%.1f / %.1f / %.1f ms (min / median / max of %zu)", samples.front(),
           samples[samples.size() / 2], samples.back(), samples.size());
  return text;
}

}  // namespace vsock::test
