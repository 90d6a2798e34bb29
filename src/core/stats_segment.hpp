// The stats segment: a shared-memory file per process in which the library
// publishes its counters and a row per socket for vsock-stat to read
// (docs/architecture.md, "Live statistics"). This header is the layout both
// sides agree on, versioned by kSegmentVersion; the counters travel with
// their names (a names block written once), so a reader built from another
// revision still labels them right.
//
// Consistency: the part that changes (Published, the counters, the rows) is
// guarded by a sequence lock. The publisher makes the sequence odd, writes,
// makes it even again; a reader copies and retries while the sequence was
// odd or moved. Both sides copy 8-byte words with atomic loads and stores,
// so the copy is race-free in the C++ memory model (and under TSan).
//
// Freshness: the publisher writes only when asked. A reader adds one to
// `request` and wakes the futex on it; the publisher's thread sleeps on
// that word and publishes (at most once per kMinPublishGapMs).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vsock::core {

constexpr uint64_t kSegmentMagic = 0x3174617473636f76ULL;  // "vocstat1" read as little-endian bytes
constexpr uint32_t kSegmentVersion = 1;
constexpr uint32_t kCounterNameSize = 32;    // bytes per name, NUL-padded
constexpr uint32_t kSocketRows = 1024;       // rows in the table; more sockets are counted, not listed
constexpr int kMinPublishGapMs = 100;        // the publisher's rate limit
constexpr int kCreateDelayMs = 1000;         // a process publishes from ~1 s after its first socket

// Where a socket's traffic goes now.
enum class SocketPath : uint8_t { kKernel, kUpgrading, kRdma, kReverted, kListening, kFailed };
// Why a socket is on the kernel (kNone when it is not).
enum class KernelWhy : uint8_t {
  kNone,
  kUndecided,        // not tried (yet): no peer asked, no connect
  kRule,             // a rule or VSOCK_TCP/VSOCK_UDP=kernel
  kNoDevice,
  kOption,           // an option the RDMA path cannot honour
  kDatagram,         // UDP: not bound, and sent nothing to a libvsock peer (yet)
  kDeclined,         // the upgrade was not attempted after all (e.g. handed over before it began)
  kRejected,
  kNoListener,       // the peer runs no libvsock on that port
  kUnreachable,
  kTimeout,
  kLocalError,
  kPeerClosed,       // the connection ended before the upgrade did
  kTransportError,
  kRefused,          // the server refused this connection only
  kHandedOff,        // went back to TCP: handed to another process (fork, SCM_RIGHTS) or the peer did
  kCachedPeer,       // not tried: an upgrade to this peer failed lately (peer_fail_cache_s)
  kNoRequest,        // accepted, but no upgrade request came (the client runs no libvsock)
  kRdmaFailed,       // went back to TCP: its RDMA path failed under it (link, port, device; protocol §5.1)
  kNoResources,      // no channel could be made: memory_budget_mib, locked memory, device limits
  kCount
};
const char* socket_path_name(SocketPath path);
const char* kernel_why_name(KernelWhy why);

struct SegmentHeader {
  // Written once, before the file gets its final name.
  uint64_t magic;
  uint32_t version;
  uint32_t header_size;
  uint64_t segment_size;
  uint64_t sequence;      // the sequence lock (odd: being written)
  uint32_t request;       // readers add one and wake it (a futex word)
  uint32_t reserved0;
  int64_t pid;
  uint64_t uid;
  uint64_t start_ticks;   // field 22 of /proc/PID/stat: tells a reused pid apart
  int64_t created_unix_ns;
  uint32_t counter_count;
  uint32_t counter_name_size;
  uint64_t names_offset;
  uint64_t dynamic_offset;  // Published, then the counters, then the rows
  uint32_t socket_capacity;
  uint32_t socket_record_size;
  char program[64];
  char profile[16];
  char library_version[16];
};
static_assert(sizeof(SegmentHeader) == 200, "layout of version 1");

