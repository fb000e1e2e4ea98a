// DetectDrift and KnownFrom (agent/drift.h): what counts as drift and what does not
// (docs/agent-protocol.md "Drift"). Pure; hermetic.
#include "agent/drift.h"

#include <gtest/gtest.h>

namespace gpuwerk::agent {
namespace {

ContainerInfo Running(const std::string& id, const std::string& instance = "ins_a", int node = 0) {
  return ContainerInfo{.id = id,
                       .name = "gpuwerk-" + instance + "-" + std::to_string(node),
                       .image = "img:1",
                       .labels = {{std::string(kInstanceLabel), instance},
                                  {std::string(kNodeLabel), std::to_string(node)}},
                       .state = ContainerState::kRunning,
                       .started_at = "2026-12-02T01:00:00Z",
                       .memory_bytes = 1 << 30,
                       .nano_cpus = 2000000000,
                       .pids_limit = 4096};
}

std::vector<DesiredContainer> Desired(const std::string& instance = "ins_a", int nodes = 1) {
  std::vector<DesiredContainer> out;
  for (int n = 0; n < nodes; ++n) {
    out.push_back({.instance_id = instance,
                   .node_index = n,
                   .container_name = "gpuwerk-" + instance + "-" + std::to_string(n),
                   .image = "img:1"});
  }
  return out;
}

/// `before` as the agent knows it after a round in which `ready` were ready.
KnownContainers Known(const std::vector<ContainerInfo>& before, std::set<std::string> ready) {
  return KnownFrom(before, ready);
}

TEST(DriftTest, NothingChangedIsNoDrift) {
  const std::vector<ContainerInfo> now = {Running("c1")};
  EXPECT_TRUE(DetectDrift(Known(now, {"c1"}), now, {}, {}, Desired()).empty());
  // The first observation (nothing known yet) tells nothing either.
  EXPECT_TRUE(DetectDrift({}, now, {}, {}, Desired()).empty());
}

TEST(DriftTest, AServingContainerStoppedBehindTheAgentsBackIsStopped) {
  const KnownContainers before = Known({Running("c1")}, {"c1"});
  ContainerInfo stopped = Running("c1");
  stopped.state = ContainerState::kExited;
  stopped.exit_code = 0;
  stopped.finished_at = "2026-12-02T01:05:00Z";
  auto drift = DetectDrift(before, {stopped}, {}, {}, Desired());
  ASSERT_EQ(drift.size(), 1u);
  EXPECT_EQ(drift[0].kind, "stopped");
  EXPECT_EQ(drift[0].instance_id, "ins_a");
  EXPECT_EQ(drift[0].node_index, 0);
  EXPECT_EQ(drift[0].container_id, "c1");
  EXPECT_EQ(drift[0].exit_code, 0);
  EXPECT_EQ(drift[0].at, "2026-12-02T01:05:00Z");
  EXPECT_FALSE(drift[0].oom_killed);

  stopped.exit_code = 137;
  stopped.oom_killed = true;
  drift = DetectDrift(before, {stopped}, {}, {}, Desired());
  ASSERT_EQ(drift.size(), 1u);
  EXPECT_EQ(drift[0].exit_code, 137);
  EXPECT_TRUE(drift[0].oom_killed);
}

TEST(DriftTest, TheAgentsOwnStepsAreNeverDrift) {
  const KnownContainers before = Known({Running("c1")}, {"c1"});
  ContainerInfo restarted = Running("c1");
  restarted.started_at = "2026-12-02T01:06:00Z";
  // Its own restart (a restart generation) and its own removal.
  EXPECT_TRUE(DetectDrift(before, {restarted}, {"c1"}, {"c1"}, Desired()).empty());
  EXPECT_TRUE(DetectDrift(before, {}, {"c1"}, {}, Desired()).empty());
  // Started or restarted by the agent lately (the engine carried the restart out after the
  // observation that followed it): a new start or a stop is its own, a removal is not.
  EXPECT_TRUE(DetectDrift(before, {restarted}, {}, {"c1"}, Desired()).empty());
  ContainerInfo exited = Running("c1");
  exited.state = ContainerState::kExited;
  EXPECT_TRUE(DetectDrift(before, {exited}, {}, {"c1"}, Desired()).empty());
  auto removed = DetectDrift(before, {}, {}, {"c1"}, Desired());
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].kind, "removed");
  // Nor does its own step hide a change of the spec (which the agent never makes).
  ContainerInfo updated = restarted;
  updated.nano_cpus = 1;
  auto changed = DetectDrift(before, {updated}, {"c1"}, {"c1"}, Desired());
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].kind, "changed");
  // A container no desired entry names is the agent's to remove: its disappearance is not drift.
  EXPECT_TRUE(DetectDrift(before, {}, {}, {}, Desired("ins_other")).empty());
}

