// Where vsock-stat says a stream stands (sock/socket_report.hpp), from the
// upgrade's phase, a revert and the registry's reason.
#include "sock/socket_report.hpp"

#include <gtest/gtest.h>

namespace vsock::sock {
namespace {

struct Classified {
  core::SocketPath path;
  core::KernelWhy why;
};

Classified classify(StreamSnapshot s, KernelReason registry = KernelReason::kUndecided) {
  Classified c{};
  classify_stream(s, registry, &c.path, &c.why);
  return c;
}

TEST(SocketReport, PhasesMapToPaths) {
  StreamSnapshot s;
  s.phase = UpgradePhase::kConnecting;
  EXPECT_EQ(classify(s).path, core::SocketPath::kUpgrading);
  s.phase = UpgradePhase::kEstablished;
  EXPECT_EQ(classify(s).path, core::SocketPath::kUpgrading);
  s.phase = UpgradePhase::kSwitched;
  EXPECT_EQ(classify(s).path, core::SocketPath::kRdma);
  EXPECT_EQ(classify(s).why, core::KernelWhy::kNone);
  s.phase = UpgradePhase::kFailed;
  EXPECT_EQ(classify(s).path, core::SocketPath::kFailed);
}

TEST(SocketReport, FallbackCarriesItsReason) {
  StreamSnapshot s;
  s.phase = UpgradePhase::kFallback;
  s.fallback = FallbackReason::kNoListener;
  Classified c = classify(s);
  EXPECT_EQ(c.path, core::SocketPath::kKernel);
  EXPECT_EQ(c.why, core::KernelWhy::kNoListener);
  s.fallback = FallbackReason::kTimeout;
  EXPECT_EQ(classify(s).why, core::KernelWhy::kTimeout);
}

TEST(SocketReport, RevertedAfterTheSwitchIsHandedOff) {
  StreamSnapshot s;
  s.phase = UpgradePhase::kSwitched;
  s.reverted = true;
  Classified c = classify(s);
  EXPECT_EQ(c.path, core::SocketPath::kReverted);
  EXPECT_EQ(c.why, core::KernelWhy::kHandedOff);
  s.reverted = false;
  s.kernel_only = true;  // left to the kernel after the revert completed
  EXPECT_EQ(classify(s).path, core::SocketPath::kReverted);
}

TEST(SocketReport, ResumedAfterRdmaFailedSaysSo) {
  StreamSnapshot s;
  s.phase = UpgradePhase::kSwitched;
  s.reverted = true;
  s.resumed = true;
  Classified c = classify(s);
  EXPECT_EQ(c.path, core::SocketPath::kReverted);
  EXPECT_EQ(c.why, core::KernelWhy::kRdmaFailed);
  s.reverted = false;
  s.kernel_only = true;  // the resume completed: the kernel's socket now
  EXPECT_EQ(classify(s).why, core::KernelWhy::kRdmaFailed);
}

TEST(SocketReport, NoUpgradeTakesTheRegistryReason) {
  StreamSnapshot s;
  EXPECT_EQ(classify(s).why, core::KernelWhy::kUndecided);
  EXPECT_EQ(classify(s, KernelReason::kRule).why, core::KernelWhy::kRule);
  EXPECT_EQ(classify(s, KernelReason::kNoDevice).why, core::KernelWhy::kNoDevice);
  EXPECT_EQ(classify(s, KernelReason::kNoDevice).path, core::SocketPath::kKernel);
  EXPECT_EQ(classify(s, KernelReason::kCachedPeer).why, core::KernelWhy::kCachedPeer);
}

TEST(SocketReport, NoRequestAndAnOptionNameTheirReasons) {
  StreamSnapshot s;
  s.phase = UpgradePhase::kFallback;
  s.fallback = FallbackReason::kNoRequest;
  EXPECT_EQ(classify(s).why, core::KernelWhy::kNoRequest);
  // An option set after the upgrade began: the socket's own reason, not
  // the upgrade's "declined".
  s.fallback = FallbackReason::kDeclined;
  EXPECT_EQ(classify(s, KernelReason::kOption).why, core::KernelWhy::kOption);
  EXPECT_EQ(classify(s).why, core::KernelWhy::kDeclined);
}

}  // namespace
}  // namespace vsock::sock