// Under the sequence lock, at dynamic_offset.
struct Published {
  uint64_t publish_count;     // 1 after the first publication
  int64_t published_unix_ns;
  uint32_t sockets_listed;    // rows filled (<= socket_capacity)
  uint32_t sockets_seen;      // sockets the publisher found (may exceed the rows)
  uint64_t reserved;
};
static_assert(sizeof(Published) == 32, "layout of version 1");

struct SocketRecord {
  int32_t fd;
  uint8_t family;    // AF_INET or AF_INET6
  uint8_t protocol;  // IPPROTO_TCP or IPPROTO_UDP
  uint8_t path;      // SocketPath
  uint8_t why;       // KernelWhy
  uint16_t local_port;  // host order
  uint16_t peer_port;
  uint8_t role;      // 0 unknown, 1 client, 2 listener, 3 accepted
  uint8_t reserved[3];
  uint8_t local_addr[16];  // network order; IPv4 in the first four bytes
  uint8_t peer_addr[16];
  uint64_t tcp_bytes_sent;      // acknowledged by the peer's kernel (TCP_INFO bytes_acked, less the SYN)
  uint64_t tcp_bytes_received;  // (TCP_INFO)
  uint64_t rdma_bytes_sent;     // taken into the ring path
  uint64_t rdma_bytes_received; // read by the application from the ring
  uint64_t rdma_in_flight;      // written into the peer's ring, not yet credited back
  uint64_t rdma_readable;       // in our ring, not yet read
  uint64_t credit_stalls;       // writes that found no credit (the peer's ring full)
};
static_assert(sizeof(SocketRecord) == 104, "layout of version 1");

// Bytes of a segment for `counters` counters.
size_t segment_size(uint32_t counters);

// Fills a fresh (zeroed) segment's fixed part: header and names.
void segment_init(void* segment, size_t size, uint32_t counters, const char* const* names, int64_t pid,
                  uint64_t uid, uint64_t start_ticks, const char* program, const char* profile,
                  const char* library_version);

// Writes one publication under the sequence lock (one writer at a time).
void segment_publish(void* segment, const Published& info, const uint64_t* counters,
                     const SocketRecord* rows, uint32_t row_count);

// Whether `segment` (size bytes, e.g. a file another process wrote) is a
// segment this code can read: "" if so, else why not. Checks every offset
// and size against `size`, so a truncated or foreign file is refused.
std::string segment_check(const void* segment, size_t size);

// A consistent copy of one publication, in memory of its own.
struct SegmentSnapshot {
  SegmentHeader header{};
  Published info{};
  std::vector<std::string> counter_names;
  std::vector<uint64_t> counters;
  std::vector<SocketRecord> rows;
};
// Copies under the sequence lock, trying at most `attempts` times while a
// publication is being written. False if it never got a stable copy (or
// segment_check() fails).
bool segment_read(const void* segment, size_t size, SegmentSnapshot* out, int attempts = 10000);
// The number of publications so far (0: none yet); one atomic load.
uint64_t segment_publish_count(const void* segment);

// A reader asks for a fresh publication: bumps `request` and wakes the
// publisher (a process-shared futex). Needs the segment mapped writable.
void segment_request(void* segment);
// The publisher: sleeps until `request` differs from *seen or timeout_ms
// passes (-1: no limit); updates *seen. Returns true if asked.
bool segment_wait_request(void* segment, uint32_t* seen, int timeout_ms);

// The directories a process of `uid` publishes into, in order of
// preference: $XDG_RUNTIME_DIR/libvsock if XDG_RUNTIME_DIR is set (the
// publisher uses it if it is writable), then /dev/shm/libvsock-UID.
std::vector<std::string> segment_directories(const char* xdg_runtime_dir, unsigned long uid);
// The file name of a process's segment in such a directory ("PID.stat").
std::string segment_file_name(long pid);
// The pid a segment file name names, or -1 for any other name.
long segment_file_pid(const char* name);

}  // namespace vsock::core
