#include "agent/container_engine.h"

#include <gtest/gtest.h>

namespace gpuwerk::agent {
namespace {

TEST(ContainerStateTest, C11_EveryDockerStateMapsExplicitly) {
  EXPECT_EQ(ParseContainerState("created"), ContainerState::kCreated);
  EXPECT_EQ(ParseContainerState("running"), ContainerState::kRunning);
  EXPECT_EQ(ParseContainerState("restarting"), ContainerState::kRestarting);
  EXPECT_EQ(ParseContainerState("paused"), ContainerState::kPaused);
  EXPECT_EQ(ParseContainerState("exited"), ContainerState::kExited);
  EXPECT_EQ(ParseContainerState("dead"), ContainerState::kDead);
  EXPECT_EQ(ParseContainerState("removing"), ContainerState::kRemoving);
}

TEST(ContainerStateTest, C11_PodmanStatesMapToTheirDockerMeaning) {
  EXPECT_EQ(ParseContainerState("configured"), ContainerState::kCreated);
  EXPECT_EQ(ParseContainerState("initialized"), ContainerState::kCreated);
  EXPECT_EQ(ParseContainerState("stopped"), ContainerState::kExited);
  EXPECT_EQ(ParseContainerState("stopping"), ContainerState::kExited);
}

TEST(ContainerStateTest, C11_AnythingElseIsUnknownNeverRunning) {
  for (const char* s : {"", "unknown", "Running", "RUNNING", " running", "running ", "up",
                        "healthy", "restarting\n"}) {
    EXPECT_EQ(ParseContainerState(s), ContainerState::kUnknown) << "\"" << s << "\"";
  }
}

TEST(ContainerStateTest, NamesRoundTrip) {
  for (ContainerState s :
       {ContainerState::kCreated, ContainerState::kRunning, ContainerState::kRestarting,
        ContainerState::kPaused, ContainerState::kExited, ContainerState::kDead,
        ContainerState::kRemoving}) {
    EXPECT_EQ(ParseContainerState(ContainerStateName(s)), s);
  }
  EXPECT_EQ(ContainerStateName(ContainerState::kUnknown), "unknown");
}

}  // namespace
}  // namespace gpuwerk::agent
