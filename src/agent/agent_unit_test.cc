// Agent and AgentClient against a fake control plane (cli/fake_api_server.h) and an engine that
// is not there or never answers (testing/stand_in_engine.h). Hermetic.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/agent_client.h"
#include "agent/container_engine.h"
#include "agent/docker_engine.h"
#include "agent/host_key.h"
#include "agent/reconciler.h"
#include "agent/testing/one_entry_tar.h"
#include "agent/testing/probe_watch.h"
#include "agent/testing/stand_in_engine.h"
#include "cli/fake_api_server.h"
#include "tests/support/ssh_keygen.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_sshd.h"

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
     "image":"img","memory_bytes":0,"gpu":false,"authorized_keys":[],"restart_generation":0,
     "env":[]}]})");
}

TEST(AgentClientTest, SendsBearerTokenAndJson) {
  FakeApiServer server([](const FakeRequest&) {
    return FakeResponse::Json(
        200,
        {{"host_id", "hst_1"}, {"sync_interval_seconds", 2}, {"desired", nlohmann::json::array()}});
  });
  AgentClient client(server.url() + "/", "gwh_secret", milliseconds(2000));
  protocol::AgentSyncRequest request;
  request.agent_version = "0.1.0";
  auto r = client.Sync(request);
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
  EXPECT_NE(r.error().message.find("gpuwerk admin hosts add"), std::string::npos);
  EXPECT_EQ(r.error().message.find("gwh_wrong"), std::string::npos);
  // Under `gpuwerk up`, which registers its host itself, the advice is up's.
  AgentClient up_client(server.url(), "gwh_wrong", milliseconds(2000));
  up_client.SetTokenRefusedAdvice("start gpuwerk up again");
  auto up = up_client.Sync({});
  ASSERT_FALSE(up);
  EXPECT_TRUE(up.error().message.ends_with("start gpuwerk up again")) << up.error().message;
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
    return FakeResponse::Json(
        200,
        {{"host_id", "hst_1"}, {"sync_interval_seconds", 2}, {"desired", nlohmann::json::array()}});
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
    return FakeResponse::Json(200, {{"host_id", "hst_1"},
                                    {"sync_interval_seconds", 60},
                                    {"desired", nlohmann::json::array()}});
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

/// An engine in memory that keeps an ordered log of the calls that change a container
/// ("put_archive <id>", "start <id>", "create <name>"; the engine seam has no exec call at all) and
/// holds the containers the test gives it. Starting one makes it running.
class RecordingEngine : public ContainerEngine {
 public:
  core::Result<void> Ping(Timeout) override { return {}; }
  core::Result<EngineVersion> Version(Timeout) override { return EngineVersion{}; }
  core::Result<std::string> CreateContainer(const ContainerSpec& spec, Timeout) override {
    Log("create " + spec.name);
    std::lock_guard lock(mu_);
    specs_.push_back(spec);
    if (!allow_creates_) {
      return core::Fail(core::ErrorCode::kFailedPrecondition, "not_in_this_test", "no creates");
    }
    for (const auto& c : containers_) {
      if (c.name == spec.name) {
        return core::Fail(core::ErrorCode::kAlreadyExists, "container_exists", "name in use");
      }
    }
    const std::string id = "new" + std::to_string(++created_);
    containers_.push_back(ContainerInfo{.id = id,
                                        .name = spec.name,
                                        .image = spec.image,
                                        .labels = spec.labels,
                                        .state = ContainerState::kCreated});
    return id;
  }
  core::Result<void> PutArchive(std::string_view id, std::string_view, std::string_view,
                                Timeout) override {
    Log("put_archive " + std::string(id));
    return {};
  }
  core::Result<std::string> GetArchive(std::string_view id, std::string_view path,
                                       Timeout) override {
    std::lock_guard lock(mu_);
    auto it = files_.find(std::string(id) + ":" + std::string(path));
    if (it == files_.end()) {
      return core::Fail(core::ErrorCode::kNotFound, "container_not_found", "no such file");
    }
    return it->second;
  }
  /// What GetArchive(id, path) answers (a tar archive); nothing set: not found.
  void SetArchive(const std::string& id, const std::string& path, std::string tar) {
    std::lock_guard lock(mu_);
    files_[id + ":" + path] = std::move(tar);
  }
  core::Result<void> StartContainer(std::string_view id, Timeout) override {
    Log("start " + std::string(id));
    std::lock_guard lock(mu_);
    for (auto& c : containers_) {
      if (c.id == id) c.state = ContainerState::kRunning;
    }
    return {};
  }
  core::Result<void> RestartContainer(std::string_view id, int, Timeout) override {
    Log("restart " + std::string(id));
    return {};
  }
  core::Result<ContainerInfo> InspectContainer(std::string_view id, Timeout) override {
    std::lock_guard lock(mu_);
    for (const auto& c : containers_) {
      if (c.id == id || c.name == id) return c;  // the Engine API takes either
    }
    return core::Fail(core::ErrorCode::kNotFound, "container_not_found", "no such container");
  }
  core::Result<void> RemoveContainer(std::string_view id, bool, Timeout) override {
    Log("remove " + std::string(id));
    Erase(id);
    return {};
  }
  core::Result<std::vector<ContainerInfo>> ListContainers(const std::map<std::string, std::string>&,
                                                          Timeout) override {
    std::lock_guard lock(mu_);
    std::vector<ContainerInfo> listed;
    for (const auto& c : containers_) {
      if (!unlisted_once_.erase(c.id)) listed.push_back(c);
    }
    return listed;
  }
  core::Result<bool> ImageExists(std::string_view, Timeout) override { return true; }
  core::Result<void> CreateNetwork(const NetworkSpec& spec, Timeout) override {
    Log("create_network " + spec.name);
    return {};
  }
  core::Result<void> RemoveNetwork(std::string_view name, Timeout) override {
    Log("remove_network " + std::string(name));
    return {};
  }
  core::Result<std::vector<NetworkInfo>> ListNetworks(const std::map<std::string, std::string>&,
                                                      Timeout) override {
    return std::vector<NetworkInfo>{};
  }
  core::Result<void> ConnectNetwork(std::string_view id, std::string_view network,
                                    std::string_view address, Timeout) override {
    Log("connect_network " + std::string(network) + " " + std::string(id) + " " +
        std::string(address));
    return {};
  }
  void Add(ContainerInfo c) {
    std::lock_guard lock(mu_);
    containers_.push_back(std::move(c));
  }
  /// A container the engine holds but leaves out of the next listing: a create the engine
  /// carries out after that listing was taken.
  void AddUnlisted(ContainerInfo c) {
    std::lock_guard lock(mu_);
    unlisted_once_.insert(c.id);
    containers_.push_back(std::move(c));
  }
  /// What `docker rm -f` on the host does.
  void Erase(std::string_view id) {
    std::lock_guard lock(mu_);
    std::erase_if(containers_, [&](const ContainerInfo& c) { return c.id == id; });
  }
  /// Changes container `id` as `change` says (what `docker stop`, `docker update` do).
  void Change(std::string_view id, const std::function<void(ContainerInfo&)>& change) {
    std::lock_guard lock(mu_);
    for (auto& c : containers_) {
      if (c.id == id) change(c);
    }
  }
  void AllowCreates() {
    std::lock_guard lock(mu_);
    allow_creates_ = true;
  }
  /// Puts something else the test wants in order among the calls.
  void Note(std::string what) { Log(std::move(what)); }
  std::vector<std::string> calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }
  /// Every spec CreateContainer was given, in order.
  std::vector<ContainerSpec> specs() const {
    std::lock_guard lock(mu_);
    return specs_;
  }

 private:
  void Log(std::string call) {
    std::lock_guard lock(mu_);
    calls_.push_back(std::move(call));
  }
  mutable std::mutex mu_;
  std::vector<ContainerInfo> containers_;
  std::map<std::string, std::string> files_;  // "id:path" → GetArchive's answer
  std::vector<std::string> calls_;
  std::vector<ContainerSpec> specs_;
  std::set<std::string> unlisted_once_;
  bool allow_creates_ = false;
  int created_ = 0;
};

