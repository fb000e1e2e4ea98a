// Agent and AgentClient against a fake control plane (cli/fake_api_server.h) and an engine that
// is not there or never answers (testing/stand_in_engine.h). Hermetic.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>

#include "agent/agent.h"
#include "agent/agent_client.h"
#include "agent/docker_engine.h"
#include "agent/testing/stand_in_engine.h"
#include "cli/fake_api_server.h"

namespace gpuwerk::agent {
namespace {

using cli::FakeApiServer;
using cli::FakeRequest;
using cli::FakeResponse;
using std::chrono::milliseconds;

std::string TempSocket(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("gw-agent-" + std::to_string(::getpid()) + "-" + name + ".sock"))
      .string();
}

nlohmann::json Desired() {
  return nlohmann::json::parse(R"({"host_id":"hst_1","sync_interval_seconds":1,"desired":[
    {"instance_id":"ins_a","node_index":0,"container_name":"gpuwerk-ins_a-0","hostname":"a",
     "image":"img","authorized_keys":[],"restart_generation":0}]})");
}

TEST(AgentClientTest, SendsBearerTokenAndJson) {
  FakeApiServer server([](const FakeRequest&) {
    return FakeResponse::Json(200, {{"desired", nlohmann::json::array()}});
  });
  AgentClient client(server.url() + "/", "gwh_secret", milliseconds(2000));
  auto r = client.Sync({{"agent_version", "0.1.0"}});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(server.requests().size(), 1u);
  const FakeRequest req = server.requests()[0];
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.path, "/api/v1/agent/sync");
  EXPECT_EQ(req.Header("authorization"), "Bearer gwh_secret");
  EXPECT_EQ(req.Json()["agent_version"], "0.1.0");
}

TEST(AgentClientTest, RefusedTokenIsUnauthenticated) {
  FakeApiServer server([](const FakeRequest&) {
    return FakeResponse::Problem(401, "unauthenticated", "bad token");
  });
  AgentClient client(server.url(), "gwh_wrong", milliseconds(2000));
  auto r = client.Sync({});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, core::ErrorCode::kUnauthenticated);
  EXPECT_EQ(r.error().api_code, "host_token_refused");
  EXPECT_NE(r.error().message.find("host token"), std::string::npos);
  EXPECT_EQ(r.error().message.find("gwh_wrong"), std::string::npos);
}

TEST(AgentClientTest, UnreachableServerIsUnavailable) {
  AgentClient client("http://127.0.0.1:1", "gwh_x", milliseconds(2000));
  auto r = client.Sync({});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, core::ErrorCode::kUnavailable);
  EXPECT_EQ(r.error().api_code, "server_unavailable");
}

TEST(AgentClientTest, ServerErrorCarriesTheCode) {
  FakeApiServer server(
      [](const FakeRequest&) { return FakeResponse::Problem(500, "internal", "boom"); });
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  auto r = client.Sync({});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().api_code, "server_error");
  EXPECT_NE(r.error().message.find("500 internal: boom"), std::string::npos) << r.error().message;
}

// The engine socket is gone: engine {ok:false} with the socket named, no step taken, and the
// agent keeps syncing.
TEST(AgentTest, MissingEngineSocketIsReportedAndRetried) {
  FakeApiServer server([](const FakeRequest&) { return FakeResponse::Json(200, Desired()); });
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  const std::string socket = TempSocket("missing");
  DockerEngine engine({.socket_path = socket, .timeout = milliseconds(500)});
  Agent agent({}, engine, client, Inventory{});
  // The first round only learns the host id (it reports "observed": false, touches nothing).
  auto first = agent.RunOnce();
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(agent.last_request()["observed"], false);
  for (int round = 0; round < 3; ++round) {
    auto r = agent.RunOnce();
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_FALSE(*r);  // no step while the engine is away
    const auto& req = agent.last_request();
    EXPECT_EQ(req["engine"]["ok"], false);
    EXPECT_NE(req["engine"]["error"].get<std::string>().find("engine_unavailable"),
              std::string::npos);
    EXPECT_NE(req["engine"]["error"].get<std::string>().find(socket), std::string::npos);
    EXPECT_TRUE(req["containers"].empty());
    EXPECT_TRUE(req["failures"].empty());
  }
  EXPECT_EQ(server.requests().size(), 4u);
}