TEST(DriftTest, AContainerThatNeverServedIsNotStoppedDrift) {
  // Running but never ready (sshd crashes right after each start: the agent's start back-off
  // and the "keeps exiting" reason cover it): its exit is not reported as drift.
  const KnownContainers before = Known({Running("c1")}, {});
  ContainerInfo exited = Running("c1");
  exited.state = ContainerState::kExited;
  exited.exit_code = 255;
  EXPECT_TRUE(DetectDrift(before, {exited}, {}, {}, Desired()).empty());
  // Nor a container that was already stopped.
  EXPECT_TRUE(DetectDrift(Known({exited}, {}), {exited}, {}, {}, Desired()).empty());
}

TEST(DriftTest, RestartedByHandIsRestarted) {
  const KnownContainers before = Known({Running("c1")}, {"c1"});
  ContainerInfo again = Running("c1");
  again.started_at = "2026-12-02T01:07:00Z";
  auto drift = DetectDrift(before, {again}, {}, {}, Desired());
  ASSERT_EQ(drift.size(), 1u);
  EXPECT_EQ(drift[0].kind, "restarted");
  EXPECT_EQ(drift[0].at, "2026-12-02T01:07:00Z");
}

TEST(DriftTest, RemovedIsRemovedAndNotYetRecreated) {
  const KnownContainers before = Known({Running("c1"), Running("c2", "ins_a", 1)}, {"c1", "c2"});
  auto drift = DetectDrift(before, {Running("c2", "ins_a", 1)}, {}, {}, Desired("ins_a", 2));
  ASSERT_EQ(drift.size(), 1u);
  EXPECT_EQ(drift[0].kind, "removed");
  EXPECT_EQ(drift[0].node_index, 0);
  EXPECT_EQ(drift[0].container_id, "c1");
  EXPECT_FALSE(drift[0].recreated);
  EXPECT_EQ(drift[0].new_container_id, "");
  // Replaced by someone else's container with the same labels: the known one is still gone.
  drift =
      DetectDrift(before, {Running("c9"), Running("c2", "ins_a", 1)}, {}, {}, Desired("ins_a", 2));
  ASSERT_EQ(drift.size(), 1u);
  EXPECT_EQ(drift[0].kind, "removed");
  EXPECT_EQ(drift[0].container_id, "c1");
}

TEST(DriftTest, PausedAndChangedSpecsAreReported) {
  const KnownContainers before = Known({Running("c1")}, {"c1"});
  ContainerInfo paused = Running("c1");
  paused.state = ContainerState::kPaused;
  auto drift = DetectDrift(before, {paused}, {}, {}, Desired());
  ASSERT_EQ(drift.size(), 1u);
  EXPECT_EQ(drift[0].kind, "paused");
  // Paused already: said once.
  EXPECT_TRUE(DetectDrift(Known({paused}, {}), {paused}, {}, {}, Desired()).empty());

  ContainerInfo updated = Running("c1");
  updated.memory_bytes = 8LL << 30;  // docker update --memory
  updated.pids_limit = 0;
  updated.name = "renamed";
  drift = DetectDrift(before, {updated}, {}, {}, Desired());
  ASSERT_EQ(drift.size(), 1u);
  EXPECT_EQ(drift[0].kind, "changed");
  EXPECT_EQ(drift[0].changes, (std::vector<std::string>{"name", "memory", "pids"}));
  // Said once: the next round compares with what it saw this time.
  EXPECT_TRUE(DetectDrift(Known({updated}, {"c1"}), {updated}, {}, {}, Desired()).empty());
}

TEST(DriftTest, WhatTheEngineCouldNotInspectTellsNothingButARemoval) {
  ContainerInfo unknown = Running("c1");
  unknown.state = ContainerState::kUnknown;
  unknown.memory_bytes = 0;  // from the list: not inspected
  const KnownContainers before = Known({Running("c1")}, {"c1"});
  EXPECT_TRUE(DetectDrift(before, {unknown}, {}, {}, Desired()).empty());
  // Known only by id (the last round could not inspect it, or the agent restarted and read its
  // state file): no comparison of fields, but its removal is told.
  const KnownContainers id_only = Known({unknown}, {});
  ASSERT_TRUE(id_only.at({"ins_a", 0}).id_only);
  EXPECT_TRUE(DetectDrift(id_only, {Running("c1")}, {}, {}, Desired()).empty());
  auto drift = DetectDrift(id_only, {}, {}, {}, Desired());
  ASSERT_EQ(drift.size(), 1u);
  EXPECT_EQ(drift[0].kind, "removed");
}

TEST(DriftTest, KnownFromPrefersTheRunningContainerOfAKey) {
  ContainerInfo old = Running("a0");
  old.state = ContainerState::kExited;
  const KnownContainers known = KnownFrom({old, Running("b1")}, {"b1"});
  ASSERT_EQ(known.size(), 1u);
  EXPECT_EQ(known.at({"ins_a", 0}).container_id, "b1");
  EXPECT_TRUE(known.at({"ins_a", 0}).ready);
}

}  // namespace
}  // namespace gpuwerk::agent