/// A TCP listener on 127.0.0.1 that greets every connection with an SSH banner and closes it:
/// enough for the agent's readiness check of a container whose desired entry has no key to prove.
class BannerServer {
 public:
  BannerServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        const int client = ::accept(fd_, nullptr, nullptr);
        if (client < 0) continue;
        const std::string banner = "SSH-2.0-stand-in\r\n";
        (void)::send(client, banner.data(), banner.size(), MSG_NOSIGNAL);
        ::close(client);
      }
    });
  }
  ~BannerServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// The control plane's answer naming instance ins_a (node 0, no key to prove) on host hst_1.
FakeResponse DesiredA(const FakeRequest&) { return FakeResponse::Json(200, Desired()); }

ContainerInfo OwnedRunning(const std::string& id, uint16_t ssh_port = 0) {
  return ContainerInfo{.id = id,
                       .name = "gpuwerk-ins_a-0",
                       .image = "img",
                       .labels = {{std::string(kInstanceLabel), "ins_a"},
                                  {std::string(kNodeLabel), "0"},
                                  {std::string(kHostLabel), "hst_1"}},
                       .state = ContainerState::kRunning,
                       .started_at = "2026-12-02T01:00:00Z",
                       .ssh_port = ssh_port};
}

/// The `drift` of the last sync request `server` got (null when it had none).
nlohmann::json LastDrift(const FakeApiServer& server) {
  const auto requests = server.requests();
  if (requests.empty()) return nullptr;
  const nlohmann::json body = requests.back().Json();
  return body.contains("drift") ? body["drift"] : nlohmann::json();
}

