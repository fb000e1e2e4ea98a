// Docker inside and the runtime settings of every instance (agent/instance_runtime.h): the host
// configuration's parsing, the inner daemon's configuration, and the create request DockerEngine
// sends for each mode, read back from a stand-in engine socket (Sysbox cannot be installed here;
// the real engine runs the privileged mode in tests/e2e/instances_e2e_test.cc).
#include "agent/instance_runtime.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/docker_engine.h"
#include "agent/testing/stand_in_engine.h"

namespace gpuwerk::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using testing::StandInEngine;

TEST(DockerInsideTest, ParsesTheThreeModesAndNamesThemOnBadInput) {
  EXPECT_EQ(*ParseDockerInside("off"), DockerInside::kOff);
  EXPECT_EQ(*ParseDockerInside("sysbox"), DockerInside::kSysbox);
  EXPECT_EQ(*ParseDockerInside("privileged"), DockerInside::kPrivileged);
  for (const char* bad : {"", "on", "Privileged", "dind", "sysbox-runc", "privileged\n"}) {
    auto r = ParseDockerInside(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().api_code, "invalid_config");
    EXPECT_NE(r.error().message.find("off, sysbox or privileged"), std::string::npos)
        << r.error().message;
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos) << r.error().message;
  }
  for (DockerInside m : {DockerInside::kOff, DockerInside::kSysbox, DockerInside::kPrivileged}) {
    EXPECT_EQ(*ParseDockerInside(DockerInsideName(m)), m);
  }
}

TEST(DockerInsideTest, ResolveChecksTheShmSizeAgainstTheHost) {
  auto r = ResolveInstanceRuntime("off", kDefaultShmBytes, uint64_t{128} << 30);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->docker_inside, DockerInside::kOff);
  EXPECT_EQ(r->shm_bytes, int64_t{16} << 30);
  EXPECT_EQ(ResolveInstanceRuntime("privileged", kMinShmBytes, 0)->shm_bytes, kMinShmBytes);
  // 0: automatic, 16 GiB or half the host's memory where that is less.
  EXPECT_EQ(ResolveInstanceRuntime("off", 0, uint64_t{128} << 30)->shm_bytes, int64_t{16} << 30);
  EXPECT_EQ(ResolveInstanceRuntime("off", 0, uint64_t{8} << 30)->shm_bytes, int64_t{4} << 30);
  EXPECT_EQ(ResolveInstanceRuntime("off", 0, 0)->shm_bytes, int64_t{16} << 30);
  auto small = ResolveInstanceRuntime("off", kMinShmBytes - 1, 0);
  ASSERT_FALSE(small);
  EXPECT_NE(small.error().message.find("instance_shm_bytes"), std::string::npos);
  auto big = ResolveInstanceRuntime("off", int64_t{8} << 30, uint64_t{4} << 30);
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("host's memory"), std::string::npos);
  auto mode = ResolveInstanceRuntime("yes", kDefaultShmBytes, 0);
  ASSERT_FALSE(mode);
  EXPECT_NE(mode.error().message.find("\"yes\""), std::string::npos) << mode.error().message;
}

// The instance's Docker configuration names the NVIDIA runtime when the host reports a GPU.
TEST(DockerInsideTest, InnerDaemonConfigNamesTheNvidiaRuntimeOnAGpuHostOnly) {
  const json gpu = json::parse(InnerDockerdConfig(true));
  EXPECT_EQ(gpu, json::parse(R"({"runtimes":{"nvidia":{"path":"nvidia-container-runtime"}}})"));
  EXPECT_EQ(json::parse(InnerDockerdConfig(false)), json::object());
  EXPECT_EQ(InnerDockerdConfig(true).find('\n'), std::string::npos);
}

bool HasEnv(const ContainerSpec& spec, const std::string& entry) {
  return std::ranges::find(spec.env, entry) != spec.env.end();
}

