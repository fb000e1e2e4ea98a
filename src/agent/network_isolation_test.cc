#include "agent/network_isolation.h"

#include <gtest/gtest.h>

#include <string>

namespace gpuwerk::agent {
namespace {

TEST(NetworkIsolationTest, NetworkNamesAreShortStableAndPerInstance) {
  const std::string a = InstanceNetworkName("ins_aaaaaaaaaaaaaaaaaaaaaaaa");
  EXPECT_EQ(a.size(), 15u);  // the longest interface name Linux allows
  EXPECT_TRUE(a.starts_with("gwi"));
  EXPECT_EQ(a, InstanceNetworkName("ins_aaaaaaaaaaaaaaaaaaaaaaaa"));
  EXPECT_NE(a, InstanceNetworkName("ins_aaaaaaaaaaaaaaaaaaaaaaab"));
}

TEST(NetworkIsolationTest, CidrsAreCheckedAndCanonical) {
  bool v6 = true;
  EXPECT_EQ(CanonicalCidr("10.1.2.3/8", &v6).value(), "10.0.0.0/8");
  EXPECT_FALSE(v6);
  EXPECT_EQ(CanonicalCidr("192.0.2.7", &v6).value(), "192.0.2.7/32");
  EXPECT_EQ(CanonicalCidr("fe80::1/10", &v6).value(), "fe80::/10");
  EXPECT_TRUE(v6);
  EXPECT_EQ(CanonicalCidr("fd00::1", nullptr).value(), "fd00::1/128");
  for (const char* bad : {"", "10.0.0.0/33", "10.0.0/8", "10.0.0.0/", "10.0.0.0/x", "::/129",
                          "host.example", "10.0.0.0/8 -j ACCEPT"}) {
    auto r = CanonicalCidr(bad, nullptr);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().api_code, "invalid_cidr") << bad;
  }
}

TEST(NetworkIsolationTest, SettingsParseOnOffAndLists) {
  auto on = ParseNetworkIsolation("on", {"10.0.0.0/8"}, {"10.1.2.3"});
  ASSERT_TRUE(on);
  EXPECT_TRUE(on->enabled);
  EXPECT_EQ(on->allow, std::vector<std::string>{"10.1.2.3/32"});
  auto off = ParseNetworkIsolation("off", {}, {});
  ASSERT_TRUE(off);
  EXPECT_FALSE(off->enabled);
  EXPECT_EQ(ParseNetworkIsolation("yes", {}, {}).error().api_code, "invalid_option");
  EXPECT_EQ(ParseNetworkIsolation("on", {"nope"}, {}).error().api_code, "invalid_option");
  EXPECT_EQ(ParseNetworkIsolation("on", {}, {"1.2.3.4/40"}).error().api_code, "invalid_option");
}

TEST(NetworkIsolationTest, DefaultDenyListHasPrivateLinkLocalAndSharedRanges) {
  const NetworkIsolationSettings s;
  for (const char* range : {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
                            "169.254.0.0/16", "fc00::/7", "fe80::/10"}) {
    EXPECT_NE(std::find(s.deny.begin(), s.deny.end(), range), s.deny.end()) << range;
  }
  EXPECT_TRUE(s.allow.empty());
}

TEST(NetworkIsolationTest, RulesetOrdersRepliesAllowDenyAndKeepsFamiliesApart) {
  NetworkIsolationSettings s;
  s.deny = {"10.0.0.0/8", "fc00::/7"};
  s.allow = {"10.9.9.9/32", "fd00::5/128"};
  const std::string v4 = IsolationRuleset(s, false);
  EXPECT_TRUE(v4.starts_with("*filter\n:GPUWERK-ISOLATION-INPUT - [0:0]\n")) << v4;
  EXPECT_TRUE(v4.ends_with("COMMIT\n")) << v4;
  EXPECT_EQ(v4.find("fc00::"), std::string::npos) << v4;
  EXPECT_EQ(v4.find("fd00::"), std::string::npos) << v4;
  const auto at = [&](const std::string& line) {
    const size_t p = v4.find(line + "\n");
    EXPECT_NE(p, std::string::npos) << "missing: " << line << "\n" << v4;
    return p;
  };
  const std::string rej = " -j REJECT --reject-with icmp-admin-prohibited";
  const size_t in_replies =
      at("-A GPUWERK-ISOLATION-INPUT -i gwi+ -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN");
  const size_t in_allow = at("-A GPUWERK-ISOLATION-INPUT -i gwi+ -d 10.9.9.9/32 -j RETURN");
  const size_t in_reject = at("-A GPUWERK-ISOLATION-INPUT -i gwi+" + rej);
  EXPECT_LT(in_replies, in_allow);
  EXPECT_LT(in_allow, in_reject);
  const size_t fw_between = at("-A GPUWERK-ISOLATION-FORWARD -i gwi+ -o gwi+" + rej);
  const size_t fw_allow = at("-A GPUWERK-ISOLATION-FORWARD -i gwi+ -d 10.9.9.9/32 -j RETURN");
  const size_t fw_deny = at("-A GPUWERK-ISOLATION-FORWARD -i gwi+ -d 10.0.0.0/8" + rej);
  // Another instance is refused even when its range is allowed.
  EXPECT_LT(fw_between, fw_allow);
  EXPECT_LT(fw_allow, fw_deny);
  at("-A GPUWERK-ISOLATION-FORWARD -o gwi+ -m conntrack --ctstate ESTABLISHED,RELATED,DNAT -j "
     "RETURN");
  at("-A GPUWERK-ISOLATION-FORWARD -o gwi+" + rej);
  at("-A GPUWERK-ISOLATION-OUTPUT -o gwi+ -m conntrack --ctstate ESTABLISHED,RELATED,DNAT -j "
     "RETURN");
  at("-A GPUWERK-ISOLATION-OUTPUT -o gwi+" + rej);

  const std::string v6 = IsolationRuleset(s, true);
  EXPECT_NE(v6.find("-A GPUWERK-ISOLATION-FORWARD -i gwi+ -d fc00::/7 -j REJECT --reject-with "
                    "icmp6-adm-prohibited\n"),
            std::string::npos)
      << v6;
  EXPECT_NE(v6.find("-A GPUWERK-ISOLATION-INPUT -i gwi+ -d fd00::5/128 -j RETURN\n"),
            std::string::npos)
      << v6;
  EXPECT_EQ(v6.find("10.0.0.0"), std::string::npos) << v6;
}

}  // namespace
}  // namespace gpuwerk::agent