// C11: a wedged engine (accepts, never answers): the round ends within the engine time limit
// and reports the engine not ok.
TEST(AgentTest, C11_WedgedEngineIsNotOkWithinTheTimeLimit) {
  FakeApiServer server([](const FakeRequest&) { return FakeResponse::Json(200, Desired()); });
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  const std::string socket = TempSocket("wedged");
  testing::StandInEngine wedged(socket, nullptr);
  ASSERT_TRUE(wedged.ok());
  DockerEngine engine({.socket_path = socket, .timeout = milliseconds(300)});
  AgentOptions options;
  options.engine_timeout = milliseconds(300);
  Agent agent(options, engine, client, Inventory{});
  ASSERT_TRUE(agent.RunOnce());  // learns the host id
  const auto start = std::chrono::steady_clock::now();
  auto r = agent.RunOnce();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_EQ(agent.last_request()["engine"]["ok"], false);
  EXPECT_NE(agent.last_request()["engine"]["error"].get<std::string>().find("engine_timeout"),
            std::string::npos);
}

TEST(AgentTest, InventoryGoesIntoTheRequest) {
  FakeApiServer server([](const FakeRequest&) {
    return FakeResponse::Json(200, {{"host_id", "hst_1"}, {"desired", nlohmann::json::array()}});
  });
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  DockerEngine engine({.socket_path = TempSocket("inv"), .timeout = milliseconds(200)});
  Inventory inv;
  inv.cpus = 7;
  inv.nvml = "unavailable: test";
  Agent agent({}, engine, client, inv);
  ASSERT_TRUE(agent.RunOnce());
  EXPECT_EQ(agent.last_request()["inventory"]["cpus"], 7);
  EXPECT_EQ(agent.last_request()["inventory"]["nvml"], "unavailable: test");
  EXPECT_EQ(agent.last_request()["agent_version"], "0.1.0");
  EXPECT_EQ(agent.last_request()["inventory"]["ssh_address"], "127.0.0.1");
}

// An answer without a host id cannot be acted on: the agent would not know its containers.
TEST(AgentTest, AnswerWithoutHostIdIsRefused) {
  FakeApiServer server(
      [](const FakeRequest&) { return FakeResponse::Json(200, nlohmann::json::object()); });
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  DockerEngine engine({.socket_path = TempSocket("nohost"), .timeout = milliseconds(200)});
  Agent agent({}, engine, client, Inventory{});
  auto r = agent.RunOnce();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().api_code, "bad_sync_response");
}

TEST(AgentTest, StopEndsRun) {
  FakeApiServer server([](const FakeRequest&) {
    return FakeResponse::Json(200, {{"sync_interval_seconds", 60}});
  });
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  DockerEngine engine({.socket_path = TempSocket("stop"), .timeout = milliseconds(200)});
  Agent agent({}, engine, client, Inventory{});
  std::thread runner([&] { agent.Run(); });
  while (server.requests().empty()) std::this_thread::sleep_for(milliseconds(10));
  const auto start = std::chrono::steady_clock::now();
  agent.Stop();
  runner.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(AgentTest, SshBannerProbe) {
  // Nothing listening on port 1.
  EXPECT_FALSE(Agent::SshBannerSeen("127.0.0.1", 1, milliseconds(500)));
  EXPECT_FALSE(Agent::SshBannerSeen("127.0.0.1", 0, milliseconds(500)));
  // An HTTP server is not sshd.
  FakeApiServer http([](const FakeRequest&) { return FakeResponse::NoContent(); });
  const uint16_t port = static_cast<uint16_t>(std::stoi(http.url().substr(17)));
  EXPECT_FALSE(Agent::SshBannerSeen("127.0.0.1", port, milliseconds(300)));
}

}  // namespace
}  // namespace gpuwerk::agent
