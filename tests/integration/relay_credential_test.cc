// Case C07 across the parts that own it: the real control plane (ServerTest), the real host agent
// (agent::Agent, syncing over HTTP), the relay in the server's process as `gpuwerk up` runs it
// (app::StoreRelayAuthorizer, app::AuditRelaySessionLog) and a real OpenSSH sshd standing in for
// the instance's. The container engine is in memory: its one container's sshd is that sshd, and
// that sshd does not read the agent's read-only keys file (as when something in the container
// changed sshd's configuration) until the test lets it. The relay CA's line is not in the sshd's
// authorized_keys, so the relay cannot log in upstream with its certificate; the person must hear
// that the relay credential is missing (not that their key is wrong), and the instance's status
// reason must show the fault for as long as it lasts, not for one round: the agent's check offers
// the relay's probe certificate, which sshd refuses while it ignores the agent's file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/agent_client.h"
#include "agent/authorized_keys.h"
#include "agent/container_engine.h"
#include "app/store_relay_access.h"
#include "relay/relay.h"
#include "relay/relay_certificates.h"
#include "relay/ssh_key_file.h"
#include "tests/integration/relay_fixture.h"
#include "tests/support/run_command.h"
#include "tests/support/ssh_keygen.h"
#include "tests/support/test_sshd.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

/// A container engine in memory whose containers' sshd is one real sshd (`ssh_port`, reading
/// `authorized_keys`). Creates, starts and removes act on the list; archive uploads change
/// nothing. The agent's read-only keys mount (the bind at kAgentKeysMount) is not what the sshd
/// reads until LetKeysMountIn(); from then on each round (list call) copies the agent's file into
/// `authorized_keys`. The engine has no exec call at all (issue 12 finding 9). Counts the agent's
/// rounds (its list calls).
class SshdEngine : public agent::ContainerEngine {
 public:
  SshdEngine(uint16_t ssh_port, std::filesystem::path authorized_keys)
      : ssh_port_(ssh_port), authorized_keys_(std::move(authorized_keys)) {}

  core::Result<void> Ping(Timeout) override { return {}; }
  core::Result<agent::EngineVersion> Version(Timeout) override { return agent::EngineVersion{}; }
  core::Result<std::string> CreateContainer(const agent::ContainerSpec& spec, Timeout) override {
    std::lock_guard lock(mu_);
    const std::string id = "c" + std::to_string(++created_);
    for (const auto& b : spec.binds) {
      if (b.target == agent::kAgentKeysMount) keys_mount_ = b.source;
    }
    containers_.push_back({.id = id,
                           .name = spec.name,
                           .image = spec.image,
                           .labels = spec.labels,
                           .state = agent::ContainerState::kCreated});
    return id;
  }
  core::Result<void> PutArchive(std::string_view, std::string_view, std::string_view,
                                Timeout) override {
    return {};
  }
  core::Result<std::string> GetArchive(std::string_view, std::string_view, Timeout) override {
    // Its sshd's host key is not readable here: the agent reports none, and none is pinned.
    return core::Fail(core::ErrorCode::kNotFound, "container_not_found", "no such file");
  }
  core::Result<void> StartContainer(std::string_view id, Timeout) override {
    std::lock_guard lock(mu_);
    for (auto& c : containers_) {
      if (c.id != id) continue;
      c.state = agent::ContainerState::kRunning;
      c.started_at = "2026-12-02T01:00:00Z";
      c.ssh_port = ssh_port_;
    }
    return {};
  }
  core::Result<void> RestartContainer(std::string_view, int, Timeout) override { return {}; }
  core::Result<agent::ContainerInfo> InspectContainer(std::string_view id, Timeout) override {
    std::lock_guard lock(mu_);
    for (const auto& c : containers_) {
      if (c.id == id) return c;
    }
    return core::Fail(core::ErrorCode::kNotFound, "container_not_found", "no such container");
  }
  core::Result<void> RemoveContainer(std::string_view id, bool, Timeout) override {
    std::lock_guard lock(mu_);
    std::erase_if(containers_, [&](const agent::ContainerInfo& c) { return c.id == id; });
    return {};
  }
  core::Result<std::vector<agent::ContainerInfo>> ListContainers(
      const std::map<std::string, std::string>&, Timeout) override {
    ++lists_;
    std::lock_guard lock(mu_);
    if (mounted_ && !keys_mount_.empty()) {
      std::error_code ec;
      std::filesystem::copy_file(keys_mount_ / "authorized_keys", authorized_keys_,
                                 std::filesystem::copy_options::overwrite_existing, ec);
      std::filesystem::permissions(
          authorized_keys_,
          std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
          std::filesystem::perm_options::replace, ec);
    }
    return containers_;
  }
  core::Result<void> CreateNetwork(const agent::NetworkSpec&, Timeout) override { return {}; }
  core::Result<void> RemoveNetwork(std::string_view, Timeout) override { return {}; }
  core::Result<std::vector<agent::NetworkInfo>> ListNetworks(
      const std::map<std::string, std::string>&, Timeout) override {
    return std::vector<agent::NetworkInfo>{};
  }
  core::Result<bool> ImageExists(std::string_view, Timeout) override { return true; }
  /// From now on the sshd reads the agent's read-only keys file: its relay line gets in.
  void LetKeysMountIn() {
    std::lock_guard lock(mu_);
    mounted_ = true;
  }
  /// The agent's rounds so far (each observes at least once).
  int lists() const { return lists_.load(); }

