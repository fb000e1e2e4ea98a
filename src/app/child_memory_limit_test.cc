// Where a child's memory limit goes (ChildMemoryLimiter): the cgroup paths read from the
// /proc/self/cgroup and /proc/self/mountinfo formats of cgroups(7) and proc(5), on a pure cgroup
// v2 host, a hybrid host (memory still on v1, as on this project's build machines) and inside a
// container whose cgroup mount's root is not the hierarchy's.
#include "app/child_memory_limit.h"

#include <gtest/gtest.h>

namespace gpuwerk::app {
namespace {

constexpr char kHybridCgroup[] =
    "9:name=systemd:/\n"
    "4:memory:/process_api/abc\n"
    "3:cpuset:/\n"
    "1:cpu,cpuacct:/user.slice\n"
    "0::/\n";
constexpr char kHybridMountinfo[] =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

TEST(ChildMemoryLimitTest, FindsTheUnifiedAndTheV1MemoryGroupOfAHybridHost) {
  EXPECT_EQ(CgroupPathOf(kHybridCgroup, ""), "/");
  EXPECT_EQ(CgroupPathOf(kHybridCgroup, "memory"), "/process_api/abc");
  EXPECT_EQ(CgroupPathOf(kHybridCgroup, "cpuacct"), "/user.slice");
  EXPECT_EQ(CgroupPathOf(kHybridCgroup, "pids"), std::nullopt);
  EXPECT_EQ(CgroupDirOf(kHybridMountinfo, "", "/"),
            std::filesystem::path("/sys/fs/cgroup/unified"));
  EXPECT_EQ(CgroupDirOf(kHybridMountinfo, "memory", "/process_api/abc"),
            std::filesystem::path("/sys/fs/cgroup/memory/process_api/abc"));
  EXPECT_EQ(CgroupDirOf(kHybridMountinfo, "blkio", "/"), std::nullopt);
}

TEST(ChildMemoryLimitTest, FindsTheGroupOfAPureV2HostAndOneInsideAContainer) {
  const std::string cgroup = "0::/system.slice/gpuwerk.service\n";
  const std::string mountinfo =
      "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
      "rw,nsdelegate,memory_recursiveprot\n";
  ASSERT_EQ(CgroupPathOf(cgroup, ""), "/system.slice/gpuwerk.service");
  EXPECT_EQ(CgroupPathOf(cgroup, "memory"), std::nullopt);
  EXPECT_EQ(CgroupDirOf(mountinfo, "", "/system.slice/gpuwerk.service"),
            std::filesystem::path("/sys/fs/cgroup/system.slice/gpuwerk.service"));
  // A bind mount of a sub-tree (its root field is not "/"), with an escaped blank.
  const std::string bound = "40 30 0:26 /docker/abc /mnt/cg\\040x rw - cgroup2 cgroup2 rw\n";
  EXPECT_EQ(CgroupDirOf(bound, "", "/docker/abc/relay"), std::filesystem::path("/mnt/cg x/relay"));
  EXPECT_EQ(CgroupDirOf(bound, "", "/docker/abc"), std::filesystem::path("/mnt/cg x"));
  EXPECT_EQ(CgroupDirOf(bound, "", "/docker/abcd"), std::nullopt);
  EXPECT_EQ(CgroupDirOf(bound, "", "/other"), std::nullopt);
  // Outside the cgroup namespace: not reachable.
  EXPECT_EQ(CgroupPathOf("0::/../sibling\n", ""), std::nullopt);
}

// cgroup v2's "no internal processes" rule: a non-root group with processes cannot enable the
// memory controller for children, so `up` moves its group's processes into a leaf first.
TEST(ChildMemoryLimitTest, CgroupV2PlanMovesIntoALeafOnlyWhenTheRuleNeedsIt) {
  const std::filesystem::path dir = "/sys/fs/cgroup/system.slice/gpuwerk.service";
  const std::string name = "gpuwerk-relay-42";
  // A service's own group: processes, memory available but not enabled for children.
  auto plan = PlanCgroupV2(dir, "/system.slice/gpuwerk.service", "cpu io memory pids\n", "",
                           "42\n43\n", name);
  EXPECT_EQ(plan.refusal, "");
  EXPECT_EQ(plan.leaf, dir / "gpuwerk-up");
  EXPECT_TRUE(plan.enable_memory);
  EXPECT_EQ(plan.group, dir / name);
  // Enabled already (a delegated group whose processes sit in a leaf, or a restart): no move.
  plan = PlanCgroupV2(dir, "/system.slice/gpuwerk.service", "cpu memory\n", "memory\n", "", name);
  EXPECT_EQ(plan.leaf, std::filesystem::path());
  EXPECT_FALSE(plan.enable_memory);
  EXPECT_EQ(plan.group, dir / name);
  // A group without processes of its own: enable, no move.
  plan = PlanCgroupV2(dir, "/system.slice/gpuwerk.service", "memory\n", "", "", name);
  EXPECT_EQ(plan.leaf, std::filesystem::path());
  EXPECT_TRUE(plan.enable_memory);
  // The root is exempt from the rule (a container with its own cgroup namespace).
  plan = PlanCgroupV2("/sys/fs/cgroup", "/", "cpu memory\n", "", "1\n42\n", name);
  EXPECT_EQ(plan.leaf, std::filesystem::path());
  EXPECT_TRUE(plan.enable_memory);
  EXPECT_EQ(plan.group, std::filesystem::path("/sys/fs/cgroup") / name);
  // No memory controller delegated here: cgroup v2 is not used (v1, then RLIMIT_AS).
  plan = PlanCgroupV2(dir, "/system.slice/gpuwerk.service", "cpu pids\n", "", "42\n", name);
  EXPECT_EQ(plan.refusal, "cgroup v2 has no memory controller here");
  EXPECT_EQ(plan.leaf, std::filesystem::path());
  EXPECT_FALSE(plan.enable_memory);
}

TEST(ChildMemoryLimitTest, KindsHaveNames) {
  EXPECT_EQ(MemoryLimitKindName(MemoryLimitKind::kCgroupV2), "cgroup v2");
  EXPECT_EQ(MemoryLimitKindName(MemoryLimitKind::kCgroupV1), "cgroup v1");
  EXPECT_EQ(MemoryLimitKindName(MemoryLimitKind::kAddressSpace), "RLIMIT_AS");
  EXPECT_EQ(MemoryLimitKindName(MemoryLimitKind::kNone), "none");
}

}  // namespace
}  // namespace gpuwerk::app
