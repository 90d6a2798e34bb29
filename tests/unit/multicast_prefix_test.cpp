// The udp_mcast_offload setting: its group ranges, as the rules file and
// VSOCK_UDP_MCAST_OFFLOAD give them.
#include "core/multicast_prefix.hpp"

#include <gtest/gtest.h>

#include "core/setting_text.hpp"
#include "core/settings.hpp"

namespace vsock::core {
namespace {

TEST(MulticastPrefix, ParsesAListOfRanges) {
  std::vector<MulticastPrefix> list;
  std::string why;
  ASSERT_TRUE(parse_multicast_prefixes("239.1.0.0/16,224.0.1.129", &list, &why)) << why;
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0], (MulticastPrefix{0xEF010000, 16}));
  EXPECT_EQ(list[1], (MulticastPrefix{0xE0000181, 32}));
  EXPECT_EQ(multicast_prefixes_text(list), "239.1.0.0/16,224.0.1.129/32");
  EXPECT_TRUE(multicast_prefixes_contain(list, 0xEF01FFFF));
  EXPECT_FALSE(multicast_prefixes_contain(list, 0xEF020000));
  EXPECT_TRUE(multicast_prefixes_contain(list, 0xE0000181));
  ASSERT_TRUE(parse_multicast_prefixes("", &list, &why));
  EXPECT_TRUE(list.empty());
  EXPECT_FALSE(multicast_prefixes_contain(list, 0xEF010203));
}

TEST(MulticastPrefix, RefusesWhatIsNotAMulticastRange) {
  std::vector<MulticastPrefix> list{{0xEF000000, 8}};
  std::string why;
  for (const char* bad : {"10.0.0.0/8", "224.0.0.0/3", "239.1.0.0/33", "239.1.0.1/16", "239.1.0", "239.1.0.0/",
                          "239.1.0.0/16,", ",239.1.0.0/16", "239.1.0.256", "239.1.0.0/16 239.2.0.0/16"}) {
    EXPECT_FALSE(parse_multicast_prefixes(bad, &list, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
  // A refused value leaves the list as it was.
  EXPECT_EQ(list.size(), 1u);
  EXPECT_TRUE(parse_multicast_prefixes("224.0.0.0/4", &list, &why));
}

TEST(MulticastPrefix, IsTheSettingUdpMcastOffload) {
  Settings settings;
  EXPECT_TRUE(settings.udp_mcast_offload.empty());  // nothing offloaded by default
  std::string why;
  ASSERT_TRUE(apply_setting(&settings, "udp_mcast_offload", "239.1.0.0/16", &why)) << why;
  EXPECT_EQ(setting_text(settings, "udp_mcast_offload"), "239.1.0.0/16");
  EXPECT_FALSE(apply_setting(&settings, "udp_mcast_offload", "10.0.0.0/8", &why));
  EXPECT_EQ(setting_text(settings, "udp_mcast_offload"), "239.1.0.0/16");
  EXPECT_EQ(env_name_of("udp_mcast_offload"), "VSOCK_UDP_MCAST_OFFLOAD");
}

}  // namespace
}  // namespace vsock::core
