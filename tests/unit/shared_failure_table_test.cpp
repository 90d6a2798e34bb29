// SharedFailureTable: plain peers remembered for every process of a user,
// in slots that are sequence locks; on ordinary memory here (the mapping
// of the shared file is shared_peer_failures.cpp). Time is passed in.
#include "sock/upgrade/shared_failure_table.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace vsock::sock {
namespace {

wire::FamilyEndpoint v4(const char* ip, uint16_t port) {
  wire::FamilyEndpoint at;
  at.family = wire::kFamilyIpv4;
  at.endpoint.port = port;
  EXPECT_EQ(inet_pton(AF_INET, ip, at.endpoint.ip), 1);
  return at;
}

struct Table {
  std::unique_ptr<SharedFailureMemory> memory{new SharedFailureMemory()};
  SharedFailureTable table{memory.get()};
  Table() { SharedFailureTable::init(memory.get()); }
};

constexpr int64_t kTtl = 60000;

TEST(SharedFailureTable, ARecordedPeerIsPlainForItsTimeOnly) {
  Table t;
  EXPECT_TRUE(SharedFailureTable::valid(t.memory.get()));
  const wire::FamilyEndpoint peer = v4("192.168.77.1", 5432);
  EXPECT_FALSE(t.table.failed_recently(peer, 1000, kTtl));
  t.table.record(peer, 1000, kTtl);
  EXPECT_TRUE(t.table.failed_recently(peer, 1000, kTtl));
  EXPECT_TRUE(t.table.failed_recently(peer, 1000 + kTtl - 1, kTtl));
  EXPECT_FALSE(t.table.failed_recently(peer, 1000 + kTtl, kTtl));
  // Another port or address of the same host is another peer.
  EXPECT_FALSE(t.table.failed_recently(v4("192.168.77.1", 5433), 1000, kTtl));
  EXPECT_FALSE(t.table.failed_recently(v4("192.168.77.2", 5432), 1000, kTtl));
}

TEST(SharedFailureTable, ARecordAgainRestartsItsTimeAndForgetEndsIt) {
  Table t;
  const wire::FamilyEndpoint peer = v4("10.0.0.1", 80);
  t.table.record(peer, 1000, kTtl);
  t.table.record(peer, 50000, kTtl);
  EXPECT_TRUE(t.table.failed_recently(peer, 1000 + kTtl + 1, kTtl));
  t.table.forget(peer);
  EXPECT_FALSE(t.table.failed_recently(peer, 50001, kTtl));
}

TEST(SharedFailureTable, ARecordFromTheFutureIsNotTrusted) {
  Table t;
  const wire::FamilyEndpoint peer = v4("10.0.0.1", 80);
  t.table.record(peer, 100000, kTtl);
  EXPECT_FALSE(t.table.failed_recently(peer, 50000, kTtl));  // another boot's clock
  EXPECT_TRUE(t.table.failed_recently(peer, 99500, kTtl));   // within a second: a clock read late
}

TEST(SharedFailureTable, AFullProbeReplacesItsOldestRecord) {
  Table t;
  // More peers than slots: every new one is found; the oldest go first.
  const int peers = SharedFailureMemory::kSlots * 2;
  for (int i = 0; i < peers; ++i)
    t.table.record(v4("10.1.0.1", static_cast<uint16_t>(1000 + i)), 1000 + i, kTtl);
  int found_new = 0;
  for (int i = peers - 100; i < peers; ++i)
    found_new += t.table.failed_recently(v4("10.1.0.1", static_cast<uint16_t>(1000 + i)), 1000 + peers, kTtl);
  EXPECT_EQ(found_new, 100);
  int found = 0;
  for (int i = 0; i < peers; ++i)
    found += t.table.failed_recently(v4("10.1.0.1", static_cast<uint16_t>(1000 + i)), 1000 + peers, kTtl);
  EXPECT_LE(found, static_cast<int>(SharedFailureMemory::kSlots));
  EXPECT_GT(found, static_cast<int>(SharedFailureMemory::kSlots) / 2);
}

TEST(SharedFailureTable, HostsOfOneSubnetOnOnePortAllFit) {
  // 200 hosts of a /24 on one port: each keeps its record (their slots
  // spread; a weak hash would put them all in one probe of 8).
  Table t;
  char ip[32];
  for (int host = 1; host <= 200; ++host) {
    std::snprintf(ip, sizeof ip, "10.3.0.%d", host);
    t.table.record(v4(ip, 5432), 1000, kTtl);
  }
  int found = 0;
  for (int host = 1; host <= 200; ++host) {
    std::snprintf(ip, sizeof ip, "10.3.0.%d", host);
    found += t.table.failed_recently(v4(ip, 5432), 1001, kTtl);
  }
  EXPECT_EQ(found, 200);
}

TEST(SharedFailureTable, AnotherLayoutIsNotValid) {
  Table t;
  t.memory->size = 1;
  EXPECT_FALSE(SharedFailureTable::valid(t.memory.get()));
  Table u;
  u.memory->magic.store(0);
  EXPECT_FALSE(SharedFailureTable::valid(u.memory.get()));
}

// Writers record and forget peers of their own while readers look: a
// reader never sees a peer nobody recorded, and each writer finds its own
// records (the sequence locks never mix two writes into one slot).
TEST(SharedFailureTable, ConcurrentWritersAndReadersNeverMixSlots) {
  Table t;
  std::atomic<bool> stop{false};
  std::atomic<int> phantoms{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r)
    readers.emplace_back([&] {
      while (!stop.load()) {
        for (int p = 0; p < 64; ++p)  // port 9 is never recorded, at any address
          phantoms += t.table.failed_recently(v4("10.2.0.1", 9), 5000, kTtl);
      }
    });
  std::atomic<int> missing{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 3; ++w)
    writers.emplace_back([&, w] {
      for (int round = 0; round < 2000; ++round) {
        const wire::FamilyEndpoint peer = v4("10.2.0.1", static_cast<uint16_t>(100 + w * 10 + round % 10));
        t.table.record(peer, 1000 + round, kTtl);
        // Another writer may hold the slot at that moment: a dropped write
        // is allowed, a wrong one is not; so only count, do not assert.
        if (!t.table.failed_recently(peer, 1000 + round, kTtl)) ++missing;
        if (round % 7 == 0) t.table.forget(peer);
      }
    });
  for (std::thread& w : writers) w.join();
  stop = true;
  for (std::thread& r : readers) r.join();
  EXPECT_EQ(phantoms.load(), 0);
  EXPECT_LT(missing.load(), 3 * 2000 / 10);  // dropped writes are rare
}

}  // namespace
}  // namespace vsock::sock