// `docker rm -f` on the host (docs/agent-protocol.md "Drift"): the agent reports the removal
// once, and that it created the container again (new files, new sshd host keys).
TEST(AgentDriftTest, ARemovedContainerIsReportedOnceWithItsRecreation) {
  FakeApiServer server(DesiredA);
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  RecordingEngine engine;
  engine.AllowCreates();
  engine.Add(OwnedRunning("c1"));
  AgentOptions options;
  options.ssh_probe_timeout = milliseconds(100);
  Agent agent(options, engine, client, Inventory{});
  ASSERT_TRUE(agent.RunOnce());  // learns the host id
  ASSERT_TRUE(agent.RunOnce());  // observes c1
  EXPECT_TRUE(LastDrift(server).is_null()) << LastDrift(server);

  engine.Erase("c1");
  ASSERT_TRUE(agent.RunOnce());
  const nlohmann::json drift = LastDrift(server);
  ASSERT_TRUE(drift.is_array()) << server.requests().back().body;
  ASSERT_EQ(drift.size(), 1u) << drift;
  EXPECT_EQ(drift[0]["kind"], "removed");
  EXPECT_EQ(drift[0]["instance_id"], "ins_a");
  EXPECT_EQ(drift[0]["container_id"], "c1");
  EXPECT_EQ(drift[0]["recreated"], true);
  EXPECT_EQ(drift[0]["new_container_id"], "new1");
  // Sent once: the next round has none.
  ASSERT_TRUE(agent.RunOnce());
  EXPECT_TRUE(LastDrift(server).is_null()) << LastDrift(server);
}

// The agent's own removal (nobody wants the container any more) is not drift.
TEST(AgentDriftTest, TheAgentsOwnRemovalIsNotDrift) {
  std::atomic<bool> wanted{true};
  FakeApiServer server([&](const FakeRequest& r) {
    if (wanted) return DesiredA(r);
    return FakeResponse::Json(
        200,
        {{"host_id", "hst_1"}, {"sync_interval_seconds", 1}, {"desired", nlohmann::json::array()}});
  });
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  RecordingEngine engine;
  engine.Add(OwnedRunning("c1"));
  AgentOptions options;
  options.ssh_probe_timeout = milliseconds(100);
  Agent agent(options, engine, client, Inventory{});
  ASSERT_TRUE(agent.RunOnce());
  ASSERT_TRUE(agent.RunOnce());
  wanted = false;
  ASSERT_TRUE(agent.RunOnce());  // learns that nobody wants it
  ASSERT_TRUE(agent.RunOnce());  // removes it
  ASSERT_TRUE(agent.RunOnce());
  const auto calls = engine.calls();
  EXPECT_NE(std::find(calls.begin(), calls.end(), "remove c1"), calls.end())
      << ::testing::PrintToString(calls);
  for (const auto& r : server.requests()) {
    EXPECT_FALSE(r.Json().contains("drift")) << r.body;
  }
}

// `docker stop` on the host while the container served its person: reported as stopped with its
// exit code and time, and started again; the agent's own start is not reported.
TEST(AgentDriftTest, AStopBehindTheAgentsBackIsReportedAndTheContainerStartedAgain) {
  BannerServer sshd;
  FakeApiServer server(DesiredA);
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  RecordingEngine engine;
  engine.Add(OwnedRunning("c1", sshd.port()));
  AgentOptions options;
  options.ssh_probe_timeout = milliseconds(500);
  Agent agent(options, engine, client, Inventory{});
  ASSERT_TRUE(agent.RunOnce());
  ASSERT_TRUE(agent.RunOnce());  // c1 runs and is ready
  ASSERT_EQ(server.requests().back().Json()["containers"][0]["ssh_ready"], true)
      << server.requests().back().body;

  engine.Change("c1", [](ContainerInfo& c) {
    c.state = ContainerState::kExited;
    c.exit_code = 143;
    c.finished_at = "2026-12-02T01:05:00Z";
  });
  ASSERT_TRUE(agent.RunOnce());
  const nlohmann::json drift = LastDrift(server);
  ASSERT_TRUE(drift.is_array()) << server.requests().back().body;
  ASSERT_EQ(drift.size(), 1u) << drift;
  EXPECT_EQ(drift[0]["kind"], "stopped");
  EXPECT_EQ(drift[0]["container_id"], "c1");
  EXPECT_EQ(drift[0]["exit_code"], 143);
  EXPECT_EQ(drift[0]["at"], "2026-12-02T01:05:00Z");
  const auto calls = engine.calls();
  EXPECT_NE(std::find(calls.begin(), calls.end(), "start c1"), calls.end())
      << ::testing::PrintToString(calls);
  // Its own start is no drift, nor is anything in the rounds after.
  ASSERT_TRUE(agent.RunOnce());
  EXPECT_TRUE(LastDrift(server).is_null()) << LastDrift(server);

  // `docker update --memory` on the host.
  engine.Change("c1", [](ContainerInfo& c) { c.memory_bytes = 64LL << 30; });
  ASSERT_TRUE(agent.RunOnce());
  const nlohmann::json changed = LastDrift(server);
  ASSERT_TRUE(changed.is_array());
  ASSERT_EQ(changed.size(), 1u) << changed;
  EXPECT_EQ(changed[0]["kind"], "changed");
  EXPECT_EQ(changed[0]["changes"], nlohmann::json::array({"memory"}));
}

