// SwitchReader on the server: the client's token between its TCP part and
// the ring (docs/protocol.md §2, "Who may switch"). Nothing comes from the
// ring before on_token(); a Switch whose token never came is forgotten and
// the stream is TCP's alone.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>

#include "sock/stream/switch_reader.hpp"

namespace vsock::sock {
namespace {

TEST(SwitchReaderToken, NoRingBytesBeforeTheToken) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_tcp_read(10));
  ASSERT_TRUE(reader.on_switch(30, true));
  EXPECT_TRUE(reader.token_pending());
  EXPECT_FALSE(reader.token_due());
  ReadPlan plan = reader.plan(100, MSG_WAITALL);
  EXPECT_EQ(plan.tcp_length, 20u);
  EXPECT_EQ(plan.ring_length, 0u);
  EXPECT_EQ(plan.tcp_flags & MSG_WAITALL, 0);  // the rest of the read is not TCP's
  EXPECT_TRUE(plan.tcp_bounded);
  ASSERT_TRUE(reader.on_tcp_read(20));
  EXPECT_TRUE(reader.token_due());
  EXPECT_FALSE(reader.on_ring());
  plan = reader.plan(100, 0);
  EXPECT_EQ(plan.total(), 0u);
  // The kernel's bytes past the count (the token) and the ring's are not
  // readable yet.
  EXPECT_EQ(reader.readable_bytes(16, 500).value(), 0u);
  ASSERT_TRUE(reader.on_token());
  EXPECT_FALSE(reader.token_pending());
  EXPECT_TRUE(reader.on_ring());
  plan = reader.plan(100, 0);
  EXPECT_EQ(plan.tcp_length, 0u);
  EXPECT_EQ(plan.ring_length, 100u);
  EXPECT_EQ(reader.readable_bytes(0, 500).value(), 500u);
}

TEST(SwitchReaderToken, TcpPartIsReadableBeforeTheToken) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_switch(30, true));
  EXPECT_EQ(reader.readable_bytes(10, 500).value(), 10u);
  EXPECT_EQ(reader.readable_bytes(46, 500).value(), 30u);  // 30 of TCP's, then the token
}

TEST(SwitchReaderToken, OnlyWhenDue) {
  SwitchReader reader;
  EXPECT_EQ(reader.on_token().error(), EPROTO);  // no Switch
  ASSERT_TRUE(reader.on_switch(5, true));
  EXPECT_EQ(reader.on_token().error(), EPROTO);  // 5 TCP bytes first
  ASSERT_TRUE(reader.on_tcp_read(5));
  ASSERT_TRUE(reader.on_token());
  EXPECT_EQ(reader.on_token().error(), EPROTO);  // once
  SwitchReader client_side;
  ASSERT_TRUE(client_side.on_switch(0));
  EXPECT_EQ(client_side.on_token().error(), EPROTO);  // none follows
  EXPECT_TRUE(client_side.on_ring());
}

TEST(SwitchReaderToken, AForgedSwitchIsForgotten) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_tcp_read(7));
  ASSERT_TRUE(reader.on_switch(7, true));
  ASSERT_TRUE(reader.forget_switch());
  EXPECT_FALSE(reader.switch_known());
  EXPECT_FALSE(reader.token_pending());
  ReadPlan plan = reader.plan(100, MSG_WAITALL);
  EXPECT_EQ(plan.tcp_length, 100u);
  EXPECT_FALSE(plan.tcp_bounded);
  ASSERT_TRUE(reader.on_tcp_read(1000));  // TCP goes on past the forged count
  EXPECT_EQ(reader.tcp_read(), 1007u);
  EXPECT_EQ(reader.on_tcp_eof().value(), TcpEnd::kEndOfStream);
}

TEST(SwitchReaderToken, ForgetOnlyAPendingToken) {
  SwitchReader reader;
  EXPECT_EQ(reader.forget_switch().error(), EPROTO);
  ASSERT_TRUE(reader.on_switch(0, true));
  ASSERT_TRUE(reader.on_token());
  EXPECT_EQ(reader.forget_switch().error(), EPROTO);  // proven: the ring is the client's
}

TEST(SwitchReaderToken, EndOfTcpWhereTheTokenShouldBe) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_switch(3, true));
  ASSERT_TRUE(reader.on_tcp_read(3));
  EXPECT_EQ(reader.on_tcp_eof().error(), ECONNRESET);  // the caller forgets the Switch first
  ASSERT_TRUE(reader.forget_switch());
  EXPECT_EQ(reader.on_tcp_eof().value(), TcpEnd::kEndOfStream);
}

TEST(SwitchReaderToken, RevertedStreamResumesTcpAfterTokenAndRing) {
  SwitchReader reader;
  ASSERT_TRUE(reader.on_switch(4, true));
  ASSERT_TRUE(reader.on_revert(10));
  ASSERT_TRUE(reader.on_tcp_read(4));
  EXPECT_FALSE(reader.tcp_again());
  EXPECT_EQ(reader.plan(100, 0).total(), 0u);  // the token first
  ASSERT_TRUE(reader.on_token());
  ReadPlan plan = reader.plan(100, 0);
  EXPECT_EQ(plan.ring_length, 10u);
  ASSERT_TRUE(reader.on_ring_read(10));
  EXPECT_TRUE(reader.tcp_again());
}

}  // namespace
}  // namespace vsock::sock
