#include "core/stats_segment.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace vsock::core {
namespace {

constexpr const char* kPathNames[] = {"kernel", "upgrading", "rdma", "reverted", "listening", "failed"};
constexpr const char* kWhyNames[] = {"",            "undecided",   "rule",         "no_device",
                                     "option",      "datagram",    "declined",     "rejected",
                                     "no_listener", "unreachable", "timeout",      "local_error",
                                     "peer_closed", "transport_error", "refused",  "handed_off",
                                     "cached_peer", "no_request",  "rdma_failed", "no_resources"};
static_assert(sizeof kWhyNames / sizeof kWhyNames[0] == static_cast<size_t>(KernelWhy::kCount),
              "a name per KernelWhy");

uint64_t* words(void* base, size_t offset) {
  return reinterpret_cast<uint64_t*>(static_cast<char*>(base) + offset);
}
const uint64_t* words(const void* base, size_t offset) {
  return reinterpret_cast<const uint64_t*>(static_cast<const char*>(base) + offset);
}

// Word-wise copies with relaxed atomics: the other side may be writing.
void store_words(uint64_t* to, const void* from, size_t bytes) {
  const auto* src = static_cast<const uint64_t*>(from);
  for (size_t i = 0; i < bytes / 8; ++i) __atomic_store_n(&to[i], src[i], __ATOMIC_RELAXED);
}
void load_words(void* to, const uint64_t* from, size_t bytes) {
  auto* dst = static_cast<uint64_t*>(to);
  for (size_t i = 0; i < bytes / 8; ++i) dst[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
}

SegmentHeader* header_of(void* segment) { return static_cast<SegmentHeader*>(segment); }
const SegmentHeader* header_of(const void* segment) { return static_cast<const SegmentHeader*>(segment); }

size_t counters_offset(const SegmentHeader& h) { return h.dynamic_offset + sizeof(Published); }
size_t rows_offset(const SegmentHeader& h) { return counters_offset(h) + size_t{h.counter_count} * 8; }

void copy_text(char* to, size_t capacity, const char* from) {
  size_t n = from == nullptr ? 0 : strnlen(from, capacity - 1);
  std::memcpy(to, from, n);
  to[n] = '\0';
}

long futex(void* word, int op, uint32_t value, const timespec* timeout) {
  // Not FUTEX_PRIVATE: the word is in a mapping shared between processes.
  return ::syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

}  // namespace

const char* socket_path_name(SocketPath path) {
  auto i = static_cast<size_t>(path);
  return i < sizeof kPathNames / sizeof kPathNames[0] ? kPathNames[i] : "unknown";
}

const char* kernel_why_name(KernelWhy why) {
  auto i = static_cast<size_t>(why);
  return i < static_cast<size_t>(KernelWhy::kCount) ? kWhyNames[i] : "unknown";
}

size_t segment_size(uint32_t counters) {
  size_t names = (size_t{counters} * kCounterNameSize + 7) / 8 * 8;
  return sizeof(SegmentHeader) + names + sizeof(Published) + size_t{counters} * 8 +
         size_t{kSocketRows} * sizeof(SocketRecord);
}

void segment_init(void* segment, size_t size, uint32_t counters, const char* const* names, int64_t pid,
                  uint64_t uid, uint64_t start_ticks, const char* program, const char* profile,
                  const char* library_version) {
  SegmentHeader* h = header_of(segment);
  h->magic = kSegmentMagic;
  h->version = kSegmentVersion;
  h->header_size = sizeof(SegmentHeader);
  h->segment_size = size;
  h->pid = pid;
  h->uid = uid;
  h->start_ticks = start_ticks;
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  h->created_unix_ns = int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
  h->counter_count = counters;
  h->counter_name_size = kCounterNameSize;
  h->names_offset = sizeof(SegmentHeader);
  h->dynamic_offset = h->names_offset + (size_t{counters} * kCounterNameSize + 7) / 8 * 8;
  h->socket_capacity = kSocketRows;
  h->socket_record_size = sizeof(SocketRecord);
  copy_text(h->program, sizeof h->program, program);
  copy_text(h->profile, sizeof h->profile, profile);
  copy_text(h->library_version, sizeof h->library_version, library_version);
  char* name_block = static_cast<char*>(segment) + h->names_offset;
  for (uint32_t i = 0; i < counters; ++i) copy_text(name_block + size_t{i} * kCounterNameSize, kCounterNameSize, names[i]);
}

void segment_publish(void* segment, const Published& info, const uint64_t* counters, const SocketRecord* rows,
                     uint32_t row_count) {
  SegmentHeader* h = header_of(segment);
  if (row_count > h->socket_capacity) row_count = h->socket_capacity;
  Published listed = info;
  listed.sockets_listed = row_count;
  uint64_t sequence = __atomic_load_n(&h->sequence, __ATOMIC_RELAXED);
  __atomic_store_n(&h->sequence, sequence + 1, __ATOMIC_RELAXED);
  std::atomic_thread_fence(std::memory_order_release);  // odd before any data word
  store_words(words(segment, h->dynamic_offset), &listed, sizeof listed);
  store_words(words(segment, counters_offset(*h)), counters, size_t{h->counter_count} * 8);
  store_words(words(segment, rows_offset(*h)), rows, size_t{row_count} * sizeof(SocketRecord));
  __atomic_store_n(&h->sequence, sequence + 2, __ATOMIC_RELEASE);  // even after every data word
}

std::string segment_check(const void* segment, size_t size) {
  if (size < sizeof(SegmentHeader)) return "shorter than a header";
  const SegmentHeader* h = header_of(segment);
  if (h->magic != kSegmentMagic) return "not a libvsock stats segment";
  if (h->version != kSegmentVersion)
    return "layout version " + std::to_string(h->version) + ", this reader knows " + std::to_string(kSegmentVersion);
  if (h->header_size != sizeof(SegmentHeader) || h->socket_record_size != sizeof(SocketRecord) ||
      h->counter_name_size != kCounterNameSize)
    return "unexpected record sizes";
  if (h->segment_size != size) return "size does not match the file";
  if (h->counter_count > 4096 || h->socket_capacity > (1u << 20)) return "implausible table sizes";
  if (h->names_offset != sizeof(SegmentHeader) ||
      h->dynamic_offset < h->names_offset + size_t{h->counter_count} * kCounterNameSize ||
      h->dynamic_offset % 8 != 0)
    return "bad offsets";
  if (rows_offset(*h) + size_t{h->socket_capacity} * sizeof(SocketRecord) > size) return "tables beyond the end";
  return "";
}

bool segment_read(const void* segment, size_t size, SegmentSnapshot* out, int attempts) {
  if (!segment_check(segment, size).empty()) return false;
  const SegmentHeader* h = header_of(segment);
  // The fixed part; its sequence and request words change under us, so word-wise atomic loads.
  load_words(&out->header, words(segment, 0), sizeof(SegmentHeader));
  out->counter_names.clear();
  const char* name_block = static_cast<const char*>(segment) + h->names_offset;
  for (uint32_t i = 0; i < h->counter_count; ++i) {
    const char* name = name_block + size_t{i} * kCounterNameSize;
    out->counter_names.emplace_back(name, strnlen(name, kCounterNameSize));
  }
  out->counters.assign(h->counter_count, 0);
  for (int attempt = 0; attempt < attempts; ++attempt) {
    uint64_t before = __atomic_load_n(&h->sequence, __ATOMIC_ACQUIRE);
    if (before % 2 != 0) {
      if (attempt % 64 == 63) usleep(100);  // the writer may have been descheduled
      continue;
    }
    load_words(&out->info, words(segment, h->dynamic_offset), sizeof(Published));
    load_words(out->counters.data(), words(segment, counters_offset(*h)), size_t{h->counter_count} * 8);
    uint32_t listed = out->info.sockets_listed <= h->socket_capacity ? out->info.sockets_listed : 0;
    out->rows.resize(listed);
    load_words(out->rows.data(), words(segment, rows_offset(*h)), size_t{listed} * sizeof(SocketRecord));
    std::atomic_thread_fence(std::memory_order_acquire);  // every data load before the second look
    if (__atomic_load_n(&h->sequence, __ATOMIC_RELAXED) == before) return true;
  }
  return false;
}

uint64_t segment_publish_count(const void* segment) {
  const SegmentHeader* h = header_of(segment);
  uint64_t sequence = __atomic_load_n(&h->sequence, __ATOMIC_ACQUIRE);
  return sequence / 2;  // every publication adds two
}

void segment_request(void* segment) {
  SegmentHeader* h = header_of(segment);
  __atomic_fetch_add(&h->request, 1, __ATOMIC_RELEASE);
  futex(&h->request, FUTEX_WAKE, 1, nullptr);
}

bool segment_wait_request(void* segment, uint32_t* seen, int timeout_ms) {
  SegmentHeader* h = header_of(segment);
  uint32_t now = __atomic_load_n(&h->request, __ATOMIC_ACQUIRE);
  if (now == *seen) {
    timespec timeout{timeout_ms / 1000, (timeout_ms % 1000) * 1'000'000L};
    // Returns at a wake, a timeout, a signal or when the word already moved.
    futex(&h->request, FUTEX_WAIT, *seen, timeout_ms < 0 ? nullptr : &timeout);
    now = __atomic_load_n(&h->request, __ATOMIC_ACQUIRE);
  }
  bool asked = now != *seen;
  *seen = now;
  return asked;
}

std::vector<std::string> segment_directories(const char* xdg_runtime_dir, unsigned long uid) {
  std::vector<std::string> dirs;
  if (xdg_runtime_dir != nullptr && xdg_runtime_dir[0] == '/') dirs.push_back(std::string(xdg_runtime_dir) + "/libvsock");
  dirs.push_back("/dev/shm/libvsock-" + std::to_string(uid));
  return dirs;
}

std::string segment_file_name(long pid) { return std::to_string(pid) + ".stat"; }

long segment_file_pid(const char* name) {
  long pid = 0;
  const char* p = name;
  for (; *p >= '0' && *p <= '9'; ++p) {
    if (pid > 100'000'000) return -1;
    pid = pid * 10 + (*p - '0');
  }
  if (p == name || std::strcmp(p, ".stat") != 0 || pid <= 0) return -1;
  return pid;
}

}  // namespace vsock::core
