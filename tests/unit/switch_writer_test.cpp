// SwitchWriter: the count a side puts into its Switch, and no TCP writes
// after it (docs/protocol.md §2).
#include "sock/stream/switch_writer.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>

namespace vsock::sock {
namespace {

TEST(SwitchWriter, CountsTcpBytesUntilTheSwitch) {
  SwitchWriter writer;
  EXPECT_TRUE(writer.tcp_allowed());
  ASSERT_TRUE(writer.on_tcp_written(100));
  ASSERT_TRUE(writer.on_tcp_written(0));
  ASSERT_TRUE(writer.on_tcp_written(23));
  core::Result<uint64_t> count = writer.switch_now();
  ASSERT_TRUE(count);
  EXPECT_EQ(count.value(), 123u);
  EXPECT_TRUE(writer.switched());
  EXPECT_FALSE(writer.tcp_allowed());
}

TEST(SwitchWriter, SwitchBeforeAnyTcpByteCountsZero) {
  SwitchWriter writer;
  EXPECT_EQ(writer.switch_now().value(), 0u);
}

TEST(SwitchWriter, RefusesTcpWritesAfterTheSwitch) {
  SwitchWriter writer;
  ASSERT_TRUE(writer.on_tcp_written(5));
  ASSERT_TRUE(writer.switch_now());
  core::Result<bool> r = writer.on_tcp_written(1);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), EPIPE);
  EXPECT_EQ(writer.tcp_written(), 5u);  // not counted
}

TEST(SwitchWriter, SwitchesOnlyOnce) {
  SwitchWriter writer;
  ASSERT_TRUE(writer.on_tcp_written(5));
  ASSERT_TRUE(writer.switch_now());
  core::Result<uint64_t> again = writer.switch_now();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error(), EALREADY);
}

TEST(SwitchWriter, CountSaturates) {
  SwitchWriter writer;
  ASSERT_TRUE(writer.on_tcp_written(UINT64_MAX - 1));
  ASSERT_TRUE(writer.on_tcp_written(10));
  EXPECT_EQ(writer.tcp_written(), UINT64_MAX);
}

// After a revert (docs/protocol.md §5) TCP is the only path again.
TEST(SwitchWriter, RevertAfterTheSwitchAllowsTcpAgain) {
  SwitchWriter writer;
  ASSERT_TRUE(writer.on_tcp_written(5));
  ASSERT_TRUE(writer.switch_now());
  EXPECT_FALSE(writer.tcp_allowed());
  ASSERT_TRUE(writer.revert());
  EXPECT_TRUE(writer.tcp_allowed());
  EXPECT_TRUE(writer.reverted());
  ASSERT_TRUE(writer.on_tcp_written(3));
  EXPECT_EQ(writer.revert().error(), EALREADY);
}

TEST(SwitchWriter, NoSwitchAfterARevert) {
  SwitchWriter writer;
  ASSERT_TRUE(writer.revert());
  EXPECT_TRUE(writer.tcp_allowed());
  EXPECT_EQ(writer.switch_now().error(), ECANCELED);
  EXPECT_FALSE(writer.switched());
  ASSERT_TRUE(writer.on_tcp_written(1));
}

}  // namespace
}  // namespace vsock::sock