// A removal while the agent was not running is told after its restart (the state file keeps the
// container ids it last saw).
TEST(AgentDriftTest, ARemovalWhileTheAgentWasDownIsReportedAfterItsRestart) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("gw-agent-drift-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  FakeApiServer server(DesiredA);
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  RecordingEngine engine;
  engine.AllowCreates();
  engine.Add(OwnedRunning("c1"));
  AgentOptions options;
  options.ssh_probe_timeout = milliseconds(100);
  options.state_dir = dir;
  {
    Agent first(options, engine, client, Inventory{});
    first.LoadState();
    ASSERT_TRUE(first.RunOnce());
    ASSERT_TRUE(first.RunOnce());
  }
  engine.Erase("c1");
  Agent second(options, engine, client, Inventory{});
  second.LoadState();
  ASSERT_TRUE(second.RunOnce());  // learns the host id; observes nothing yet
  EXPECT_TRUE(LastDrift(server).is_null());
  ASSERT_TRUE(second.RunOnce());
  const nlohmann::json drift = LastDrift(server);
  ASSERT_TRUE(drift.is_array()) << server.requests().back().body;
  ASSERT_EQ(drift.size(), 1u) << drift;
  EXPECT_EQ(drift[0]["kind"], "removed");
  EXPECT_EQ(drift[0]["container_id"], "c1");
  EXPECT_EQ(drift[0]["recreated"], true);
  std::filesystem::remove_all(dir);
}

// A container of a desired instance that exists but was never started, and whose key file the
// agent never wrote: the engine made it after the agent had given up on the create's answer (a
// slow engine just after its own start), made without the read-only keys mount (no kKeysLabel:
// an older agent's). The agent puts the key file in by archive BEFORE the start; the agent never
// runs anything in a container (issue 12 finding 9).
TEST(AgentTest, AContainerMadeButNeverStartedGetsItsKeysByArchiveBeforeItsStart) {
  FakeApiServer server([](const FakeRequest&) {
    return FakeResponse::Json(200, nlohmann::json::parse(R"({"host_id":"hst_1",
      "sync_interval_seconds":1,"desired":[{"instance_id":"ins_a","node_index":0,
      "container_name":"gpuwerk-ins_a-0","hostname":"a","image":"img","memory_bytes":0,
      "gpu":false,"authorized_keys":["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKey alice"],
      "restart_generation":0,"env":[]}]})"));
  });
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  RecordingEngine engine;
  engine.Add(ContainerInfo{.id = "c1",
                           .name = "gpuwerk-ins_a-0",
                           .image = "img",
                           .labels = {{std::string(kInstanceLabel), "ins_a"},
                                      {std::string(kNodeLabel), "0"},
                                      {std::string(kHostLabel), "hst_1"}},
                           .state = ContainerState::kCreated});
  AgentOptions options;
  options.ssh_probe_timeout = milliseconds(100);
  Agent agent(options, engine, client, Inventory{});
  ASSERT_TRUE(agent.RunOnce());  // learns the host id
  ASSERT_TRUE(agent.RunOnce());  // observes the created container, acts
  const std::vector<std::string> calls = engine.calls();
  const auto put = std::find(calls.begin(), calls.end(), "put_archive c1");
  const auto start = std::find(calls.begin(), calls.end(), "start c1");
  ASSERT_NE(put, calls.end()) << ::testing::PrintToString(calls);
  ASSERT_NE(start, calls.end()) << ::testing::PrintToString(calls);
  EXPECT_LT(put, start) << ::testing::PrintToString(calls);
  // The file is current: no exec tries to write it again once the container runs.
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "exec c1"), 0)
      << ::testing::PrintToString(calls);
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "put_archive c1"), 1)
      << ::testing::PrintToString(calls);
}

// docs/agent-protocol.md "Host key": once a real sshd accepted the person's key, the agent reads
// the container's ed25519 host key through the engine's archive download (nothing runs in the
// container) and reports it with the container, every round.
TEST(AgentTest, AProvenContainersSshdHostKeyIsReadByArchiveAndReported) {
  ::gpuwerk::testing::TempDir dir;
  const auto person = ::gpuwerk::testing::GenerateKey(dir.path(), "alice");
  ::gpuwerk::testing::Sshd sshd(dir.path() / "sshd", person.public_line);
  nlohmann::json desired = Desired();
  desired["desired"][0]["authorized_keys"] = nlohmann::json::array({person.public_line});
  FakeApiServer server([&](const FakeRequest&) { return FakeResponse::Json(200, desired); });
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  RecordingEngine engine;
  engine.Add(OwnedRunning("c1", sshd.port()));
  engine.SetArchive(
      "c1", std::string(kSshHostKeyPath),
      testing::OneEntryTar("ssh_host_ed25519_key.pub", AE_IFREG, sshd.HostKeyLine() + " root@a\n"));
  AgentOptions options;
  options.ssh_probe_timeout = milliseconds(3000);
  options.login_probe.command = {GPUWERK_LOGIN_PROBE_PROGRAM};
  Agent agent(options, engine, client, Inventory{});
  ASSERT_TRUE(agent.RunOnce());  // learns the host id
  ASSERT_TRUE(agent.RunOnce());  // proves the login, reads the key
  nlohmann::json body = server.requests().back().Json();
  ASSERT_EQ(body["containers"][0]["ssh_ready"], true) << server.requests().back().body;
  EXPECT_EQ(body["containers"][0]["ssh_host_key"], sshd.HostKeyLine());
  ASSERT_TRUE(agent.RunOnce());
  body = server.requests().back().Json();
  EXPECT_EQ(body["containers"][0]["ssh_host_key"], sshd.HostKeyLine());
}

