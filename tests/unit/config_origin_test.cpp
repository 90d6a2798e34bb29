// Where each setting's value came from (vsock-info shows it), and the text
// of each value, which must read back to the same value.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/config.hpp"
#include "core/setting_text.hpp"

namespace vsock::core {
namespace {

std::map<std::string, std::string> g_origin_env;

const char* origin_env(const char* name) {
  auto it = g_origin_env.find(name);
  return it == g_origin_env.end() ? nullptr : it->second.c_str();
}

Config build_with(std::map<std::string, std::string> env, const char* file = nullptr) {
  g_origin_env = std::move(env);
  std::string text = file ? file : "";
  return build_config(origin_env, "rules.conf", file ? &text : nullptr);
}

std::string origin(const Config& c, const char* name) { return describe_origin(origin_of(c, name)); }

TEST(ConfigOrigin, EverySettingIsDefaultWithoutEnvOrFile) {
  Config c = build_with({});
  ASSERT_EQ(c.origins.size(), static_cast<size_t>(kSettingCount));
  for_each_setting_name([&](const char* name) { EXPECT_EQ(origin(c, name), "default") << name; });
}

TEST(ConfigOrigin, EachLayerNamesItself) {
  Config c = build_with({{"VSOCK_INLINE_SIZE", "32"}, {"VSOCK_STATS", "1"}},
                        "# comment\nprofile latency\nset spin_us 7\nset inline_size 99\ntcp kernel port=22\n");
  ASSERT_TRUE(c.diagnostics.empty());
  EXPECT_EQ(origin(c, "profile"), "rules.conf:2");
  EXPECT_EQ(origin(c, "spin_us"), "rules.conf:3");
  EXPECT_EQ(origin(c, "inline_size"), "env VSOCK_INLINE_SIZE");  // env beats the file line
  EXPECT_EQ(origin(c, "stats"), "env VSOCK_STATS");
  EXPECT_EQ(origin(c, "ring_size"), "profile latency");
  EXPECT_EQ(origin(c, "nagle"), "profile latency");
  EXPECT_EQ(origin(c, "upgrade_timeout_ms"), "default");  // not in the bundle
  EXPECT_EQ(origin(c, "log_level"), "default");
}

TEST(ConfigOrigin, EnvProfileOverridesFileProfile) {
  Config c = build_with({{"VSOCK_PROFILE", "throughput"}}, "profile latency\n");
  EXPECT_EQ(origin(c, "profile"), "env VSOCK_PROFILE");
  EXPECT_EQ(origin(c, "sq_depth"), "profile throughput");
}

TEST(ConfigOrigin, RejectedValuesLeaveTheOriginAlone) {
  Config c = build_with({{"VSOCK_SPIN_US", "fast"}, {"VSOCK_PROFILE", "warp"}}, "set ring_size 3\n");
  EXPECT_EQ(c.diagnostics.size(), 3u);
  EXPECT_EQ(origin(c, "spin_us"), "default");
  EXPECT_EQ(origin(c, "ring_size"), "default");
  EXPECT_EQ(origin(c, "profile"), "default");
}

TEST(ConfigOrigin, UnknownNameIsDefault) { EXPECT_EQ(origin(build_with({}), "no_such_setting"), "default"); }

TEST(SettingText, EveryValueReadsBack) {
  Config c = build_with({{"VSOCK_DEVICE", "rxe0"}, {"VSOCK_LOG_FILE", "/tmp/x.log"}, {"VSOCK_TCP", "kernel"}},
                        "profile throughput\n");
  for_each_setting_name([&](const char* name) {
    std::string text = setting_text(c.settings, name);
    if (std::string(name) == "device" || std::string(name) == "log_file") {
      EXPECT_FALSE(text.empty()) << name;
    }
    Settings copy;
    std::string why;
    ASSERT_TRUE(apply_setting(&copy, name, text, &why)) << name << "=" << text << ": " << why;
    EXPECT_EQ(setting_text(copy, name), text) << name;
  });
  EXPECT_EQ(setting_text(c.settings, "tcp"), "kernel");
  EXPECT_EQ(setting_text(c.settings, "ring_size"), std::to_string(8u << 20));
  EXPECT_EQ(setting_text(c.settings, "autocork"), "on");
  EXPECT_EQ(setting_text(Settings{}, "log_file"), "stderr");
  EXPECT_EQ(setting_text(Settings{}, "no_such_setting"), "");
}

TEST(SettingText, ProfileSettingsAreTheBundle) {
  EXPECT_TRUE(is_profile_setting("spin_us"));
  EXPECT_TRUE(is_profile_setting("cq_mod_us"));
  EXPECT_FALSE(is_profile_setting("profile"));
  EXPECT_FALSE(is_profile_setting("upgrade_timeout_ms"));
  // apply_profile changes exactly the bundle: compare two profiles.
  Settings a, b;
  apply_profile(&a, Profile::kLatency);
  apply_profile(&b, Profile::kThroughput);
  for_each_setting_name([&](const char* name) {
    if (std::string(name) == "profile") return;
    if (!is_profile_setting(name)) {
      EXPECT_EQ(setting_text(a, name), setting_text(b, name)) << name;
    }
  });
}

}  // namespace
}  // namespace vsock::core
