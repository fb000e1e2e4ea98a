#include "agent/reconciler.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpuwerk::agent {
namespace {

DesiredContainer Want(const std::string& instance, int64_t generation, int node = 0) {
  return DesiredContainer{.instance_id = instance,
                          .node_index = node,
                          .container_name = "gpuwerk-" + instance + "-" + std::to_string(node),
                          .hostname = instance + "-host",
                          .image = "localhost/gpuwerk-instance:bookworm",
                          .authorized_keys = {"ssh-ed25519 AAAA k"},
                          .restart_generation = generation};
}

ContainerInfo Have(const std::string& id, const std::string& instance, ContainerState state,
                   int64_t label_generation = 0, int node = 0) {
  ContainerInfo c;
  c.id = id;
  c.name = "gpuwerk-" + instance + "-" + std::to_string(node);
  c.state = state;
  c.labels = {{"gpuwerk.instance", instance},
              {"gpuwerk.node", std::to_string(node)},
              {"gpuwerk.generation", std::to_string(label_generation)}};
  return c;
}

/// "kind:container_id:generation" per action, in order ("create:<instance>:gen" for creates).
std::vector<std::string> Describe(const std::vector<Action>& actions) {
  std::vector<std::string> out;
  for (const auto& a : actions) {
    const std::string target =
        a.kind == ActionKind::kCreate ? a.desired.instance_id : a.container_id;
    std::string s = std::string(ActionKindName(a.kind)) + ":" + target;
    if (a.kind != ActionKind::kRemove) s += ":" + std::to_string(a.generation);
    out.push_back(s);
  }
  return out;
}

struct Case {
  const char* name;
  std::vector<DesiredContainer> desired;
  std::vector<ContainerInfo> observed;
  AppliedGenerations applied;
  std::vector<std::string> want;
};

class ReconcileTest : public ::testing::TestWithParam<Case> {};

TEST_P(ReconcileTest, GivesTheSteps) {
  const Case& c = GetParam();
  EXPECT_EQ(Describe(Reconcile(c.desired, c.observed, c.applied)), c.want);
}

using S = ContainerState;
INSTANTIATE_TEST_SUITE_P(
    Cases, ReconcileTest,
    ::testing::Values(
        Case{"NothingWantedNothingThere", {}, {}, {}, {}},
        Case{"MissingIsCreated", {Want("ins_a", 0)}, {}, {}, {"create:ins_a:0"}},
        Case{"CreateCarriesTheGeneration", {Want("ins_a", 3)}, {}, {}, {"create:ins_a:3"}},
        Case{"CreatedIsStarted", {Want("ins_a", 0)}, {Have("c1", "ins_a", S::kCreated)}, {},
             {"start:c1:0"}},
        // C12: a `docker stop` by hand, or a host reboot: started again.
        Case{"ExitedIsStartedAgain", {Want("ins_a", 1)}, {Have("c1", "ins_a", S::kExited, 1)}, {},
             {"start:c1:1"}},
        Case{"StoppedWithAPendingRestartIsStartedAtTheNewGeneration",
             {Want("ins_a", 2)},
             {Have("c1", "ins_a", S::kExited, 1)},
             {},
             {"start:c1:2"}},
        // The agent restarted: it adopts a running container and does nothing to it.
        Case{"RunningAdoptedIsLeftAlone", {Want("ins_a", 0)}, {Have("c1", "ins_a", S::kRunning)},
             {}, {}},
        Case{"RunningAtTheLabelGenerationIsLeftAlone",
             {Want("ins_a", 4)},
             {Have("c1", "ins_a", S::kRunning, 4)},
             {},
             {}},
        Case{"RunningRestartedEarlierPerStateFileIsLeftAlone",
             {Want("ins_a", 2)},
             {Have("c1", "ins_a", S::kRunning, 0)},
             {{"c1", 2}},
             {}},
        Case{"HigherGenerationRestarts",
             {Want("ins_a", 2)},
             {Have("c1", "ins_a", S::kRunning, 0)},
             {{"c1", 1}},
             {"restart:c1:2"}},
        Case{"LowerDesiredGenerationDoesNothing",
             {Want("ins_a", 1)},
             {Have("c1", "ins_a", S::kRunning, 3)},
             {},
             {}},
        Case{"StateFileOfAnotherContainerDoesNotCount",
             {Want("ins_a", 2)},
             {Have("c1", "ins_a", S::kRunning, 0)},
             {{"c0", 2}},
             {"restart:c1:2"}},
        // C11: the engine's own restart, an unknown state: wait, never act on a guess.
        Case{"EngineRestartingIsLeftAlone",
             {Want("ins_a", 5)},
             {Have("c1", "ins_a", S::kRestarting)},
             {},
             {}},
        Case{"UnknownStateIsLeftAlone", {Want("ins_a", 5)}, {Have("c1", "ins_a", S::kUnknown)},
             {}, {}},
        Case{"PausedIsLeftAlone", {Want("ins_a", 0)}, {Have("c1", "ins_a", S::kPaused)}, {}, {}},
        Case{"RemovingIsLeftAlone", {Want("ins_a", 0)}, {Have("c1", "ins_a", S::kRemoving)}, {},
             {}},
        Case{"DeadIsRemoved", {Want("ins_a", 0)}, {Have("c1", "ins_a", S::kDead)}, {},
             {"remove:c1"}},
        Case{"UnwantedIsRemoved", {}, {Have("c1", "ins_a", S::kRunning)}, {}, {"remove:c1"}},
        Case{"UnwantedStoppedIsRemoved", {}, {Have("c1", "ins_a", S::kExited)}, {}, {"remove:c1"}},
        Case{"UnwantedRemovingNeedsNothing", {}, {Have("c1", "ins_a", S::kRemoving)}, {}, {}},
        Case{"OtherNodeIsNotTheSame",
             {Want("ins_a", 0, 1)},
             {Have("c1", "ins_a", S::kRunning, 0, 0)},
             {},
             {"remove:c1", "create:ins_a:0"}},
        Case{"DuplicatesKeepTheNamedOne",
             {Want("ins_a", 0)},
             {[] {
                auto c = Have("c0", "ins_a", S::kRunning);
                c.name = "stray";
                return c;
              }(),
              Have("c1", "ins_a", S::kExited)},
             {},
             {"remove:c0", "start:c1:0"}},
        Case{"DuplicatesWithoutTheNameKeepTheRunningOne",
             {[] {
               auto d = Want("ins_a", 0);
               d.container_name = "renamed";
               return d;
             }()},
             {Have("c0", "ins_a", S::kExited), Have("c1", "ins_a", S::kRunning)},
             {},
             {"remove:c0"}},
        Case{"BadNodeLabelIsUnwanted",
             {Want("ins_a", 0)},
             {[] {
               auto c = Have("c1", "ins_a", S::kRunning);
               c.labels["gpuwerk.node"] = "x";
               return c;
             }()},
             {},
             {"remove:c1", "create:ins_a:0"}},
        Case{"BadGenerationLabelCountsAsZero",
             {Want("ins_a", 1)},
             {[] {
               auto c = Have("c1", "ins_a", S::kRunning);
               c.labels["gpuwerk.generation"] = "1x";
               return c;
             }()},
             {},
             {"restart:c1:1"}},
        Case{"DuplicateDesiredEntriesActOnce",
             {Want("ins_a", 0), Want("ins_a", 0)},
             {},
             {},
             {"create:ins_a:0"}},
        Case{"ManyAtOnceRemovalsFirstThenDesiredOrder",
             {Want("ins_b", 0), Want("ins_a", 1), Want("ins_c", 0)},
             {Have("ca", "ins_a", S::kRunning, 0), Have("cb", "ins_b", S::kExited),
              Have("cz", "ins_z", S::kRunning)},
             {},
             {"remove:cz", "start:cb:0", "restart:ca:1", "create:ins_c:0"}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ReconcileTest, ApplyingTheStepsGivesNoMoreSteps) {
  const std::vector<DesiredContainer> desired = {Want("ins_a", 2), Want("ins_b", 0)};
  // What the host looks like once the steps of the first round were applied.
  std::vector<ContainerInfo> after = {Have("ca", "ins_a", S::kRunning, 0),
                                      Have("cb", "ins_b", S::kRunning, 0)};
  AppliedGenerations applied = {{"ca", 2}};
  EXPECT_TRUE(Reconcile(desired, after, applied).empty());
  EXPECT_TRUE(Reconcile(desired, after, applied).empty());
}

TEST(AppliedGenerationTest, LargerOfLabelAndStateFile) {
  EXPECT_EQ(AppliedGeneration(Have("c1", "a", S::kRunning, 3), {}), 3);
  EXPECT_EQ(AppliedGeneration(Have("c1", "a", S::kRunning, 3), {{"c1", 5}}), 5);
  EXPECT_EQ(AppliedGeneration(Have("c1", "a", S::kRunning, 7), {{"c1", 5}}), 7);
  ContainerInfo none;
  none.id = "c2";
  EXPECT_EQ(AppliedGeneration(none, {}), 0);
}

TEST(ReportContainerTest, RunningWithBanner) {
  auto c = Have("c1", "ins_a", S::kRunning, 1);
  c.ssh_port = 40123;
  c.started_at = "2026-11-30T04:10:03Z";
  const ContainerReport r = ReportContainer(c, 2, true, true, "");
  EXPECT_EQ(r.instance_id, "ins_a");
  EXPECT_EQ(r.node_index, 0);
  EXPECT_EQ(r.container_id, "c1");
  EXPECT_EQ(r.state, "running");
  EXPECT_TRUE(r.ssh_ready);
  EXPECT_EQ(r.ssh_port, 40123);
  EXPECT_EQ(r.restart_generation, 2);
  const nlohmann::json j = ToJson(r);
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["ssh_ready"], true);
  EXPECT_EQ(j["started_at"], "2026-11-30T04:10:03Z");
  EXPECT_EQ(j["restart_generation"], 2);
}

// C10: the restart was accepted, the container exited right after: exited, never running.
TEST(ReportContainerTest, C10_ExitedAfterRestartIsExited) {
  auto c = Have("c1", "ins_a", S::kExited, 1);
  c.exit_code = 137;
  const ContainerReport r = ReportContainer(c, 2, /*ssh_ready=*/true, true, "");
  EXPECT_EQ(r.state, "exited");
  EXPECT_EQ(r.exit_code, 137);
  EXPECT_FALSE(r.ssh_ready);
}

// C11: each engine state maps explicitly; a wedged engine gives unknown, never stale running.
TEST(ReportContainerTest, C11_StatesMapExplicitly) {
  const std::vector<std::pair<std::string, std::string>> table = {
      {"created", "created"}, {"configured", "created"},    {"initialized", "created"},
      {"running", "running"}, {"restarting", "restarting"}, {"paused", "paused"},
      {"exited", "exited"},   {"stopped", "exited"},        {"stopping", "exited"},
      {"dead", "dead"},       {"removing", "removing"},     {"", "unknown"},
      {"unknown", "unknown"}, {"Running", "unknown"},       {"zombie", "unknown"}};
  for (const auto& [engine, reported] : table) {
    auto c = Have("c1", "ins_a", ParseContainerState(engine));
    const ContainerReport r = ReportContainer(c, 0, true, true, "");
    EXPECT_EQ(r.state, reported) << engine;
    EXPECT_EQ(r.ssh_ready, reported == "running") << engine;
  }
}

TEST(ReportContainerTest, C11_EngineTimeoutIsUnknownNotStaleRunning) {
  auto c = Have("c1", "ins_a", S::kRunning);
  const ContainerReport r = ReportContainer(c, 0, true, false, "engine_timeout: no answer");
  EXPECT_EQ(r.state, "unknown");
  EXPECT_FALSE(r.ssh_ready);
  EXPECT_EQ(r.error, "engine_timeout: no answer");
}

}  // namespace
}  // namespace gpuwerk::agent