TEST(DockerInsideTest, ApplyGivesEveryModeShmAndMemlock) {
  for (DockerInside m : {DockerInside::kOff, DockerInside::kSysbox, DockerInside::kPrivileged}) {
    ContainerSpec spec;
    ApplyInstanceRuntime(
        {.docker_inside = m, .shm_bytes = int64_t{1} << 30, .memlock_unlimited = true}, spec);
    EXPECT_EQ(spec.shm_size_bytes, int64_t{1} << 30);
    ASSERT_EQ(spec.ulimits.size(), 1u);
    EXPECT_EQ(spec.ulimits[0], (Ulimit{.name = "memlock", .soft = -1, .hard = -1}));
    EXPECT_TRUE(HasEnv(spec, "GPUWERK_DOCKER_INSIDE=" + std::string(DockerInsideName(m))));
  }
  ContainerSpec off;
  ApplyInstanceRuntime({}, off);
  EXPECT_FALSE(off.privileged);
  EXPECT_TRUE(off.runtime.empty());
  EXPECT_TRUE(off.no_new_privileges);
  EXPECT_TRUE(off.volumes.empty());
  EXPECT_EQ(off.env.size(), 1u);  // no daemon configuration where the daemon cannot run
  EXPECT_TRUE(InstanceRuntimeWarnings({}).empty());
  const auto privileged = InstanceRuntimeWarnings({.docker_inside = DockerInside::kPrivileged});
  ASSERT_EQ(privileged.size(), 1u);
  EXPECT_NE(privileged[0].find("root on the host"), std::string::npos);
}

// A host whose processes cannot raise limits (no CAP_SYS_RESOURCE): asking the engine for
// memlock unlimited would fail every start, so nothing is asked and the inventory says so.
TEST(DockerInsideTest, MemlockIsNotAskedForWhereTheHostCannotRaiseLimits) {
  auto r = ResolveInstanceRuntime("off", kDefaultShmBytes, 0, /*can_raise_limits=*/false);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->memlock_unlimited);
  ContainerSpec spec;
  ApplyInstanceRuntime(*r, spec);
  EXPECT_TRUE(spec.ulimits.empty());
  EXPECT_EQ(spec.shm_size_bytes, kDefaultShmBytes);
  EXPECT_TRUE(kMemlockNotRaised.starts_with("memlock: "));
  EXPECT_TRUE(ResolveInstanceRuntime("off", kDefaultShmBytes, 0)->memlock_unlimited);
}

class InstanceRuntimeCreateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpuwerk-runtime-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    socket_ = (dir_ / "engine.sock").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// The body DockerEngine sends for `spec` after ApplyInstanceRuntime(`runtime`).
  json CreateBody(const InstanceRuntime& runtime, bool gpu) {
    StandInEngine stand_in(socket_, [](const std::string&) {
      return StandInEngine::Json(201, R"({"Id":"abc123","Warnings":[]})");
    });
    EXPECT_TRUE(stand_in.ok());
    DockerEngine engine({.socket_path = socket_, .timeout = std::chrono::seconds(5)});
    ContainerSpec spec{.name = "alpha", .image = "localhost/gpuwerk-instance:bookworm"};
    spec.gpu = gpu;
    ApplyInstanceRuntime(runtime, spec);
    auto id = engine.CreateContainer(spec, milliseconds(0));
    EXPECT_TRUE(id) << id.error().message;
    EXPECT_EQ(stand_in.requests().at(0), "POST /v1.41/containers/create?name=alpha HTTP/1.1");
    return json::parse(stand_in.bodies().at(0));
  }

  static bool EnvHas(const json& body, const std::string& entry) {
    const auto& env = body.at("Env");
    return std::find(env.begin(), env.end(), entry) != env.end();
  }

  fs::path dir_;
  std::string socket_;
};

TEST_F(InstanceRuntimeCreateTest, OffKeepsTheMinimalCapabilitiesAndSetsShmAndMemlock) {
  const json body =
      CreateBody({.shm_bytes = int64_t{2} << 30, .memlock_unlimited = true}, /*gpu=*/false);
  const json& host = body.at("HostConfig");
  EXPECT_EQ(host.at("ShmSize"), int64_t{2} << 30);
  EXPECT_EQ(host.at("Ulimits"), json::parse(R"([{"Name":"memlock","Soft":-1,"Hard":-1}])"));
  EXPECT_FALSE(host.contains("Privileged"));
  EXPECT_FALSE(host.contains("Runtime"));
  EXPECT_EQ(host.at("CapDrop"), json::parse(R"(["ALL"])"));
  EXPECT_EQ(host.at("CapAdd").size(), kInstanceCapabilities.size());
  EXPECT_EQ(host.at("SecurityOpt"), json::parse(R"(["no-new-privileges"])"));
  EXPECT_FALSE(body.contains("Volumes"));
  EXPECT_TRUE(EnvHas(body, "GPUWERK_DOCKER_INSIDE=off"));
}

