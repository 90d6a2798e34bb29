// The stats segment (core/stats_segment.hpp): layout checks, a publication
// read back, the sequence lock under a racing writer, the request word.
#include "core/stats_segment.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace vsock::core {
namespace {

constexpr uint32_t kTestCounters = 3;
const char* const kTestNames[kTestCounters] = {"alpha", "beta_counter", "a_name_of_exactly_thirty_one_ch"};

// A zeroed, 8-byte aligned block the size of a segment.
struct Block {
  explicit Block(uint32_t counters = kTestCounters)
      : size(segment_size(counters)), words((size + 7) / 8, 0) {}
  void* data() { return words.data(); }
  size_t size;
  std::vector<uint64_t> words;
};

void init(Block& b) {
  segment_init(b.data(), b.size, kTestCounters, kTestNames, 4242, 1000, 777, "prog", "latency", "0.1.0");
}

TEST(StatsSegment, FreshSegmentChecksAndReadsEmpty) {
  Block b;
  init(b);
  EXPECT_EQ(segment_check(b.data(), b.size), "");
  SegmentSnapshot s;
  ASSERT_TRUE(segment_read(b.data(), b.size, &s));
  EXPECT_EQ(s.header.pid, 4242);
  EXPECT_EQ(s.header.uid, 1000u);
  EXPECT_EQ(s.header.start_ticks, 777u);
  EXPECT_STREQ(s.header.program, "prog");
  EXPECT_STREQ(s.header.profile, "latency");
  EXPECT_EQ(s.counter_names, (std::vector<std::string>{"alpha", "beta_counter", "a_name_of_exactly_thirty_one_ch"}));
  EXPECT_EQ(s.counters, (std::vector<uint64_t>{0, 0, 0}));
  EXPECT_TRUE(s.rows.empty());
  EXPECT_EQ(s.info.publish_count, 0u);
  EXPECT_EQ(segment_publish_count(b.data()), 0u);
}

TEST(StatsSegment, RefusesForeignTruncatedAndOtherVersions) {
  Block b;
  init(b);
  EXPECT_EQ(segment_check(b.data(), sizeof(SegmentHeader) - 1), "shorter than a header");
  EXPECT_EQ(segment_check(b.data(), b.size - 8), "size does not match the file");
  auto* h = static_cast<SegmentHeader*>(b.data());
  h->version = 2;
  EXPECT_EQ(segment_check(b.data(), b.size), "layout version 2, this reader knows 1");
  SegmentSnapshot s;
  EXPECT_FALSE(segment_read(b.data(), b.size, &s));
  h->version = kSegmentVersion;
  h->dynamic_offset = b.size;  // tables past the end
  EXPECT_EQ(segment_check(b.data(), b.size), "tables beyond the end");
  h->magic = 0;
  EXPECT_EQ(segment_check(b.data(), b.size), "not a libvsock stats segment");
}

TEST(StatsSegment, PublicationReadsBack) {
  Block b;
  init(b);
  uint64_t counters[kTestCounters] = {1, 22, 333};
  SocketRecord rows[2]{};
  rows[0].fd = 7;
  rows[0].rdma_bytes_sent = 99;
  rows[1].fd = 9;
  rows[1].path = static_cast<uint8_t>(SocketPath::kRdma);
  Published info{};
  info.publish_count = 5;
  info.published_unix_ns = 123;
  info.sockets_seen = 3;
  segment_publish(b.data(), info, counters, rows, 2);
  SegmentSnapshot s;
  ASSERT_TRUE(segment_read(b.data(), b.size, &s));
  EXPECT_EQ(s.counters, (std::vector<uint64_t>{1, 22, 333}));
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_EQ(s.rows[0].fd, 7);
  EXPECT_EQ(s.rows[0].rdma_bytes_sent, 99u);
  EXPECT_EQ(s.rows[1].path, static_cast<uint8_t>(SocketPath::kRdma));
  EXPECT_EQ(s.info.sockets_listed, 2u);
  EXPECT_EQ(s.info.sockets_seen, 3u);
  EXPECT_EQ(s.info.publish_count, 5u);
  EXPECT_EQ(segment_publish_count(b.data()), 1u);
  // Fewer rows the next time: the old ones are not listed.
  segment_publish(b.data(), info, counters, rows, 1);
  ASSERT_TRUE(segment_read(b.data(), b.size, &s));
  EXPECT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(segment_publish_count(b.data()), 2u);
}

TEST(StatsSegment, RowsBeyondTheTableAreCut) {
  Block b;
  init(b);
  std::vector<SocketRecord> rows(kSocketRows + 5);
  uint64_t counters[kTestCounters] = {};
  segment_publish(b.data(), Published{}, counters, rows.data(), static_cast<uint32_t>(rows.size()));
  SegmentSnapshot s;
  ASSERT_TRUE(segment_read(b.data(), b.size, &s));
  EXPECT_EQ(s.rows.size(), size_t{kSocketRows});
}

TEST(StatsSegment, WriterInTheMiddleIsNotRead) {
  Block b;
  init(b);
  auto* h = static_cast<SegmentHeader*>(b.data());
  h->sequence = 3;  // a publisher stopped half-way (killed, or still writing)
  SegmentSnapshot s;
  EXPECT_FALSE(segment_read(b.data(), b.size, &s, 100));
}

// A writer publishes generation g in every counter and row field; a reader
// must never see two generations mixed in one copy.
TEST(StatsSegment, SequenceLockGivesConsistentCopiesUnderARacingWriter) {
  Block b;
  init(b);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::vector<SocketRecord> rows(64);
    uint64_t counters[kTestCounters];
    for (uint64_t g = 1; !stop.load(std::memory_order_relaxed) && g < 2'000'000; ++g) {
      for (uint64_t& c : counters) c = g;
      for (SocketRecord& r : rows) r.tcp_bytes_sent = r.rdma_bytes_received = g;
      Published info{};
      info.publish_count = g;
      info.sockets_seen = static_cast<uint32_t>(g % 64);
      segment_publish(b.data(), info, counters, rows.data(), static_cast<uint32_t>(g % 64));
    }
  });
  int consistent = 0;
  uint64_t last = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int i = 0; i < 2000 && std::chrono::steady_clock::now() < deadline; ++i) {
    SegmentSnapshot s;
    if (!segment_read(b.data(), b.size, &s)) continue;
    const uint64_t g = s.info.publish_count;
    for (uint64_t c : s.counters) ASSERT_EQ(c, g);
    ASSERT_EQ(s.rows.size(), g % 64);
    ASSERT_EQ(s.info.sockets_seen, g % 64);
    for (const SocketRecord& r : s.rows) {
      ASSERT_EQ(r.tcp_bytes_sent, g);
      ASSERT_EQ(r.rdma_bytes_received, g);
    }
    ASSERT_GE(g, last);  // never backwards
    last = g;
    ++consistent;
  }
  stop = true;
  writer.join();
  EXPECT_GT(consistent, 0);
}

