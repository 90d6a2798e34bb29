// ReceiveQueue (src/sock/dgram/receive_queue.hpp): the budget, and
// recvmsg()'s truncation, peek and source-address rules as the kernel's UDP.
#include "sock/dgram/receive_queue.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>
#include <string>

namespace vsock::sock::dgram {
namespace {

ReceivedDatagram datagram_of(const std::string& text, uint16_t port = 4000) {
  ReceivedDatagram d;
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_port = htons(port);
  from.sin_addr.s_addr = htonl(0xC0A84D01);  // 192.168.77.1
  std::memcpy(&d.source, &from, sizeof from);
  d.source_length = sizeof from;
  d.bytes.assign(text.begin(), text.end());
  return d;
}

struct Receiver {
  char buffer[64] = {};
  sockaddr_in from{};
  iovec iov{buffer, sizeof buffer};
  msghdr msg{};
  explicit Receiver(size_t room = sizeof buffer) {
    iov.iov_len = room;
    msg.msg_name = &from;
    msg.msg_namelen = sizeof from;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
  }
};

TEST(ReceiveQueue, TakesDatagramsInOrderWithTheirSource) {
  ReceiveQueue queue(4096);
  ASSERT_TRUE(queue.push(datagram_of("first", 4001)));
  ASSERT_TRUE(queue.push(datagram_of("second", 4002)));
  EXPECT_EQ(queue.next_length(), 5u);
  Receiver r;
  EXPECT_EQ(queue.take(r.msg, 0), 5u);
  EXPECT_EQ(std::string(r.buffer, 5), "first");
  EXPECT_EQ(ntohs(r.from.sin_port), 4001);
  EXPECT_EQ(r.msg.msg_namelen, sizeof(sockaddr_in));
  EXPECT_EQ(r.msg.msg_flags, 0);
  EXPECT_EQ(queue.next_length(), 6u);
  Receiver second;
  EXPECT_EQ(queue.take(second.msg, 0), 6u);
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.charged(), 0u);
}

TEST(ReceiveQueue, TruncatesLikeTheKernelAndLosesTheRest) {
  ReceiveQueue queue(4096);
  queue.push(datagram_of("0123456789"));
  queue.push(datagram_of("abcdefghij"));
  Receiver small(4);
  EXPECT_EQ(queue.take(small.msg, 0), 4u);
  EXPECT_EQ(small.msg.msg_flags, MSG_TRUNC);
  EXPECT_EQ(std::string(small.buffer, 4), "0123");
  // MSG_TRUNC in: the real length comes back, the copy is still cut.
  Receiver real_length(3);
  EXPECT_EQ(queue.take(real_length.msg, MSG_TRUNC), 10u);
  EXPECT_EQ(std::string(real_length.buffer, 3), "abc");
  EXPECT_TRUE(queue.empty());
}

TEST(ReceiveQueue, PeekLeavesTheDatagramQueued) {
  ReceiveQueue queue(4096);
  queue.push(datagram_of("peeked"));
  Receiver r;
  EXPECT_EQ(queue.take(r.msg, MSG_PEEK), 6u);
  EXPECT_EQ(queue.count(), 1u);
  EXPECT_EQ(queue.take(r.msg, 0), 6u);
  EXPECT_TRUE(queue.empty());
}

TEST(ReceiveQueue, ZeroLengthDatagramsAreDatagrams) {
  ReceiveQueue queue(4096);
  queue.push(datagram_of(""));
  EXPECT_FALSE(queue.empty());
  EXPECT_EQ(queue.next_length(), 0u);
  Receiver r;
  EXPECT_EQ(queue.take(r.msg, 0), 0u);
  EXPECT_TRUE(queue.empty());
}

TEST(ReceiveQueue, ScattersOverSeveralIovecs) {
  ReceiveQueue queue(4096);
  queue.push(datagram_of("helloworld"));
  char a[3], b[20];
  iovec iov[2] = {{a, sizeof a}, {b, sizeof b}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  msg.msg_namelen = 77;  // no msg_name: left alone
  EXPECT_EQ(queue.take(msg, 0), 10u);
  EXPECT_EQ(std::string(a, 3), "hel");
  EXPECT_EQ(std::string(b, 7), "loworld");
  EXPECT_EQ(msg.msg_namelen, 77u);
}

TEST(ReceiveQueue, ShortAddressRoomGetsTheFullLength) {
  ReceiveQueue queue(4096);
  queue.push(datagram_of("x", 0x1234));
  Receiver r;
  r.msg.msg_namelen = 4;  // family and port only
  queue.take(r.msg, 0);
  EXPECT_EQ(r.msg.msg_namelen, sizeof(sockaddr_in));
  EXPECT_EQ(ntohs(r.from.sin_port), 0x1234);
  EXPECT_EQ(r.from.sin_addr.s_addr, 0u);  // not copied: no room
}

TEST(ReceiveQueue, DropsOnceTheBudgetIsPassedButAnEmptyQueueTakesAnything) {
  ReceiveQueue queue(1000);
  ReceivedDatagram big = datagram_of(std::string(5000, 'x'));
  EXPECT_TRUE(queue.push(std::move(big)));  // an empty queue takes one of any size
  EXPECT_FALSE(queue.push(datagram_of("y")));
  EXPECT_EQ(queue.drops(), 1u);
  Receiver r;
  queue.take(r.msg, 0);
  // Empty datagrams are charged their overhead: a flood of them is bounded.
  size_t taken = 0;
  while (queue.push(datagram_of(""))) ++taken;
  EXPECT_EQ(taken, 1000 / ReceiveQueue::kOverheadBytes + 1);
  EXPECT_EQ(queue.drops(), 2u);
  queue.clear();
  EXPECT_EQ(queue.charged(), 0u);
  EXPECT_TRUE(queue.push(datagram_of("after")));
}

}  // namespace
}  // namespace vsock::sock::dgram