// An engine that reads another filesystem for archives (some CI roots' podman does, see
// docs/agent-protocol.md "The guard") must not pin a wrong key: the key read must be the one the
// sshd presented to the login probe, else nothing is reported (and the relay does not check).
TEST(AgentTest, AHostKeyThatIsNotTheOneSshdPresentsIsNotReported) {
  ::gpuwerk::testing::TempDir dir;
  const auto person = ::gpuwerk::testing::GenerateKey(dir.path(), "alice");
  const auto other = ::gpuwerk::testing::GenerateKey(dir.path(), "elsewhere");
  ::gpuwerk::testing::Sshd sshd(dir.path() / "sshd", person.public_line);
  nlohmann::json desired = Desired();
  desired["desired"][0]["authorized_keys"] = nlohmann::json::array({person.public_line});
  FakeApiServer server([&](const FakeRequest&) { return FakeResponse::Json(200, desired); });
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  RecordingEngine engine;
  engine.Add(OwnedRunning("c1", sshd.port()));
  engine.SetArchive("c1", std::string(kSshHostKeyPath),
                    testing::OneEntryTar("ssh_host_ed25519_key.pub", AE_IFREG, other.public_line));
  AgentOptions options;
  options.ssh_probe_timeout = milliseconds(3000);
  options.login_probe.command = {GPUWERK_LOGIN_PROBE_PROGRAM};
  Agent agent(options, engine, client, Inventory{});
  for (int round = 0; round < 5; ++round) ASSERT_TRUE(agent.RunOnce());
  const nlohmann::json body = server.requests().back().Json();
  EXPECT_EQ(body["containers"][0]["ssh_ready"], true) << server.requests().back().body;
  EXPECT_FALSE(body["containers"][0].contains("ssh_host_key")) << server.requests().back().body;
}

