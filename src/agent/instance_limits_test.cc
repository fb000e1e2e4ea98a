// The per-instance limits and capability set resolved from host configuration (hermetic).
#include "agent/instance_limits.h"

#include <gtest/gtest.h>

namespace gpuwerk::agent {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(InstanceLimitsTest, DefaultsLeaveHeadroomForTheHost) {
  auto limits = ResolveInstanceLimits({}, 128 * kGiB, 20);
  ASSERT_TRUE(limits) << limits.error().message;
  EXPECT_EQ(limits->memory_bytes, 124 * kGiB);
  EXPECT_EQ(limits->nano_cpus, 19'000'000'000);
  EXPECT_EQ(limits->pids_limit, 4096);
  EXPECT_EQ(limits->capabilities,
            std::vector<std::string>(kInstanceCapabilities.begin(), kInstanceCapabilities.end()));
  ASSERT_EQ(limits->not_enforced.size(), 1u);
  EXPECT_TRUE(limits->not_enforced[0].starts_with("disk: ")) << limits->not_enforced[0];

  // A small host keeps at least half for the instance.
  limits = ResolveInstanceLimits({}, 6 * kGiB, 1);
  ASSERT_TRUE(limits);
  EXPECT_EQ(limits->memory_bytes, 3 * kGiB);
  EXPECT_EQ(limits->nano_cpus, 500'000'000);
}

TEST(InstanceLimitsTest, ExplicitValuesWin) {
  auto limits = ResolveInstanceLimits({.memory_bytes = 8 * kGiB,
                                       .cpus = "2.5",
                                       .pids_limit = 300,
                                       .extra_capabilities = {"net_raw", "CAP_CHOWN"}},
                                      128 * kGiB, 20);
  ASSERT_TRUE(limits) << limits.error().message;
  EXPECT_EQ(limits->memory_bytes, 8 * kGiB);
  EXPECT_EQ(limits->nano_cpus, 2'500'000'000);
  EXPECT_EQ(limits->pids_limit, 300);
  EXPECT_EQ(limits->capabilities.size(), kInstanceCapabilities.size() + 1);
  EXPECT_EQ(limits->capabilities.back(), "CAP_NET_RAW");
}

TEST(InstanceLimitsTest, BadSettingsAreRefusedByName) {
  struct Case {
    InstanceLimitSettings settings;
    std::string code;
    std::string says;
  };
  const Case cases[] = {
      {{.memory_bytes = -1}, "invalid_config", "instance_memory_bytes"},
      {{.memory_bytes = 200 * kGiB}, "invalid_config", "instance_memory_bytes"},
      {{.cpus = "0"}, "invalid_config", "'0'"},
      {{.cpus = "-1"}, "invalid_config", "'-1'"},
      {{.cpus = "1e3"}, "invalid_config", "'1e3'"},
      {{.cpus = "1.2345"}, "invalid_config", "'1.2345'"},
      {{.cpus = "21"}, "invalid_config", "instance_cpus"},
      {{.cpus_reserved = "x"}, "invalid_config", "'x'"},
      {{.pids_limit = 0}, "invalid_config", "instance_pids_limit"},
      {{.extra_capabilities = {"ALL"}}, "invalid_capability", "'ALL'"},
      {{.extra_capabilities = {"CAP_NOPE"}}, "invalid_capability", "CAP_NOPE"},
  };
  for (const Case& c : cases) {
    auto limits = ResolveInstanceLimits(c.settings, 128 * kGiB, 20);
    ASSERT_FALSE(limits) << c.says;
    EXPECT_EQ(limits.error().api_code, c.code) << c.says;
    EXPECT_NE(limits.error().message.find(c.says), std::string::npos) << limits.error().message;
  }
}

TEST(InstanceLimitsTest, CpusParseAsDecimals) {
  EXPECT_EQ(ParseCpus("1").value(), 1'000'000'000);
  EXPECT_EQ(ParseCpus("0.5").value(), 500'000'000);
  EXPECT_EQ(ParseCpus("7.25").value(), 7'250'000'000);
  EXPECT_EQ(ParseCpus("0.001").value(), 1'000'000);
  for (const char* bad : {"", ".", "1.", ".5", "1,5", " 1", "+1", "0.0", "1234567"}) {
    EXPECT_FALSE(ParseCpus(bad)) << bad;
  }
}

TEST(InstanceLimitsTest, CapabilityMaskIsWhatProcShows) {
  // /proc/1/status CapEff of a container with exactly the instance set (seen on podman 4.3).
  EXPECT_EQ(CapabilityMask({kInstanceCapabilities.begin(), kInstanceCapabilities.end()}),
            0x200404ebu);
  EXPECT_EQ(CapabilityMask({"CAP_NET_RAW"}), uint64_t{1} << 13);
  EXPECT_EQ(NormaliseCapability("sys_chroot").value(), "CAP_SYS_CHROOT");
}

}  // namespace
}  // namespace gpuwerk::agent
