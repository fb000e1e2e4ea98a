#pragma once

// One end-to-end test's gpuwerk: a real `gpuwerk server` on a free loopback port with its own
// data directory, hosts registered through the admin API with a real `gpuwerk agent` each
// against the suite's engine (tests/support/e2e_engine.h), and the operator signed in. Every
// e2e suite that runs its own server builds on it, so that how the processes are started,
// stopped, logged on failure and cleaned up is written once. Start-up problems are gtest
// failures: callers check HasFatalFailure() after a call that can fail.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/billing_card.h"
#include "tests/support/child_process.h"
#include "tests/support/e2e_engine.h"
#include "tests/support/engine_probe.h"
#include "tests/support/eventually.h"
#include "tests/support/http_client.h"
#include "tests/support/net.h"
#include "tests/support/sign_up.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::testing {

/// SIGTERM to a child that still runs; expects it to exit 0 within 20 s (a stop asked for with
/// SIGTERM must end cleanly: under ASan, with no leak report either). A child that never
/// started, or that a test killed on purpose, is left alone.
inline void StopCleanly(ChildProcess& child, const std::string& what) {
  if (!child.Running()) return;
  auto status = child.Stop(std::chrono::seconds(20));
  EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << what << " did not stop cleanly on SIGTERM: "
      << (status ? ChildProcess::Describe(*status) : "no status");
}

/// A host registered through `POST /api/v1/admin/hosts` and its agent process.
struct E2eHost {
  std::string name;
  std::string id;
  std::string token;  ///< the host's credential, handed to its agent in the environment
  std::filesystem::path state_dir;
  std::filesystem::path log;
  ChildProcess agent;
};

/// The server, its hosts and agents, for one test; `dir` is the test's temporary directory
/// (logs: server.log, agent-<host>.log; data: data/; agents' state: agent-<host>/).
class E2ePlatform {
 public:
  explicit E2ePlatform(std::filesystem::path dir) : dir_(std::move(dir)), data_(dir_ / "data") {}
  E2ePlatform(const E2ePlatform&) = delete;
  E2ePlatform& operator=(const E2ePlatform&) = delete;