// Issue 12 finding 9: a container the agent creates gets its keys as a read-only mount of the
// agent's own host file, written before the create; a change of the desired keys rewrites that
// file and sends the engine nothing at all (no archive, and the engine seam has no exec); the
// agent's removal of the container removes its directory.
TEST(AgentTest, Finding9_KeysAreTheAgentsReadOnlyMountAndAChangeSendsTheEngineNothing) {
  const std::string alice = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKey alice";
  const std::string bob = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKey bob";
  std::mutex mu;
  std::vector<std::string> keys = {alice};
  bool wanted = true;
  FakeApiServer server([&](const FakeRequest&) {
    std::lock_guard lock(mu);
    nlohmann::json desired = nlohmann::json::array();
    if (wanted) {
      desired.push_back({{"instance_id", "ins_a"},
                         {"node_index", 0},
                         {"container_name", "gpuwerk-ins_a-0"},
                         {"hostname", "a"},
                         {"image", "img"},
                         {"memory_bytes", 0},
                         {"gpu", false},
                         {"authorized_keys", keys},
                         {"restart_generation", 0},
                         {"env", nlohmann::json::array()}});
    }
    return FakeResponse::Json(
        200, {{"host_id", "hst_1"}, {"sync_interval_seconds", 1}, {"desired", desired}});
  });
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  RecordingEngine engine;
  engine.AllowCreates();
  std::string tmpl = (std::filesystem::temp_directory_path() / "gpuwerk-agent-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::filesystem::path dir = tmpl;
  AgentOptions options;
  options.state_dir = dir;
  options.ssh_probe_timeout = milliseconds(100);
  options.relay_authorized_keys = {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKey gpuwerk-relay"};
  // The relay CA, trusted for this container's instance alone, and its probe line (docs/ssh.md
  // "Upstream: the relay credential"), after the plain relay line of an older relay.
  const std::string ca =
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHvkUHXRnfrlMrJul9DlxqoohCvQpwbilMVvKb9zKJCL";
  options.relay_certificate_authorities = {ca};
  const std::string relay_lines = options.relay_authorized_keys[0] +
                                  "\ncert-authority,principals=\"gpuwerk-instance-ins_a\" " + ca +
                                  " gpuwerk-relay-ca\ncert-authority,principals=\"gpuwerk-relay-"
                                  "probe\",restrict,command=\"/bin/false\" " +
                                  ca + " gpuwerk-relay-ca-probe\n";
  Agent agent(options, engine, client, Inventory{});
  ASSERT_TRUE(agent.RunOnce());  // learns the host id
  ASSERT_TRUE(agent.RunOnce());  // creates and starts
  const std::filesystem::path file =
      dir / "keys" / "containers" / "gpuwerk-ins_a-0" / "authorized_keys";
  auto read = [&] {
    std::ifstream in(file);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(read(), alice + "\n" + relay_lines);
  const std::vector<ContainerSpec> specs = engine.specs();
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].labels.at(std::string(kKeysLabel)), "bind");
  ASSERT_EQ(specs[0].binds.size(), 2u);
  EXPECT_EQ(specs[0].binds[0].source, file.parent_path().string());
  EXPECT_EQ(specs[0].binds[0].target, "/etc/ssh/gpuwerk");
  EXPECT_TRUE(specs[0].binds[0].read_only);
  EXPECT_EQ(specs[0].binds[1].target, "/etc/ssh/sshd_config.d/00-gpuwerk-keys.conf");
  EXPECT_TRUE(specs[0].binds[1].read_only);
  const size_t calls_before = engine.calls().size();
  {
    std::lock_guard lock(mu);
    keys = {alice, bob};
  }
  ASSERT_TRUE(agent.RunOnce());  // the new list
  ASSERT_TRUE(agent.RunOnce());  // acted on
  EXPECT_EQ(read(), alice + "\n" + bob + "\n" + relay_lines);
  const std::vector<std::string> calls = engine.calls();
  EXPECT_EQ(calls.size(), calls_before) << ::testing::PrintToString(calls);
  EXPECT_EQ(std::count_if(calls.begin(), calls.end(),
                          [](const std::string& c) { return c.starts_with("put_archive"); }),
            0)
      << ::testing::PrintToString(calls);
  {
    std::lock_guard lock(mu);
    wanted = false;
  }
  ASSERT_TRUE(agent.RunOnce());
  ASSERT_TRUE(agent.RunOnce());
  EXPECT_FALSE(std::filesystem::exists(file.parent_path()))
      << ::testing::PrintToString(engine.calls());
  std::filesystem::remove_all(dir);
}

// R-8 (docs/clusters.md): a node of a 2-host instance gets its cluster files as read-only mounts
// of the agent's host files (written before the create; node 1's sshd host key 0600), the node
// names in /etc/hosts, and joins the rail network with its own rail address before its first
// start; the files go when the agent removes the container.
TEST(AgentTest, ANodeOfA2HostInstanceGetsItsClusterFilesAndJoinsTheRailBeforeItStarts) {
  const std::string alice = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKey alice";
  const std::string priv =
      "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n"
      "-----END OPENSSH PRIVATE KEY-----\n";
  std::mutex mu;
  bool wanted = true;
  FakeApiServer server([&](const FakeRequest&) {
    std::lock_guard lock(mu);
    nlohmann::json desired = nlohmann::json::array();
    if (wanted) {
      desired.push_back({{"instance_id", "ins_a"},
                         {"node_index", 1},
                         {"container_name", "gpuwerk-ins_a-1"},
                         {"hostname", "a-n1"},
                         {"image", "img"},
                         {"memory_bytes", 0},
                         {"gpu", false},
                         {"authorized_keys", {alice}},
                         {"restart_generation", 0},
                         {"env", nlohmann::json::array()},
                         {"cluster",
                          {{"node_index", 1},
                           {"rail_addresses", {"198.18.0.11", "198.18.0.12"}},
                           {"master_port", 29500},
                           {"rendezvous_port", 29400},
                           {"worker_public_key", "ssh-ed25519 AAAAw gpuwerk-worker-ins_a"},
                           {"worker_private_key", ""},
                           {"node1_host_public_key", "ssh-ed25519 AAAAh gpuwerk-node1-ins_a"},
                           {"host_private_key", priv}}}});
    }
    return FakeResponse::Json(
        200, {{"host_id", "hst_1"}, {"sync_interval_seconds", 1}, {"desired", desired}});
  });
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  RecordingEngine engine;
  engine.AllowCreates();
  std::string tmpl = (std::filesystem::temp_directory_path() / "gpuwerk-agent-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::filesystem::path dir = tmpl;
  AgentOptions options;
  options.state_dir = dir;
  options.ssh_probe_timeout = milliseconds(100);
  options.rail = {.network = "gwrail"};
  Agent agent(options, engine, client, Inventory{});
  ASSERT_TRUE(agent.RunOnce());  // learns the host id
  ASSERT_TRUE(agent.RunOnce());  // creates, joins the rail, starts
  const std::vector<ContainerSpec> specs = engine.specs();
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].extra_hosts,
            (std::vector<std::string>{"node0:198.18.0.11", "node1:198.18.0.12"}));
  const std::filesystem::path cluster = dir / "keys" / "cluster" / "gpuwerk-ins_a-1";
  std::map<std::string, std::string> mounts;
  for (const BindMount& b : specs[0].binds) {
    EXPECT_TRUE(b.read_only) << b.target;
    mounts[b.target] = b.source;
  }
  for (const std::string_view target :
       {kClusterDescriptionTarget, kNcclConfTarget, kClusterProfileTarget, kClusterSshdDropInTarget,
        kOpenMpiParamsTarget, kHostKeyTarget}) {
    ASSERT_TRUE(mounts.contains(std::string(target))) << target;
    EXPECT_EQ(std::filesystem::path(mounts[std::string(target)]).parent_path(), cluster);
  }
  struct stat st {};
  ASSERT_EQ(::stat(mounts[std::string(kHostKeyTarget)].c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::vector<std::string> calls = engine.calls();
  const auto at = [&](const std::string& call) {
    return std::find(calls.begin(), calls.end(), call) - calls.begin();
  };
  ASSERT_LT(at("connect_network gwrail new1 198.18.0.12"), static_cast<long>(calls.size()))
      << ::testing::PrintToString(calls);
  EXPECT_LT(at("create gpuwerk-ins_a-1"), at("connect_network gwrail new1 198.18.0.12"));
  EXPECT_LT(at("connect_network gwrail new1 198.18.0.12"), at("start new1"));
  {
    std::lock_guard lock(mu);
    wanted = false;
  }
  ASSERT_TRUE(agent.RunOnce());
  ASSERT_TRUE(agent.RunOnce());
  EXPECT_FALSE(std::filesystem::exists(cluster)) << ::testing::PrintToString(engine.calls());
  std::filesystem::remove_all(dir);
}

// Issue 12 finding 9: the agent proves a login (C05) in a confined child process, never with a
// libssh client in its own process (which holds the engine socket): while the container's sshd
// hangs, the agent's process has a child running the probe program, as nobody when the agent is
// root; without a probe program nothing is proven and the container is not ready.
TEST(AgentTest, Finding9_TheAgentProvesLoginsInAConfinedChildNotInItsOwnProcess) {
  testing::Tarpit sshd;
  FakeApiServer server([](const FakeRequest&) {
    return FakeResponse::Json(200, nlohmann::json::parse(R"({"host_id":"hst_1",
      "sync_interval_seconds":1,"desired":[{"instance_id":"ins_a","node_index":0,
      "container_name":"gpuwerk-ins_a-0","hostname":"a","image":"img","memory_bytes":0,
      "gpu":false,"authorized_keys":["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice"],
      "restart_generation":0,"env":[]}]})"));
  });
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  RecordingEngine engine;
  engine.Add(OwnedRunning("c1", sshd.port()));
  AgentOptions options;
  options.ssh_probe_timeout = milliseconds(1000);
  options.login_probe.command = {GPUWERK_LOGIN_PROBE_PROGRAM};
  Agent agent(options, engine, client, Inventory{});
  ASSERT_TRUE(agent.RunOnce());  // learns the host id
  auto round = std::async(std::launch::async, [&] { return agent.RunOnce(); });
  const std::optional<pid_t> child = testing::WaitForChild(GPUWERK_LOGIN_PROBE_PROGRAM);
  const std::string uid = child ? testing::StatusField(*child, "Uid:") : "";
  ASSERT_TRUE(round.get());
  ASSERT_TRUE(child.has_value()) << "the agent probed the login in its own process";
  std::istringstream uids(uid);
  std::set<long> ids;
  for (long id = 0; uids >> id;) ids.insert(id);
  EXPECT_EQ(ids, std::set<long>{::geteuid() == 0 ? 65534L : static_cast<long>(::geteuid())}) << uid;
  EXPECT_EQ(agent.last_request()["containers"][0]["ssh_ready"], false);

  // No probe program: no libssh client anywhere, nothing proven.
  AgentOptions bare;
  bare.ssh_probe_timeout = milliseconds(200);
  Agent without(bare, engine, client, Inventory{});
  ASSERT_TRUE(without.RunOnce());
  ASSERT_TRUE(without.RunOnce());
  EXPECT_EQ(without.last_request()["containers"][0]["ssh_ready"], false);
  EXPECT_TRUE(testing::ChildrenRunning(GPUWERK_LOGIN_PROBE_PROGRAM).empty());
}

// C15 (seen as a flake under load): a create timed out on the agent's side, the engine carried it
// out after the next round's listing, and that round's create got "container_exists". The
// container is this instance's own (its labels say so): the agent takes it over the round after,
// keys first, and reports no failed create (which would have failed the instance).
TEST(AgentTest, C15_AContainerAnEarlierCreateMadeLateIsTakenOverNotFailed) {
  FakeApiServer server(DesiredA);
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  RecordingEngine engine;
  engine.AllowCreates();
  ContainerInfo late = OwnedRunning("c1");
  late.state = ContainerState::kCreated;
  late.started_at.clear();
  engine.AddUnlisted(late);
  AgentOptions options;
  options.ssh_probe_timeout = milliseconds(100);
  Agent agent(options, engine, client, Inventory{});
  ASSERT_TRUE(agent.RunOnce());  // learns the host id
  ASSERT_TRUE(agent.RunOnce());  // the listing misses c1: create answers container_exists
  ASSERT_TRUE(agent.RunOnce());  // c1 is listed: keys in, then started
  const std::vector<std::string> calls = engine.calls();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "create gpuwerk-ins_a-0"), 1)
      << ::testing::PrintToString(calls);
  const auto put = std::find(calls.begin(), calls.end(), "put_archive c1");
  const auto start = std::find(calls.begin(), calls.end(), "start c1");
  ASSERT_NE(start, calls.end()) << ::testing::PrintToString(calls);
  EXPECT_LT(put, start) << ::testing::PrintToString(calls);
  for (const auto& request : server.requests()) {
    const nlohmann::json body = request.Json();
    EXPECT_TRUE(!body.contains("failures") || body["failures"].empty()) << body.dump();
  }
}