TEST_F(InstanceRuntimeCreateTest, SysboxRunsUnderSysboxRuncWithoutPrivileges) {
  for (const bool gpu : {false, true}) {
    const json body = CreateBody({.docker_inside = DockerInside::kSysbox}, gpu);
    const json& host = body.at("HostConfig");
    EXPECT_EQ(host.at("Runtime"), "sysbox-runc") << "gpu " << gpu;  // in place of nvidia
    EXPECT_FALSE(host.contains("Privileged"));
    EXPECT_EQ(host.at("CapDrop"), json::parse(R"(["ALL"])"));
    EXPECT_FALSE(host.contains("SecurityOpt"));
    EXPECT_EQ(host.at("ShmSize"), kDefaultShmBytes);
    EXPECT_EQ(body.at("Volumes"), json::parse(R"({"/var/lib/docker":{}})"));
    EXPECT_TRUE(EnvHas(body, "GPUWERK_DOCKER_INSIDE=sysbox"));
    EXPECT_TRUE(EnvHas(body, "GPUWERK_DOCKERD_CONFIG=" + InnerDockerdConfig(gpu)));
  }
}

TEST_F(InstanceRuntimeCreateTest, PrivilegedIsPrivilegedAndKeepsTheNvidiaRuntimeOnAGpuHost) {
  const json body = CreateBody(
      {.docker_inside = DockerInside::kPrivileged, .memlock_unlimited = true}, /*gpu=*/true);
  const json& host = body.at("HostConfig");
  EXPECT_EQ(host.at("Privileged"), true);
  // The engine gives a privileged container every capability: no list is sent to contradict it.
  EXPECT_FALSE(host.contains("CapDrop"));
  EXPECT_FALSE(host.contains("CapAdd"));
  EXPECT_FALSE(host.contains("SecurityOpt"));
  EXPECT_EQ(host.at("Runtime"), "nvidia");
  EXPECT_TRUE(EnvHas(body, "NVIDIA_VISIBLE_DEVICES=all"));
  EXPECT_EQ(host.at("Ulimits"), json::parse(R"([{"Name":"memlock","Soft":-1,"Hard":-1}])"));
  EXPECT_EQ(body.at("Volumes"), json::parse(R"({"/var/lib/docker":{}})"));
  EXPECT_TRUE(EnvHas(body, "GPUWERK_DOCKER_INSIDE=privileged"));
  EXPECT_TRUE(EnvHas(
      body,
      R"(GPUWERK_DOCKERD_CONFIG={"runtimes":{"nvidia":{"path":"nvidia-container-runtime"}}})"));
  // Without a GPU: no nvidia runtime outside, none in the inner daemon's configuration.
  const json plain = CreateBody({.docker_inside = DockerInside::kPrivileged}, /*gpu=*/false);
  EXPECT_FALSE(plain.at("HostConfig").contains("Runtime"));
  EXPECT_TRUE(EnvHas(plain, "GPUWERK_DOCKERD_CONFIG={}"));
}

TEST_F(InstanceRuntimeCreateTest, BadVolumesAndUlimitsAreRefusedBeforeAnyRequest) {
  StandInEngine stand_in(
      socket_, [](const std::string&) { return StandInEngine::Json(201, R"({"Id":"abc123"})"); });
  DockerEngine engine({.socket_path = socket_});
  for (const char* v : {"var/lib/docker", "/a:b", "/a\nb"}) {
    auto r = engine.CreateContainer({.image = "x", .volumes = {v}}, milliseconds(0));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().api_code, "invalid_container_spec");
  }
  auto r = engine.CreateContainer(
      {.image = "x", .ulimits = {{.name = "memlock", .soft = -2, .hard = -1}}}, milliseconds(0));
  ASSERT_FALSE(r);
  auto shm = engine.CreateContainer({.image = "x", .shm_size_bytes = -1}, milliseconds(0));
  ASSERT_FALSE(shm);
  EXPECT_TRUE(stand_in.requests().empty());
}

}  // namespace
}  // namespace gpuwerk::agent