  /// Starts `gpuwerk server` with the test settings (operator from the environment, the
  /// cheapest password hash, the suite's instance image, debug logs) and `env` on top, and waits
  /// until /healthz answers (≤ 60 s). The first start takes a free port (another one when the
  /// chosen port was taken meanwhile); later starts reuse it, so that agents keep their URL.
  void StartServer(const std::map<std::string, std::string>& env = {}) {
    std::map<std::string, std::string> all = CleanEnv();
    all["GPUWERK_OPERATOR_EMAIL"] = kOperatorEmail;
    all["GPUWERK_OPERATOR_PASSWORD"] = kOperatorPassword;
    all["GPUWERK_PASSWORD_HASH_COST"] = "test-only-minimum";
    all["GPUWERK_INSTANCE_IMAGE"] = kInstanceImage;
    all["GPUWERK_LOG_LEVEL"] = "debug";
    for (const auto& [k, v] : env) all[k] = v;
    const bool restart = port_ != 0;
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (!restart) port_ = FreePort();
      url_ = "http://127.0.0.1:" + std::to_string(port_);
      ASSERT_TRUE(server_.Start({GpuwerkBinary(), "server", "--data", data_.string(), "--listen",
                                 "127.0.0.1:" + std::to_string(port_)},
                                all, server_log()))
          << server_.error();
      HttpClient probe(url_);
      const bool up =
          Eventually([&] { return !server_.Running() || probe.Get("/healthz").status == 200; },
                     std::chrono::seconds(60));
      if (up && server_.Running()) return;
      if (!server_.Running() && !restart) continue;  // e.g. the port was taken meanwhile
      FAIL() << "gpuwerk server did not come up; log:\n" << Tail(server_log(), 80);
    }
    FAIL() << "gpuwerk server did not start; log:\n" << Tail(server_log(), 80);
  }

  /// A new client signed in as `email` (expects 200).
  std::unique_ptr<HttpClient> SignIn(const std::string& email, const std::string& password) {
    auto c = std::make_unique<HttpClient>(url_);
    auto r = c->PostJson("/api/v1/auth/login", {{"email", email}, {"password", password}});
    EXPECT_EQ(r.status, 200) << email << ": " << r.body;
    return c;
  }

  /// The operator the server was started with, signed in.
  std::unique_ptr<HttpClient> Operator() { return SignIn(kOperatorEmail, kOperatorPassword); }

  /// A new person with password kPassword, signed in, whose address is proven through the
  /// mailed link read from `mail_dir` (the server's Maildir outbox by default); with
  /// Card::kRecorded (the default) the operator records a payment method for them, so that they
  /// can launch.
  std::unique_ptr<HttpClient> SignUp(const std::string& email,
                                     const std::filesystem::path& mail_dir = {},
                                     Card card = Card::kRecorded) {
    auto who = std::make_unique<HttpClient>(url_);
    EXPECT_TRUE(
        SignUpAndProve(*who, mail_dir.empty() ? data_ / "mail" : mail_dir, email, kPassword));
    if (card == Card::kRecorded) RecordCardFor(email);
    return who;
  }
  /// The operator records the tests' card (TestCardJson) for `email`.
  void RecordCardFor(const std::string& email) {
    auto op = Operator();
    EXPECT_TRUE(RecordCard(*op, email));
  }

  /// Registers host `name` (a `gpu_type` host without a GPU: these machines have none; its
  /// containers' sshd published on 127.0.0.1) through `op`, with `fields` added to the request. The
  /// host is kept here for its agent and the clean-up; its id and token are empty when the request
  /// failed (a test failure then).
  E2eHost& AddHost(HttpClient& op, const std::string& name,
                   const std::string& gpu_type = "spark-1x",
                   const nlohmann::json& fields = nlohmann::json::object()) {
    nlohmann::json body = {{"name", name},
                           {"gpu_type", gpu_type},
                           {"gpu_required", false},
                           {"ssh_address", "127.0.0.1"}};
    body.update(fields);
    auto r = op.PostJson("/api/v1/admin/hosts", body);
    EXPECT_EQ(r.status, 201) << r.body;
    auto host = std::make_unique<E2eHost>();
    host->name = name;
    const nlohmann::json j = r.Json();
    if (j.is_object()) {
      host->id = j.value("id", "");
      host->token = j.value("token", "");
    }
    host->state_dir = dir_ / ("agent-" + name);
    host->log = dir_ / ("agent-" + name + ".log");
    hosts_.push_back(std::move(host));
    return *hosts_.back();
  }

  /// Starts `host`'s agent against the suite's engine (or `engine_socket`), syncing every
  /// second, with `args` added to its command line; its token goes in the environment.
  void StartAgent(E2eHost& host, const std::vector<std::string>& args = {},
                  const std::string& engine_socket = "") {
    std::vector<std::string> argv = {
        GpuwerkBinary(),
        "agent",
        "--server",
        url_,
        "--engine",
        "unix://" + (engine_socket.empty() ? EngineEnvironment::socket() : engine_socket),
        "--state-dir",
        host.state_dir.string(),
        "--sync-interval-seconds",
        "1",
        "--log-level",
        "debug"};
    argv.insert(argv.end(), args.begin(), args.end());
    ASSERT_TRUE(host.agent.Start(argv, CleanEnvWith("GPUWERK_HOST_TOKEN", host.token), host.log))
        << host.agent.error();
  }

  /// Stops every agent, then the server, each expected to end cleanly (StopCleanly).
  void Stop() {
    for (auto& h : hosts_) StopCleanly(h->agent, "gpuwerk agent " + h->name);
    StopCleanly(server_, "gpuwerk server");
  }

  /// The last lines of the server's and every agent's log, for a failed test.
  void PrintLogs(size_t lines = 60) const {
    std::cerr << "---- server log (" << server_log().string() << ", last lines)\n"
              << Tail(server_log(), lines) << "\n";
    for (const auto& h : hosts_) {
      std::cerr << "---- agent " << h->name << " log (last lines)\n" << Tail(h->log, lines) << "\n";
    }
    std::cerr << "----\n";
  }

  /// Removes, through `engine`, every container of this platform's hosts, whatever happened.
  void RemoveContainers(EngineProbe& engine) const {
    for (const auto& h : hosts_) {
      if (h->id.empty()) continue;
      nlohmann::json list = engine.ContainersWithLabel(kHostLabel, h->id);
      if (!list.is_array()) continue;
      for (const auto& c : list) engine.ForceRemove(c["Id"].get<std::string>());
    }
  }

  const std::string& url() const { return url_; }
  int port() const { return port_; }
  const std::filesystem::path& dir() const { return dir_; }
  const std::filesystem::path& data() const { return data_; }
  std::filesystem::path server_log() const { return dir_ / "server.log"; }
  ChildProcess& server() { return server_; }
  /// Host `i` in the order AddHost made them.
  E2eHost& host(size_t i) { return *hosts_.at(i); }
  size_t host_count() const { return hosts_.size(); }

 private:
  std::filesystem::path dir_;
  std::filesystem::path data_;
  int port_ = 0;
  std::string url_;
  ChildProcess server_;
  std::vector<std::unique_ptr<E2eHost>> hosts_;
};

/// The fixture of an e2e suite that runs its own gpuwerk on the suite's engine
/// (RegisterEngineEnvironment): SetUp skips when not root and fails when the engine does not
/// answer; TearDown stops the platform, prints its logs when the test failed (`kLogLines` lines
/// of each) and removes the test's containers. `Base` is ::testing::Test or
/// ::testing::TestWithParam<…>. A suite that adds to SetUp calls E2eTest::SetUp() first and
/// returns when IsSkipped() or HasFatalFailure().
template <class Base = ::testing::Test, size_t kLogLines = 40>
class E2eTest : public Base {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << EngineEnvironment::setup_error();
    ASSERT_EQ(EngineEnvironment::setup_error(), "");
    engine_ = std::make_unique<EngineProbe>(EngineEnvironment::socket());
    ASSERT_TRUE(engine_->Up()) << "the suite's engine does not answer on "
                               << EngineEnvironment::socket();
  }
  void TearDown() override {
    platform_.Stop();
    if (::testing::Test::HasFailure()) platform_.PrintLogs(kLogLines);
    if (engine_) platform_.RemoveContainers(*engine_);
  }

  TempDir dir_;
  E2ePlatform platform_{dir_.path()};
  std::unique_ptr<EngineProbe> engine_;
};

}  // namespace gpuwerk::testing