// A container holding the instance's name without its labels is someone else's: the create is a
// failure, said in the sync, and nothing of the other container is touched.
TEST(AgentTest, AForeignContainerHoldingTheNameIsAFailedCreate) {
  FakeApiServer server(DesiredA);
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  RecordingEngine engine;
  engine.AllowCreates();
  engine.AddUnlisted(ContainerInfo{
      .id = "x1", .name = "gpuwerk-ins_a-0", .image = "other", .state = ContainerState::kRunning});
  AgentOptions options;
  options.ssh_probe_timeout = milliseconds(100);
  Agent agent(options, engine, client, Inventory{});
  ASSERT_TRUE(agent.RunOnce());  // learns the host id
  ASSERT_TRUE(agent.RunOnce());  // create answers container_exists; the labels are not ours
  ASSERT_TRUE(agent.RunOnce());  // the sync carries the failure
  bool reported = false;
  for (const auto& request : server.requests()) {
    const nlohmann::json body = request.Json();
    if (!body.contains("failures")) continue;
    for (const auto& f : body["failures"]) {
      reported = reported || f.value("code", "") == "container_exists";
    }
  }
  EXPECT_TRUE(reported);
  const std::vector<std::string> calls = engine.calls();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "remove x1"), 0)
      << ::testing::PrintToString(calls);
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "start x1"), 0)
      << ::testing::PrintToString(calls);
}