 private:
  const uint16_t ssh_port_;
  const std::filesystem::path authorized_keys_;
  std::atomic<int> lists_{0};
  std::mutex mu_;
  std::vector<agent::ContainerInfo> containers_;
  std::filesystem::path keys_mount_;  ///< the host side of the agent's keys mount
  bool mounted_ = false;
  int created_ = 0;
};

class RelayCredentialTest : public RelayServerTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "sshd logs in as the test's user: needs root";
    ServerTest::SetUp();
    if (HasFatalFailure()) return;
    SignInOperator();
    if (HasFatalFailure()) return;
    host_token_ = AddHost("spark-a");
    SignUpAliceWithKey();
  }

  void TearDown() override {
    StopAgent();
    ServerTest::TearDown();
  }

  void StopAgent() {
    if (!agent_) return;
    agent_->Stop();
    agent_thread_.join();
    agent_.reset();
  }

  /// Starts the host agent of spark-a on `engine`, with the relay CA `ca_line` and its probe
  /// certificate `probe` (as `gpuwerk agent --relay-ca … --relay-ca-probe …`).
  void StartAgent(agent::ContainerEngine& engine, const std::string& ca_line,
                  const std::string& probe) {
    agent::AgentOptions options;
    options.ssh_bind_address = "127.0.0.1";
    options.engine_timeout = 5s;
    options.relay_check_interval = 1s;
    auto ca = agent::ParseRelayCaLine(ca_line);
    ASSERT_TRUE(ca) << ca.error().message;
    auto probe_key = agent::ParseRelayProbeCertificate(probe);
    ASSERT_TRUE(probe_key) << probe_key.error().message;
    options.relay_certificate_authorities = {*ca};
    options.relay_probe_certificate = *probe_key;
    options.login_probe.command = {GPUWERK_LOGIN_PROBE_PROGRAM};
    client_ = std::make_unique<agent::AgentClient>(app_->base_url(), host_token_, 5s);
    agent_ = std::make_unique<agent::Agent>(options, engine, *client_, agent::Inventory{.cpus = 2});
    agent_thread_ = std::thread([this] { agent_->Run(); });
  }

  /// Alice's instance `id` as she sees it.
  json Instance(const std::string& id) { return alice_->Get("/api/v1/instances/" + id).Json(); }

  /// Polls instance `id` (≤ `limit`) until `pred` holds; returns the last view.
  template <class Pred>
  json WaitForInstance(const std::string& id, Pred pred, std::chrono::seconds limit = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    json in = Instance(id);
    while (!pred(in) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(100ms);
      in = Instance(id);
    }
    return in;
  }

  /// Audit events with `action` on `target`: their detail JSON texts.
  std::vector<std::string> AuditDetails(const std::string& action, const std::string& target) {
    auto rows = app_->database().Read(
        [&](store::Transaction& tx) -> core::Result<std::vector<std::string>> {
          GPUWERK_ASSIGN_OR_RETURN(
              auto found,
              tx.Query("SELECT detail FROM audit_events WHERE action = ? AND target = ?",
                       {action, target}));
          std::vector<std::string> out;
          for (const auto& r : found) out.push_back(r.Text("detail"));
          return out;
        });
    EXPECT_TRUE(rows) << rows.error().message;
    return rows.value_or(std::vector<std::string>{});
  }

  std::string host_token_;
  /// The instance's sshd and the engine around it; they outlive the agent (TearDown).
  std::unique_ptr<Sshd> sshd_;
  std::unique_ptr<SshdEngine> engine_;
  std::unique_ptr<agent::AgentClient> client_;
  std::unique_ptr<agent::Agent> agent_;
  std::thread agent_thread_;
};

bool HasRelayFault(const json& in) {
  return in.value("status_reason", "").find("relay credential") != std::string::npos;
}