TEST(StatsSegment, RequestWakesTheWaiter) {
  Block b;
  init(b);
  uint32_t seen = 0;
  EXPECT_FALSE(segment_wait_request(b.data(), &seen, 0));  // nobody asked: times out
  segment_request(b.data());
  EXPECT_TRUE(segment_wait_request(b.data(), &seen, 0));
  EXPECT_EQ(seen, 1u);
  // A waiter with no time limit is woken by a request from another thread.
  std::atomic<bool> woken{false};
  std::thread waiter([&] {
    uint32_t mine = seen;
    while (!segment_wait_request(b.data(), &mine, 10'000)) {
    }
    woken = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  segment_request(b.data());
  waiter.join();
  EXPECT_TRUE(woken.load());
}

TEST(StatsSegment, FileNamesAndDirectories) {
  EXPECT_EQ(segment_file_name(123), "123.stat");
  EXPECT_EQ(segment_file_pid("123.stat"), 123);
  EXPECT_EQ(segment_file_pid(".123.stat.new"), -1);
  EXPECT_EQ(segment_file_pid("123.stats"), -1);
  EXPECT_EQ(segment_file_pid(".stat"), -1);
  EXPECT_EQ(segment_file_pid("0.stat"), -1);
  EXPECT_EQ(segment_file_pid("99999999999999.stat"), -1);
  EXPECT_EQ(segment_directories("/run/user/5", 5),
            (std::vector<std::string>{"/run/user/5/libvsock", "/dev/shm/libvsock-5"}));
  EXPECT_EQ(segment_directories(nullptr, 5), (std::vector<std::string>{"/dev/shm/libvsock-5"}));
  EXPECT_EQ(segment_directories("relative", 5), (std::vector<std::string>{"/dev/shm/libvsock-5"}));
}

TEST(StatsSegment, NamesOfPathsAndReasons) {
  EXPECT_STREQ(socket_path_name(SocketPath::kRdma), "rdma");
  EXPECT_STREQ(socket_path_name(static_cast<SocketPath>(200)), "unknown");
  EXPECT_STREQ(kernel_why_name(KernelWhy::kNone), "");
  EXPECT_STREQ(kernel_why_name(KernelWhy::kNoListener), "no_listener");
  EXPECT_STREQ(kernel_why_name(KernelWhy::kHandedOff), "handed_off");
  EXPECT_STREQ(kernel_why_name(KernelWhy::kCachedPeer), "cached_peer");
  EXPECT_STREQ(kernel_why_name(KernelWhy::kNoRequest), "no_request");
  EXPECT_STREQ(kernel_why_name(KernelWhy::kRdmaFailed), "rdma_failed");
  EXPECT_STREQ(kernel_why_name(KernelWhy::kCount), "unknown");
}

}  // namespace
}  // namespace vsock::core
