// Which libibverbs provider a device needs, from what sysfs says of it
// (src/rdma/verbs_provider.hpp). The loading itself is checked on the
// device (tests/rdma/provider_preload.cpp).
#include "rdma/verbs_provider.hpp"

#include <gtest/gtest.h>

namespace vsock::rdma {
namespace {

TEST(VerbsProvider, SoftwareDevicesByNodeType) {
  EXPECT_EQ(provider_for({"", 1}), "rxe");
  EXPECT_EQ(provider_for({"", 4}), "siw");
  EXPECT_EQ(provider_for({"", 0}), "");  // node_type unreadable: no guess
  EXPECT_EQ(provider_for({"", 2}), "");  // a switch has no provider of its own
}

TEST(VerbsProvider, HardwareDevicesByParentDriver) {
  EXPECT_EQ(provider_for({"mlx5_core", 1}), "mlx5");
  EXPECT_EQ(provider_for({"mlx4_core", 1}), "mlx4");
  EXPECT_EQ(provider_for({"ice", 4}), "irdma");
  EXPECT_EQ(provider_for({"bnxt_en", 1}), "bnxt_re");
  EXPECT_EQ(provider_for({"efa", 1}), "efa");
  // The parent driver decides, not the node type.
  EXPECT_EQ(provider_for({"mlx5_core", 4}), "mlx5");
}

TEST(VerbsProvider, UnknownParentDriverIsNoGuess) {
  EXPECT_EQ(provider_for({"e1000e", 1}), "");
  EXPECT_EQ(provider_for({"mlx5", 1}), "");  // the provider's name is not a driver's
}

TEST(VerbsProvider, FactsOfAnAbsentDeviceAreEmpty) {
  VerbsDeviceFacts facts = read_device_facts("no-such-device-here");
  EXPECT_TRUE(facts.parent_driver.empty());
  EXPECT_EQ(facts.node_type, 0);
  EXPECT_EQ(provider_for(facts), "");
}

}  // namespace
}  // namespace vsock::rdma
