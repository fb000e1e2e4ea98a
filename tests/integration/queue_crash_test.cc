// R-12 across crashes: the real `gpuwerk server` binary is killed (SIGKILL, by a fault point) in
// the middle of a queue drain and after it; after a restart the store is consistent: the entry
// is launched exactly once, never both open and launched, and no host is given twice.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/logging.h"
#include "tests/support/billing_card.h"
#include "tests/support/http_client.h"
#include "tests/support/net.h"
#include "tests/support/run_command.h"
#include "tests/support/sign_up.h"
#include "tests/support/ssh_keygen.h"
#include "tests/support/temp_dir.h"

extern char** environ;

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

class QueueCrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::InitCrypto();
    port_ = FreePort();
    url_ = "http://127.0.0.1:" + std::to_string(port_);
  }
  void TearDown() override { Kill(); }

  /// Starts `gpuwerk server` on the data dir, with `fault` as GPUWERK_FAULT_POINTS; waits for
  /// /healthz.
  void StartServer(const std::string& fault = "") {
    const std::string binary = GpuwerkBinary();
    const std::string data = (dir_.path() / "data").string();
    const std::string listen = "127.0.0.1:" + std::to_string(port_);
    std::vector<std::string> args = {binary, "server", "--data", data, "--listen", listen};
    std::vector<std::string> env = {
        "GPUWERK_OPERATOR_EMAIL=op@example.test", "GPUWERK_OPERATOR_PASSWORD=operator password 1",
        "GPUWERK_PASSWORD_HASH_COST=test-only-minimum", "GPUWERK_FAULT_POINTS=" + fault};
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string(*e).rfind("GPUWERK_", 0) != 0) env.emplace_back(*e);
    }
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    ASSERT_EQ(::posix_spawn(&pid_, binary.c_str(), nullptr, nullptr, argv.data(), envp.data()), 0);
    for (int i = 0; i < 200; ++i) {
      HttpClient probe(url_);
      if (probe.Get("/healthz").status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "the server did not come up";
  }
  /// Waits up to 10 s for the server to die by itself (a fault point); true when it did.
  bool WaitForDeath() {
    for (int i = 0; i < 200 && pid_ > 0; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    if (!WaitForDeath()) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
  }
  std::unique_ptr<HttpClient> Login(const std::string& email, const std::string& password) {
    auto c = std::make_unique<HttpClient>(url_);
    auto r = c->PostJson("/api/v1/auth/login", {{"email", email}, {"password", password}});
    EXPECT_EQ(r.status, 200) << r.body;
    return c;
  }
  HttpResult Sync(const std::string& token) {
    HttpClient agent(url_);
    agent.SetBearer(token);
    return agent.PostJson("/api/v1/agent/sync", {{"inventory", {{"cpus", 2}}},
                                                 {"engine", {{"ok", true}, {"error", ""}}},
                                                 {"containers", json::array()},
                                                 {"failures", json::array()}});
  }

  /// Brings up a server with an operator, a host (registered, not yet synced) and alice in the
  /// spark-1x queue; returns the host token.
  std::string Prepare() {
    StartServer();
    auto op = Login("op@example.test", "operator password 1");
    auto host =
        op->PostJson("/api/v1/admin/hosts",
                     {{"name", "spark-a"}, {"gpu_type", "spark-1x"}, {"ssh_address", "127.0.0.1"}});
    EXPECT_EQ(host.status, 201) << host.body;
    HttpClient alice(url_);
    EXPECT_TRUE(SignUpAndProve(alice, dir_.path() / "data" / "mail", "alice@example.test",
                               "alice password 1"));
    EXPECT_TRUE(RecordCard(*op, "alice@example.test"));  // so that she can launch
    auto key = alice.PostJson(
        "/api/v1/ssh-keys",
        {{"name", "laptop"}, {"public_key", GenerateKey(dir_.path(), "alice").public_line}});
    EXPECT_EQ(key.status, 201) << key.body;
    auto joined = alice.PostJson(
        "/api/v1/queue-entries",
        {{"name", "trainer"}, {"ssh_key_id", key.Json()["id"]}, {"gpu_type", "spark-1x"}});
    EXPECT_EQ(joined.status, 201) << joined.body;
    EXPECT_EQ(joined.Json()["status"], "open");
    Kill();
    return host.Json().value("token", "");
  }

  /// After a restart without faults: one launched entry, one instance, on the host, exactly once.
  void ExpectOneLaunch(const std::string& token) {
    StartServer();
    ASSERT_EQ(Sync(token).status, 200);  // capacity, if the launch was rolled back
    auto alice = Login("alice@example.test", "alice password 1");
    auto history = alice->Get("/api/v1/usage/queue").Json();
    ASSERT_EQ(history["total"], 1) << history.dump();
    EXPECT_EQ(history["items"][0]["outcome"], "launched");
    EXPECT_EQ(alice->Get("/api/v1/queue-entries").Json()["total"], 0);
    auto instances = alice->Get("/api/v1/instances").Json();
    ASSERT_EQ(instances["total"], 1);
    EXPECT_EQ(instances["items"][0]["name"], "trainer");
    EXPECT_EQ(history["items"][0]["instance"]["id"], instances["items"][0]["id"]);
    auto op = Login("op@example.test", "operator password 1");
    auto hosts = op->Get("/api/v1/admin/hosts").Json()["items"];
    ASSERT_EQ(hosts.size(), 1u);
    EXPECT_EQ(hosts[0]["instance_id"], instances["items"][0]["id"]);
    // The agent is told to run exactly that one container.
    auto desired = Sync(token).Json()["desired"];
    ASSERT_EQ(desired.size(), 1u);
    EXPECT_EQ(desired[0]["instance_id"], instances["items"][0]["id"]);
  }

  TempDir dir_;
  int port_ = 0;
  std::string url_;
  pid_t pid_ = -1;
};

// Killed inside the drain's transaction, after the instance rows were written: nothing of the
// launch survives; the next drain launches the entry once.
TEST_F(QueueCrashTest, KilledMidDrainLaunchesOnceAfterRestart) {
  const std::string token = Prepare();
  StartServer("queue_instance_written");
  (void)Sync(token);  // the host comes online: the drain dies mid-transaction
  ASSERT_TRUE(WaitForDeath()) << "the fault point did not fire";
  ExpectOneLaunch(token);
}

// Killed after the drain committed, before the agents were woken: the launch stands and is not
// repeated.
TEST_F(QueueCrashTest, KilledAfterDrainCommitKeepsTheLaunch) {
  const std::string token = Prepare();
  StartServer("queue_drain_committed");
  (void)Sync(token);
  ASSERT_TRUE(WaitForDeath()) << "the fault point did not fire";
  ExpectOneLaunch(token);
}

}  // namespace
}  // namespace gpuwerk::testing
