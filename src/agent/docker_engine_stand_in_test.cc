// DockerEngine against a stand-in engine socket (hermetic): how answers, missing sockets and a
// wedged engine map to Errors. The real engine is in docker_engine_test.cc.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "agent/docker_engine.h"
#include "agent/testing/stand_in_engine.h"

namespace gpuwerk::agent {
namespace {

namespace fs = std::filesystem;
using core::ErrorCode;
using std::chrono::milliseconds;
using testing::StandInEngine;

class DockerEngineStandInTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpuwerk-engine-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    socket_ = (dir_ / "engine.sock").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  DockerEngine Engine(milliseconds timeout = std::chrono::seconds(5)) {
    return DockerEngine({.socket_path = socket_, .timeout = timeout});
  }

  fs::path dir_;
  std::string socket_;
};

TEST_F(DockerEngineStandInTest, SocketGoneIsUnavailableQuicklyAndNamesTheSocket) {
  DockerEngine engine = Engine();
  const auto start = std::chrono::steady_clock::now();
  auto r = engine.Ping(milliseconds(0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(r.error().api_code, "engine_unavailable");
  EXPECT_NE(r.error().message.find(socket_), std::string::npos) << r.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST_F(DockerEngineStandInTest, C11_WedgedEngineTimesOutWithinTheLimit) {
  StandInEngine wedged(socket_, nullptr);
  ASSERT_TRUE(wedged.ok());
  DockerEngine engine = Engine(std::chrono::seconds(30));
  const auto start = std::chrono::steady_clock::now();
  auto r = engine.InspectContainer("alpha", milliseconds(500));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kDeadlineExceeded);
  EXPECT_EQ(r.error().api_code, "engine_timeout");
  EXPECT_GE(took, milliseconds(450));
  EXPECT_LT(took, milliseconds(1500));
  // The default (Options::timeout) applies when the call passes none.
  DockerEngine quick = Engine(milliseconds(300));
  auto list = quick.ListContainers({}, milliseconds(0));
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().api_code, "engine_timeout");
}

TEST_F(DockerEngineStandInTest, CreateMapsMissingImageAndNameConflicts) {
  int mode = 0;
  StandInEngine stand_in(socket_, [&](const std::string&) {
    switch (mode) {
      case 0:  // Docker and podman: no such image
        return StandInEngine::Json(404, R"({"message":"No such image: localhost/nope:1"})");
      case 1:  // Docker: name taken
        return StandInEngine::Json(409, R"({"message":"Conflict. The container name is in use"})");
      default:  // podman: name taken
        return StandInEngine::Json(
            500, R"({"cause":"that name is already in use","message":"…","response":500})");
    }
  });
  DockerEngine engine = Engine();
  ContainerSpec spec{.name = "alpha", .image = "localhost/nope:1"};
  auto r = engine.CreateContainer(spec, milliseconds(0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(r.error().api_code, "image_not_found");
  EXPECT_NE(r.error().message.find("localhost/nope:1"), std::string::npos);
  for (mode = 1; mode <= 2; ++mode) {
    r = engine.CreateContainer(spec, milliseconds(0));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kAlreadyExists);
    EXPECT_EQ(r.error().api_code, "container_exists");
  }
  EXPECT_EQ(stand_in.requests().front(), "POST /v1.41/containers/create?name=alpha HTTP/1.1");
}

TEST_F(DockerEngineStandInTest, CreateRefusesWildcardSshBindWithoutCallingTheEngine) {
  DockerEngine engine = Engine();
  for (const char* address : {"", "0.0.0.0", "::"}) {
    auto r = engine.CreateContainer({.image = "x", .ssh_bind_address = address}, milliseconds(0));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().api_code, "public_ssh_bind");
  }
}

// The engine seam has no exec call at all (issue 12 finding 9): what the agent puts into a
// container is a read-only bind of a host directory it owns. A bind path that would break the
// "SOURCE:TARGET:ro" syntax, or is relative, is refused before any request.
TEST_F(DockerEngineStandInTest, Finding9_CreateRefusesBindPathsThatBreakTheBindsSyntax) {
  DockerEngine engine = Engine();
  for (const BindMount& bind : {BindMount{.source = "relative/dir", .target = "/etc/ssh/gpuwerk"},
                                BindMount{.source = "/a:b", .target = "/etc/ssh/gpuwerk"},
                                BindMount{.source = "/keys", .target = "/etc/x,rw"},
                                BindMount{.source = "/keys\n", .target = "/etc/ssh/gpuwerk"}}) {
    auto r = engine.CreateContainer({.image = "x", .binds = {bind}}, milliseconds(0));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().api_code, "invalid_bind") << bind.source << " " << bind.target;
  }
}

TEST_F(DockerEngineStandInTest, ConflictsAndServerErrors) {
  std::string answer;
  StandInEngine stand_in(socket_, [&](const std::string&) { return answer; });
  DockerEngine engine = Engine();

  answer = StandInEngine::Json(
      500, R"({"cause":"container state improper","message":"cannot remove a running one"})");
  auto r = engine.RemoveContainer("alpha", false, milliseconds(0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(r.error().api_code, "container_conflict");

  answer = StandInEngine::Json(409, R"({"message":"removal already in progress"})");
  r = engine.RemoveContainer("alpha", true, milliseconds(0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().api_code, "container_conflict");

  answer = StandInEngine::Json(404, R"({"message":"no such container"})");
  EXPECT_TRUE(engine.RemoveContainer("alpha", true, milliseconds(0)));  // idempotent
  auto info = engine.InspectContainer("alpha", milliseconds(0));
  ASSERT_FALSE(info);
  EXPECT_EQ(info.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(info.error().api_code, "container_not_found");

  answer =
      StandInEngine::Json(500, R"({"message":"unknown or invalid runtime name: nvidia"})");  // C13
  r = engine.StartContainer("alpha", milliseconds(0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(r.error().api_code, "engine_error");
  EXPECT_NE(r.error().message.find("unknown or invalid runtime name: nvidia"), std::string::npos);

  answer = "HTTP/1.1 304 Not Modified\r\nConnection: close\r\n\r\n";
  EXPECT_TRUE(engine.StartContainer("alpha", milliseconds(0)));  // already running

  answer = StandInEngine::Json(200, "this is not json");
  info = engine.InspectContainer("alpha", milliseconds(0));
  ASSERT_FALSE(info);
  EXPECT_EQ(info.error().api_code, "engine_bad_response");
}

TEST_F(DockerEngineStandInTest, C11_InspectReadsStateExitCodeAndSshPort) {
  std::string state = "restarting";
  StandInEngine stand_in(socket_, [&](const std::string&) {
    return StandInEngine::Json(200, R"({"Id":"abc123","Name":"/alpha",
      "Config":{"Image":"img:1","Labels":{"io.gpuwerk.instance":"ins_1"}},
      "State":{"Status":")" + state + R"(","ExitCode":137,"OOMKilled":true,"Error":"",
        "StartedAt":"2026-01-02T03:04:05.123456789Z","FinishedAt":"0001-01-01T00:00:00Z"},
      "HostConfig":{"Memory":1073741824,"NanoCpus":2000000000,"PidsLimit":null},
      "NetworkSettings":{"Ports":{"22/tcp":[{"HostIp":"127.0.0.1","HostPort":"40022"}]}}})");
  });
  DockerEngine engine = Engine();
  auto info = engine.InspectContainer("alpha", milliseconds(0));
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->memory_bytes, 1073741824);
  EXPECT_EQ(info->nano_cpus, 2000000000);
  EXPECT_EQ(info->pids_limit, 0);  // null: unset
  EXPECT_EQ(info->id, "abc123");
  EXPECT_EQ(info->name, "alpha");
  EXPECT_EQ(info->image, "img:1");
  EXPECT_EQ(info->labels.at("io.gpuwerk.instance"), "ins_1");
  EXPECT_EQ(info->state, ContainerState::kRestarting);
  EXPECT_EQ(info->exit_code, 137);
  EXPECT_TRUE(info->oom_killed);
  EXPECT_EQ(info->started_at, "2026-01-02T03:04:05.123456789Z");
  EXPECT_EQ(info->finished_at, "0001-01-01T00:00:00Z");
  EXPECT_EQ(info->ssh_port, 40022);
  state = "something-new";
  info = engine.InspectContainer("alpha", milliseconds(0));
  ASSERT_TRUE(info);
  EXPECT_EQ(info->state, ContainerState::kUnknown);
}

TEST_F(DockerEngineStandInTest, ListSendsLabelFilterAndReadsEntries) {
  StandInEngine stand_in(socket_, [&](const std::string&) {
    return StandInEngine::Json(200, R"js([{"Id":"a1","Names":["/alpha"],"Image":"img:1",
      "Labels":{"io.gpuwerk.instance":"ins_1"},"State":"exited","Status":"Exited (0)",
      "Ports":[{"IP":"127.0.0.1","PrivatePort":22,"PublicPort":40022,"Type":"tcp"}]},
      {"Id":"b2","Names":["/beta"],"Image":"img:1","Labels":null,"State":"running","Ports":[]}])js");
  });
  DockerEngine engine = Engine();
  auto list = engine.ListContainers({{"io.gpuwerk.instance", "ins_1"}, {"io.gpuwerk", ""}},
                                    milliseconds(0));
  ASSERT_TRUE(list) << list.error().message;
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "alpha");
  EXPECT_EQ((*list)[0].state, ContainerState::kExited);
  EXPECT_EQ((*list)[0].ssh_port, 40022);
  EXPECT_EQ((*list)[1].name, "beta");
  EXPECT_EQ((*list)[1].state, ContainerState::kRunning);
  EXPECT_EQ((*list)[1].ssh_port, 0);
  // filters={"label":["io.gpuwerk","io.gpuwerk.instance=ins_1"]}, percent-encoded.
  EXPECT_EQ(stand_in.requests().at(0),
            "GET /v1.41/containers/json?all=true&filters=%7B%22label%22%3A%5B%22io.gpuwerk%22%2C%"
            "22io.gpuwerk.instance%3Dins_1%22%5D%7D HTTP/1.1");
}

TEST_F(DockerEngineStandInTest, ImageExistsKeepsTheReferenceInThePath) {
  StandInEngine stand_in(socket_, [&](const std::string& line) {
    return line.find("/nope") != std::string::npos
               ? StandInEngine::Json(404, R"({"message":"No such image"})")
               : StandInEngine::Json(200, R"({"Id":"sha256:1"})");
  });
  DockerEngine engine = Engine();
  auto yes = engine.ImageExists("localhost/gpuwerk-instance:bookworm", milliseconds(0));
  ASSERT_TRUE(yes);
  EXPECT_TRUE(*yes);
  auto no = engine.ImageExists("localhost/nope:1", milliseconds(0));
  ASSERT_TRUE(no);
  EXPECT_FALSE(*no);
  EXPECT_EQ(stand_in.requests().at(0),
            "GET /v1.41/images/localhost/gpuwerk-instance:bookworm/json HTTP/1.1");
}

// A 2-host instance's node joins the rail network with its fixed address (docs/clusters.md).
TEST_F(DockerEngineStandInTest, ConnectNetworkPostsToTheNetworkAndMapsAMissingOne) {
  bool missing = false;
  StandInEngine stand_in(socket_, [&](const std::string&) {
    return missing ? StandInEngine::Json(404, R"({"message":"network gwrail not found"})")
                   : StandInEngine::Json(200, "");
  });
  DockerEngine engine = Engine();
  EXPECT_TRUE(engine.ConnectNetwork("c0ffee", "gwrail", "198.18.0.11", milliseconds(0)));
  EXPECT_EQ(stand_in.requests().at(0), "POST /v1.41/networks/gwrail/connect HTTP/1.1");
  EXPECT_TRUE(engine.ConnectNetwork("c0ffee", "gwrail", "fd00::2", milliseconds(0)));
  missing = true;
  auto r = engine.ConnectNetwork("c0ffee", "gwrail", "198.18.0.11", milliseconds(0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().api_code, "network_not_found");
  // Not an address: refused without asking the engine.
  const size_t asked = stand_in.requests().size();
  r = engine.ConnectNetwork("c0ffee", "gwrail", "198.18.0.11\nx", milliseconds(0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().api_code, "invalid_address");
  EXPECT_EQ(stand_in.requests().size(), asked);
}

}  // namespace
}  // namespace gpuwerk::agent