TEST_F(RelayCredentialTest, C07_RelayCredentialFaultShowsInTheInstanceStatusUntilItIsCleared) {
  // The relay CA (the relay makes it at its start; here first, for the agent) and a probe
  // certificate of it, as `gpuwerk relay` prints them for agents.
  const auto relay_ca = RelayCa();
  ASSERT_TRUE(relay_ca) << relay_ca.error().message;
  const auto probe = relay::MakeProbeCertificate(relay_ca->path);
  ASSERT_TRUE(probe) << probe.error().message;
  // The instance's sshd knows alice's key only: the relay's lines are not in its file.
  sshd_ = std::make_unique<Sshd>(dir_.path() / "instance", alice_key_.public_line + "\n");
  engine_ =
      std::make_unique<SshdEngine>(sshd_->port(), dir_.path() / "instance" / "authorized_keys");
  SshdEngine& engine = *engine_;
  StartAgent(engine, relay_ca->public_line, *probe);
  if (HasFatalFailure()) return;

  // The agent's first sync brings the host online; then alice launches.
  auto online = [&] {
    const json types = alice_->Get("/api/v1/gpu-types").Json();
    for (const auto& t : types["items"]) {
      if (t["name"] == "spark-1x") return t["online"] == true;
    }
    return false;
  };
  for (int i = 0; i < 100 && !online(); ++i) std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(online());
  auto launched = alice_->PostJson(
      "/api/v1/instances",
      {{"name", "alpha"}, {"ssh_key_id", alice_key_id_}, {"gpu_type", "spark-1x"}});
  ASSERT_EQ(launched.status, 201) << launched.body;
  const json created = launched.Json();
  const std::string id = created["id"];
  const std::string hostname = created["hostname"];

  // Alice's key is proven (running), and the relay's refused: the status reason says so.
  json in = WaitForInstance(id, [](const json& j) { return HasRelayFault(j); });
  ASSERT_TRUE(HasRelayFault(in)) << in;
  EXPECT_EQ(in["status"], "running") << in;
  // The agent's own read-only file holds the relay's line: the fault says that sshd refuses it.
  EXPECT_NE(in["status_reason"].get<std::string>().find("sshd refuses the relay credential"),
            std::string::npos)
      << in;
  // It stays while the fault lasts: round after round, not only in the round that found it.
  const int rounds = engine.lists();
  while (engine.lists() < rounds + 4) {
    in = Instance(id);
    ASSERT_TRUE(HasRelayFault(in)) << "after " << engine.lists() - rounds << " rounds: " << in;
    std::this_thread::sleep_for(100ms);
  }

  // Through the relay: alice is told the relay credential is missing, not that her key is wrong,
  // and the refusal is audited.
  app::StoreRelayAuthorizer authorizer(app_->database(), app_->instances(), app_->clock(),
                                       app_->rng());
  app::AuditRelaySessionLog log(app_->database(), app_->clock(), app_->rng());
  relay::RelayOptions options = LocalRelayOptions();
  auto relay = relay::Relay::Start(options, authorizer, log);
  ASSERT_TRUE(relay) << relay.error().message;
  const std::string ssh = SshVia((*relay)->port(), alice_key_, hostname);
  auto refused = RunCommand(dir_.path(), ssh + " 'echo through'");
  EXPECT_EQ(refused.exit_code, 255) << refused.err;
  EXPECT_EQ(refused.out, "");
  EXPECT_NE(refused.err.find("is not accepting connections yet"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("relay credential is missing"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("Your own key was accepted"), std::string::npos) << refused.err;
  const auto audited = AuditDetails("relay_session.refused", id);
  ASSERT_EQ(audited.size(), 1u);
  EXPECT_EQ(json::parse(audited[0])["code"], "upstream_auth_failed") << audited[0];

  // The container's sshd reads the agent's file again: a check finds the relay's line accepted,
  // the fault clears, and the relay gets in.
  engine.LetKeysMountIn();
  in = WaitForInstance(id, [](const json& j) {
    return j["status"] == "running" && j.value("status_reason", "x").empty();
  });
  EXPECT_EQ(in["status"], "running") << in;
  EXPECT_EQ(in["status_reason"], "") << in;
  // What sshd reads now: the CA trusted for this instance's certificates alone.
  auto ca_line = agent::RelayCaKeyLine(relay_ca->public_line, id, "");
  ASSERT_TRUE(ca_line) << ca_line.error().message;
  EXPECT_NE(ReadFile(dir_.path() / "instance" / "authorized_keys").find(*ca_line + "\n"),
            std::string::npos);
  auto through = RunCommand(dir_.path(), ssh + " 'echo through'");
  EXPECT_EQ(through.exit_code, 0) << through.err;
  EXPECT_EQ(through.out, "through\n");
  (*relay)->Stop();
  StopAgent();
}

}  // namespace
}  // namespace gpuwerk::testing
