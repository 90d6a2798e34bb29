#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/config.hpp"

namespace vsock::core {
namespace {

std::map<std::string, std::string> g_env;

const char* fake_env(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

Config build(std::map<std::string, std::string> env, const char* file = nullptr) {
  g_env = std::move(env);
  std::string text = file ? file : "";
  return build_config(fake_env, "test.conf", file ? &text : nullptr);
}

TEST(Config, DefaultsWithoutEnvOrFile) {
  Config c = build({});
  EXPECT_TRUE(c.diagnostics.empty());
  EXPECT_EQ(c.settings.profile, Profile::kDefault);
  EXPECT_EQ(c.settings.spin_us, 50u);
  EXPECT_EQ(c.settings.tcp, OffloadMode::kOffload);
  EXPECT_EQ(c.settings.log_level, LogLevel::kWarn);
  EXPECT_TRUE(c.rules.empty());
}

TEST(Config, ProfileBundlesDiffer) {
  Config latency = build({{"VSOCK_PROFILE", "latency"}});
  Config throughput = build({{"VSOCK_PROFILE", "throughput"}});
  EXPECT_EQ(latency.settings.profile, Profile::kLatency);
  EXPECT_GT(latency.settings.spin_us, throughput.settings.spin_us);
  EXPECT_GT(latency.settings.inline_size, throughput.settings.inline_size);
  EXPECT_LT(latency.settings.ring_size, throughput.settings.ring_size);
  EXPECT_FALSE(latency.settings.autocork);
  EXPECT_TRUE(throughput.settings.autocork);
  EXPECT_FALSE(latency.settings.nagle);
  EXPECT_TRUE(throughput.settings.nagle);
  EXPECT_TRUE(build({}).settings.nagle);  // default: as the kernel, Nagle until TCP_NODELAY
}

TEST(Config, EnvOverridesFileOverridesProfile) {
  Config c = build({{"VSOCK_INLINE_SIZE", "32"}}, "profile latency\nset spin_us 7\nset inline_size 99\n");
  EXPECT_TRUE(c.diagnostics.empty());
  EXPECT_EQ(c.settings.profile, Profile::kLatency);
  EXPECT_EQ(c.settings.spin_us, 7u);        // file beats profile
  EXPECT_EQ(c.settings.inline_size, 32u);   // env beats file
  EXPECT_EQ(c.settings.ring_size, 1u << 20);  // untouched latency value
}

TEST(Config, EnvProfileBeatsFileProfileButKeepsFileSettings) {
  Config c = build({{"VSOCK_PROFILE", "throughput"}}, "profile latency\nset spin_us 3\n");
  EXPECT_EQ(c.settings.profile, Profile::kThroughput);
  EXPECT_EQ(c.settings.spin_us, 3u);
}

TEST(Config, BadEnvValueIsReportedWithVariableNameAndIgnored) {
  Config c = build({{"VSOCK_SPIN_US", "fast"}, {"VSOCK_RING_SIZE", "100000"}, {"VSOCK_TCP", "maybe"}});
  ASSERT_EQ(c.diagnostics.size(), 3u);
  EXPECT_NE(c.diagnostics[0].find("VSOCK_TCP=maybe"), std::string::npos);
  EXPECT_NE(c.diagnostics[1].find("VSOCK_SPIN_US=fast"), std::string::npos);
  EXPECT_NE(c.diagnostics[2].find("VSOCK_RING_SIZE=100000: must be a power of two"), std::string::npos);
  EXPECT_EQ(c.settings.spin_us, 50u);
  EXPECT_EQ(c.settings.tcp, OffloadMode::kOffload);
}

TEST(Config, BadProfileNamesTheVariable) {
  Config c = build({{"VSOCK_PROFILE", "turbo"}});
  ASSERT_EQ(c.diagnostics.size(), 1u);
  EXPECT_EQ(c.diagnostics[0].rfind("VSOCK_PROFILE=turbo", 0), 0u);
  EXPECT_EQ(c.settings.profile, Profile::kDefault);
}

TEST(Config, BadFileLinesNameFileAndLineAndTheRestStillApplies) {
  Config c = build({}, "# comment\n\nset nonsense 1\nset spin_us\ntcp kernel port=22\nudp sometimes\nprofile fast\n"
                       "tcp offload addr=10.0.0.0/99\nset stats yes   # trailing comment\n");
  ASSERT_EQ(c.diagnostics.size(), 5u);
  EXPECT_EQ(c.diagnostics[0].rfind("test.conf:3: unknown setting 'nonsense'", 0), 0u);
  EXPECT_EQ(c.diagnostics[1].rfind("test.conf:4:", 0), 0u);
  EXPECT_EQ(c.diagnostics[2].rfind("test.conf:6: unknown mode 'sometimes'", 0), 0u);
  EXPECT_EQ(c.diagnostics[3].rfind("test.conf:7:", 0), 0u);
  EXPECT_EQ(c.diagnostics[4].rfind("test.conf:8: bad address", 0), 0u);
  ASSERT_EQ(c.rules.size(), 1u);
  EXPECT_EQ(c.rules[0].line, 5);
  EXPECT_TRUE(c.settings.stats);
}

TEST(Config, UdpReceiveSettingsHaveBoundsAndZeroTurnsTheThreadOff) {
  Config defaults = build({});
  EXPECT_EQ(defaults.settings.udp_receive_buffers, 2048u);
  EXPECT_EQ(defaults.settings.udp_progress_us, 1000u);
  Config set = build({{"VSOCK_UDP_PROGRESS_US", "0"}}, "set udp_receive_buffers 4096\n");
  EXPECT_TRUE(set.diagnostics.empty());
  EXPECT_EQ(set.settings.udp_progress_us, 0u);
  EXPECT_EQ(set.settings.udp_receive_buffers, 4096u);
  Config bad = build({{"VSOCK_UDP_RECEIVE_BUFFERS", "8"}, {"VSOCK_UDP_PROGRESS_US", "2000000"}});
  EXPECT_EQ(bad.diagnostics.size(), 2u);
  EXPECT_EQ(bad.settings.udp_receive_buffers, 2048u);
  EXPECT_EQ(bad.settings.udp_progress_us, 1000u);
}

TEST(Config, EpollSweepHasBoundsAndZeroTurnsItOff) {
  EXPECT_EQ(build({}).settings.epoll_sweep_ms, 1000u);
  Config off = build({{"VSOCK_EPOLL_SWEEP_MS", "0"}});
  EXPECT_TRUE(off.diagnostics.empty());
  EXPECT_EQ(off.settings.epoll_sweep_ms, 0u);
  Config bad = build({{"VSOCK_EPOLL_SWEEP_MS", "60001"}});
  EXPECT_EQ(bad.diagnostics.size(), 1u);
  EXPECT_EQ(bad.settings.epoll_sweep_ms, 1000u);
}

TEST(Config, EverySettingHasAnEnvironmentName) {
  int count = 0;
  for_each_setting_name([&](const char* name) {
    EXPECT_TRUE(is_setting_name(name));
    EXPECT_EQ(env_name_of(name).rfind("VSOCK_", 0), 0u);
    ++count;
  });
  EXPECT_EQ(count, kSettingCount);
  EXPECT_EQ(env_name_of("peer_fail_cache_s"), "VSOCK_PEER_FAIL_CACHE_S");
}

TEST(Config, LogLevelAcceptsNamesAndDigits) {
  LogLevel level;
  EXPECT_TRUE(parse_log_level("debug", &level));
  EXPECT_EQ(level, LogLevel::kDebug);
  EXPECT_TRUE(parse_log_level("0", &level));
  EXPECT_EQ(level, LogLevel::kError);
  EXPECT_FALSE(parse_log_level("loud", &level));
  EXPECT_FALSE(parse_log_level("5", &level));
}

}  // namespace
}  // namespace vsock::core