// The engine adds its own firewall rules when a container joins its network (podman's CNI plugins
// insert their jumps first in FORWARD, where their ACCEPT decided before the agent's REJECT): the
// agent checks its filter rules again right after the round's create and start, before that
// round's sync reports the container, besides at round starts (at most once an interval).
TEST(AgentTest, NetworkFilterIsCheckedRightAfterAContainerStarts) {
  FakeApiServer server(DesiredA);
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  RecordingEngine engine;
  engine.AllowCreates();
  AgentOptions options;
  options.ssh_probe_timeout = milliseconds(100);
  options.instance_networks = true;
  options.network_check_interval = std::chrono::hours(1);
  std::vector<size_t> syncs_at_check;
  options.keep_network_isolation = [&]() -> core::Result<std::vector<IsolationRepair>> {
    engine.Note("check_network");
    syncs_at_check.push_back(server.requests().size());
    return std::vector<IsolationRepair>{};
  };
  Agent agent(options, engine, client, Inventory{});
  ASSERT_TRUE(agent.RunOnce());  // learns the host id
  ASSERT_TRUE(agent.RunOnce());  // creates and starts the container
  const std::vector<std::string> calls = engine.calls();
  const auto start = std::find(calls.begin(), calls.end(), "start new1");
  ASSERT_NE(start, calls.end()) << ::testing::PrintToString(calls);
  ASSERT_NE(start + 1, calls.end()) << ::testing::PrintToString(calls);
  EXPECT_EQ(*(start + 1), "check_network") << ::testing::PrintToString(calls);
  EXPECT_EQ(calls.front(), "check_network") << ::testing::PrintToString(calls);
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "check_network"), 2)
      << ::testing::PrintToString(calls);
  // The check after the start came before the sync that reports the container.
  ASSERT_EQ(syncs_at_check.size(), 2u);
  EXPECT_EQ(syncs_at_check[1], 1u);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].Json()["containers"].size(), 1u) << requests[1].body;
}

// A check that cannot run (iptables gone, no permission) is said in the inventory until one runs.
TEST(AgentTest, AFilterCheckThatFailsIsSaidInTheInventory) {
  FakeApiServer server(DesiredA);
  AgentClient client(server.url(), "gwh_x", milliseconds(2000));
  RecordingEngine engine;
  AgentOptions options;
  options.ssh_probe_timeout = milliseconds(100);
  options.network_check_interval = milliseconds(0);
  bool fail = true;
  options.keep_network_isolation = [&]() -> core::Result<std::vector<IsolationRepair>> {
    if (fail) {
      return core::Fail(core::ErrorCode::kUnavailable, "network_isolation_unavailable",
                        "iptables-save failed (4): Permission denied");
    }
    return std::vector<IsolationRepair>{};
  };
  Agent agent(options, engine, client, Inventory{});
  ASSERT_TRUE(agent.RunOnce());
  const auto not_enforced = [&] {
    return server.requests().back().Json()["inventory"]["limits"]["not_enforced"];
  };
  ASSERT_EQ(not_enforced().size(), 1u) << not_enforced();
  EXPECT_EQ(not_enforced()[0],
            "network: the filter rules cannot be checked (iptables-save failed (4): Permission "
            "denied): another program's rules may decide before them");
  fail = false;
  ASSERT_TRUE(agent.RunOnce());
  EXPECT_TRUE(not_enforced().empty()) << not_enforced();
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
