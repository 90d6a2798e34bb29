// The pure parts of StreamChannel, no device: when credit goes back, when a
// send is signalled and how full the send queue is, how staged bytes are cut
// into writes, and how iovecs are walked.
#include <gtest/gtest.h>

#include <string>
#include <sys/uio.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "sock/stream/stream_credit.hpp"
#include "sock/stream/stream_immediate.hpp"
#include "sock/stream/stream_iov.hpp"
#include "sock/stream/stream_segment.hpp"
#include "sock/stream/stream_send_queue.hpp"

namespace vsock::sock {
namespace {

// ------------------------------------------------------------ CreditReturn --

TEST(CreditReturn, WaitsForAQuarterOfTheRing) {
  CreditReturn credit(65536);
  EXPECT_EQ(credit.threshold(), 16384u);
  EXPECT_EQ(credit.due(), 0u);
  credit.on_consumed(16383);
  EXPECT_EQ(credit.due(), 0u);
  credit.on_consumed(1);
  EXPECT_EQ(credit.due(), 16384u);
  credit.on_returned(16384);
  EXPECT_EQ(credit.due(), 0u);
  EXPECT_EQ(credit.unreported(), 0u);
}

TEST(CreditReturn, ReturnsAtOnceWhenTheWriterMayBeStalled) {
  CreditReturn credit(65536);
  credit.on_peer_wrote(65536);  // the ring is full
  EXPECT_TRUE(credit.writer_may_be_stalled());
  EXPECT_EQ(credit.due(), 0u);  // nothing consumed yet: nothing to return
  credit.on_consumed(10);
  EXPECT_EQ(credit.due(), 10u);
  credit.on_returned(10);
  EXPECT_FALSE(credit.writer_may_be_stalled());
  credit.on_consumed(10);
  EXPECT_EQ(credit.due(), 0u);  // back to batching
}

TEST(CreditReturn, NeverMoreThanOneImmediateCarries) {
  CreditReturn credit(uint64_t{1} << 31);
  credit.on_consumed(uint64_t{3} << 30);
  EXPECT_EQ(credit.due(), kImmediateValueMax);
  credit.on_returned(credit.due());
  EXPECT_EQ(credit.unreported(), (uint64_t{3} << 30) - kImmediateValueMax);
  EXPECT_EQ(credit.due(), kImmediateValueMax);  // the rest, still one immediate at a time
}

// The writer's credit runs out without the ring ever being full: it wrote
// 4000 of 4096, the reader consumed 100 (under the threshold, so kept), the
// writer wrote its last 96. The ring holds 3996, yet the writer can write
// nothing until the 100 come back.
TEST(CreditReturn, StallWithoutAFullRing) {
  CreditReturn credit(4096);
  credit.on_peer_wrote(4000);
  credit.on_consumed(100);
  EXPECT_EQ(credit.due(), 0u);
  credit.on_peer_wrote(3996);
  EXPECT_TRUE(credit.writer_may_be_stalled());
  EXPECT_EQ(credit.due(), 100u);
  credit.on_returned(100);
  credit.on_peer_wrote(3996 + 50);  // the writer used 50 of the 100
  credit.on_consumed(10);
  EXPECT_EQ(credit.due(), 0u);      // it still has 50 bytes of credit: batch again
}

// A writer may use its credit, not the ring's free space: bytes consumed
// but not yet reported are free space it does not know about.
TEST(CreditReturn, AcceptsWritesUpToTheWritersCredit) {
  CreditReturn credit(4096);
  EXPECT_TRUE(credit.accepts_write(0, 4096));
  EXPECT_FALSE(credit.accepts_write(0, 4097));
  credit.on_peer_wrote(4000);
  credit.on_consumed(1000);                     // ring now holds 3000, 1000 unreported
  EXPECT_TRUE(credit.accepts_write(3000, 96));
  EXPECT_FALSE(credit.accepts_write(3000, 97));  // fits the ring (1096 free), not the credit
  credit.on_returned(1000);
  EXPECT_TRUE(credit.accepts_write(3000, 1096));
  EXPECT_FALSE(credit.accepts_write(3000, 1097));
  EXPECT_FALSE(credit.accepts_write(5000, 0));   // nonsense state: refuse
}

TEST(CreditReturn, TinyRingsStillReturnCredit) {
  CreditReturn credit(2);
  EXPECT_EQ(credit.threshold(), 1u);
  credit.on_consumed(1);
  EXPECT_EQ(credit.due(), 1u);
}

// Whatever the reader does, the writer is never left waiting on a full ring
// with consumed bytes unreported, and every consumed byte is reported once.
TEST(CreditReturn, NoDeadlockAndExactAccountingUnderRandomReads) {
  std::mt19937_64 random(7);
  const uint64_t capacity = 4096;
  CreditReturn credit(capacity);
  uint64_t in_ring = 0, writer_credit = capacity, consumed_total = 0, returned_total = 0;
  for (int step = 0; step < 200000; ++step) {
    if (random() % 2 && writer_credit > 0) {  // the writer fills what it may
      uint64_t n = 1 + random() % writer_credit;
      writer_credit -= n;
      in_ring += n;
      credit.on_peer_wrote(in_ring);
    } else if (in_ring > 0) {  // the reader consumes some
      uint64_t n = 1 + random() % in_ring;
      in_ring -= n;
      consumed_total += n;
      credit.on_consumed(n);
    }
    if (uint64_t due = credit.due()) {
      credit.on_returned(due);
      writer_credit += due;
      returned_total += due;
    }
    // Stalled writer (no credit) with bytes consumed: credit must be due.
    ASSERT_FALSE(writer_credit == 0 && in_ring < capacity && credit.unreported() > 0 && credit.due() == 0)
        << "step " << step;
    ASSERT_EQ(writer_credit + in_ring + credit.unreported(), capacity);
  }
  EXPECT_EQ(returned_total + credit.unreported(), consumed_total);
}

// -------------------------------------------------------- SendQueueTracker --

TEST(SendQueueTracker, SignalsEveryNth) {
  SendQueueTracker sq(1024, 4, false);
  std::vector<bool> signaled;
  for (int i = 0; i < 12; ++i) {
    bool s = sq.next_signaled(false);
    signaled.push_back(s);
    sq.on_posted(s);
  }
  std::vector<bool> expected = {false, false, false, true, false, false, false, true, false, false, false, true};
  EXPECT_EQ(signaled, expected);
  EXPECT_EQ(sq.outstanding(), 12u);
  EXPECT_EQ(sq.signaled_outstanding(), 3u);
}

TEST(SendQueueTracker, CompletionRetiresEverythingBeforeIt) {
  SendQueueTracker sq(64, 4, false);
  for (int i = 0; i < 8; ++i) sq.on_posted(sq.next_signaled(false));
  ASSERT_TRUE(sq.on_completed(3).has_value());
  EXPECT_EQ(sq.outstanding(), 4u);
  ASSERT_TRUE(sq.on_completed(7).has_value());
  EXPECT_EQ(sq.outstanding(), 0u);
  EXPECT_EQ(sq.room(), 64u);
  EXPECT_EQ(sq.signaled_outstanding(), 0u);
}

TEST(SendQueueTracker, RejectsUnknownOrStaleCompletions) {
  SendQueueTracker sq(64, 2, false);
  sq.on_posted(false);
  sq.on_posted(true);
  EXPECT_EQ(sq.on_completed(2).error(), EINVAL);  // never posted
  ASSERT_TRUE(sq.on_completed(1).has_value());
  EXPECT_EQ(sq.on_completed(0).error(), EINVAL);  // already retired
  EXPECT_EQ(sq.on_completed(1).error(), EINVAL);
}

TEST(SendQueueTracker, TheRequestThatFillsTheQueueIsSignalled) {
  SendQueueTracker sq(8, 1000, false);
  for (int i = 0; i < 8; ++i) {
    bool s = sq.next_signaled(false);
    EXPECT_EQ(s, i == 7) << i;
    sq.on_posted(s);
  }
  EXPECT_EQ(sq.room(), 0u);
  EXPECT_EQ(sq.signaled_outstanding(), 1u);  // so a completion will come and free the queue
}

// The caller keeps 2 slots for control requests: the request that reaches
// that line is signalled, as is every one posted into the reserve.
TEST(SendQueueTracker, TheRequestThatReachesTheReserveIsSignalled) {
  SendQueueTracker sq(8, 1000, false, 2);
  for (int i = 0; i < 8; ++i) {
    bool s = sq.next_signaled(false);
    EXPECT_EQ(s, i >= 5) << i;
    sq.on_posted(s);
  }
}

TEST(SendQueueTracker, ForcedAndKeepOneSignalled) {
  SendQueueTracker sq(64, 1000, true);
  EXPECT_TRUE(sq.next_signaled(false));  // autocork: nothing signalled is outstanding
  sq.on_posted(true);
  EXPECT_FALSE(sq.next_signaled(false));
  EXPECT_TRUE(sq.next_signaled(true));
  sq.on_posted(false);
  ASSERT_TRUE(sq.on_completed(0).has_value());
  EXPECT_TRUE(sq.next_signaled(false));
}

// Random posting and completing, with a caller that stops ordinary
// requests at a reserve line as StreamChannel does: whenever the queue is at
// or past that line, a signalled request is outstanding (else nothing would
// ever report room again), and the occupancy never exceeds the depth.
TEST(SendQueueTracker, ABlockedQueueAlwaysHasACompletionComing) {
  std::mt19937 random(11);
  for (uint32_t reserve : {0u, 2u, 5u}) {
    for (uint32_t every : {1u, 3u, 16u, 64u, 1000u}) {
      SendQueueTracker sq(16, every, false, reserve);
      std::vector<uint64_t> signaled;  // outstanding signalled sequences, oldest first
      for (int step = 0; step < 20000; ++step) {
        bool control = random() % 4 == 0;  // control requests may use the reserve
        uint32_t limit = control ? 0 : reserve;
        if (sq.room() > limit && random() % 3 != 0) {
          bool s = sq.next_signaled(random() % 50 == 0);
          uint64_t seq = sq.on_posted(s);
          if (s) signaled.push_back(seq);
        } else if (!signaled.empty() && random() % 2 == 0) {
          ASSERT_TRUE(sq.on_completed(signaled.front()).has_value());
          signaled.erase(signaled.begin());
        }
        ASSERT_LE(sq.outstanding(), 16u);
        ASSERT_EQ(sq.signaled_outstanding(), signaled.size());
        if (sq.room() <= reserve) {
          ASSERT_FALSE(signaled.empty()) << "reserve " << reserve << " every " << every << " step " << step;
        }
      }
    }
  }
}

// ------------------------------------------------------------ next_segment --

TEST(NextSegment, CutsAtTheRingEndAndAtTheMaximum) {
  EXPECT_EQ(next_segment(0, 100, 4096, 1024), 100u);
  EXPECT_EQ(next_segment(0, 5000, 4096, 1024), 1024u);
  EXPECT_EQ(next_segment(4000, 500, 4096, 1024), 96u);     // to the end first
  EXPECT_EQ(next_segment(4096, 500, 4096, 1024), 500u);    // then from the start
  EXPECT_EQ(next_segment(8191, 10, 4096, 1024), 1u);
  EXPECT_EQ(next_segment(UINT64_MAX, 10, 4096, 1024), 1u);  // the 64-bit counter wraps with the ring
  EXPECT_EQ(next_segment(0, 4096, 4096, 1u << 20), 4096u);
  EXPECT_EQ(next_segment(5, 0, 4096, 1024), 0u);
}

TEST(NextSegment, PiecesCoverTheRangeAndStayInsideTheRing) {
  std::mt19937_64 random(3);
  for (int trial = 0; trial < 2000; ++trial) {
    uint64_t capacity = uint64_t{1} << (random() % 20);
    uint64_t position = random();
    uint64_t remaining = random() % (capacity + 1);
    uint64_t max_segment = 1 + random() % (2 * capacity);
    uint64_t covered = 0;
    for (int pieces = 0; covered < remaining; ++pieces) {
      ASSERT_LT(pieces, 1000000);
      uint64_t length = next_segment(position + covered, remaining - covered, capacity, max_segment);
      ASSERT_GT(length, 0u);
      uint64_t offset = (position + covered) & (capacity - 1);
      ASSERT_LE(offset + length, capacity);
      ASSERT_LE(length, max_segment);
      covered += length;
    }
    ASSERT_EQ(covered, remaining);
  }
}

// --------------------------------------------------------------- IovCursor --

TEST(IovCursor, GathersAndScattersAcrossEntries) {
  char a[3] = {'a', 'b', 'c'}, b[1] = {'d'}, c[4] = {'e', 'f', 'g', 'h'};
  iovec iov[4] = {{a, 3}, {nullptr, 0}, {b, 1}, {c, 4}};
  EXPECT_EQ(iov_total(iov, 4), 8u);
  IovCursor in(iov, 4);
  uint8_t out[8] = {};
  EXPECT_EQ(in.gather(out, 2), 2u);
  EXPECT_EQ(in.gather(out + 2, 5), 5u);
  EXPECT_EQ(in.gather(out + 7, 10), 1u);
  EXPECT_EQ(in.gather(out, 1), 0u);
  EXPECT_EQ(std::memcmp(out, "abcdefgh", 8), 0);

  char x[2], y[5];
  iovec dst[2] = {{x, 2}, {y, 5}};
  IovCursor to(dst, 2);
  EXPECT_EQ(to.scatter(reinterpret_cast<const uint8_t*>("12345678"), 8), 7u);
  EXPECT_EQ(std::memcmp(x, "12", 2), 0);
  EXPECT_EQ(std::memcmp(y, "34567", 5), 0);
}

TEST(IovCursor, EmptyAndHostileArrays) {
  EXPECT_EQ(iov_total(nullptr, 3), 0u);
  iovec one{nullptr, 5};
  EXPECT_EQ(iov_total(&one, -1), 0u);
  IovCursor none(nullptr, 4);
  uint8_t byte = 0;
  EXPECT_EQ(none.gather(&byte, 1), 0u);
  iovec huge[2] = {{nullptr, SIZE_MAX}, {nullptr, 2}};
  EXPECT_EQ(iov_total(huge, 2), SIZE_MAX);  // saturates instead of wrapping
}

// --------------------------------------------------------------- IovWindow --

// The bytes a window covers, in order.
std::string window_bytes(const IovWindow& w) {
  std::string out;
  for (int i = 0; i < w.count(); ++i) out.append(static_cast<const char*>(w.data()[i].iov_base), w.data()[i].iov_len);
  return out;
}

TEST(IovWindow, WholeArrayIsPassedThrough) {
  char a[3] = {'a', 'b', 'c'}, b[2] = {'d', 'e'};
  iovec iov[2] = {{a, 3}, {b, 2}};
  IovWindow whole(iov, 2, 0, 5);
  EXPECT_EQ(whole.data(), iov);  // no copy
  EXPECT_EQ(whole.count(), 2);
  IovWindow more(iov, 2, 0, 100);
  EXPECT_EQ(more.data(), iov);
}

TEST(IovWindow, SkipsAndLimits) {
  char a[3] = {'a', 'b', 'c'}, b[2] = {'d', 'e'}, c[3] = {'f', 'g', 'h'};
  iovec iov[4] = {{a, 3}, {nullptr, 0}, {b, 2}, {c, 3}};
  IovWindow middle(iov, 4, 2, 4);
  EXPECT_NE(middle.data(), iov);
  EXPECT_EQ(window_bytes(middle), "cdef");
  IovWindow tail(iov, 4, 7, 10);
  EXPECT_EQ(window_bytes(tail), "h");
  IovWindow none(iov, 4, 8, 10);
  EXPECT_EQ(none.count(), 0);
  IovWindow empty(nullptr, 0, 0, 0);
  EXPECT_EQ(empty.count(), 0);
}

TEST(IovWindow, ManyPiecesBeyondTheInlineRoom) {
  constexpr int kCount = IovWindow::kInline * 3;
  char bytes[kCount];
  iovec iov[kCount];
  for (int i = 0; i < kCount; ++i) {
    bytes[i] = static_cast<char>('A' + i);
    iov[i] = iovec{&bytes[i], 1};
  }
  IovWindow cut(iov, kCount, 1, kCount - 2);  // all but the first and the last
  ASSERT_EQ(cut.count(), kCount - 2);
  EXPECT_EQ(window_bytes(cut), std::string(bytes + 1, kCount - 2));
}

}  // namespace
}  // namespace vsock::sock
