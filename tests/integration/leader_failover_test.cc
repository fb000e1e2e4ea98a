// Scale-out (R-12, docs/scale-out.md): two real `gpuwerk server` processes on one PostgreSQL
// database (the ctest `postgres_server` fixture's server). One holds the leader lease and runs the
// leader-only work; killed (SIGKILL), the other takes the lease over within the lease time and
// launches the queue entry it left; a leader paused (SIGSTOP) past its lease and resumed does no
// leader-only write while there is some to do (its fenced-write counter stands still while the
// new leader's goes on) and says in its log that it lost.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/logging.h"
#include "tests/support/billing_card.h"
#include "tests/support/eventually.h"
#include "tests/support/http_client.h"
#include "tests/support/net.h"
#include "tests/support/postgres_server.h"
#include "tests/support/run_command.h"
#include "tests/support/sign_up.h"
#include "tests/support/ssh_keygen.h"
#include "tests/support/temp_dir.h"

extern char** environ;

namespace gpuwerk::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kLeaseSeconds = 3;
constexpr int kHostSilentAfterSeconds = 10;

/// One `gpuwerk server` process on the shared database.
struct Replica {
  std::string name;
  std::filesystem::path data;
  uint16_t port = 0;
  pid_t pid = -1;
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
  std::filesystem::path log() const { return data.parent_path() / (name + ".log"); }
};

class LeaderFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::InitCrypto();
    if (auto why = PostgresUnavailable()) GTEST_SKIP() << *why;
    std::string error;
    server_ = PostgresServer::Shared(&error);
    ASSERT_NE(server_, nullptr) << error;
    auto url = server_->CreateDatabase(&error);
    ASSERT_TRUE(url) << error;
    database_ = *url;
  }
  void TearDown() override {
    for (Replica* r : {&a_, &b_}) Kill(*r, SIGKILL);
    if (!database_.empty()) {
      std::string error;
      server_->DropDatabase(database_, &error);
    }
  }

  /// Starts `r` (a fresh port; its log in the temp directory) and waits for /healthz.
  void Start(Replica& r, const std::string& name) {
    r.name = name;
    r.data = dir_.path() / name;
    r.port = FreePort();
    const std::string binary = GpuwerkBinary();
    std::vector<std::string> args = {binary, "server",   "--data",
                                     r.data, "--listen", "127.0.0.1:" + std::to_string(r.port)};
    std::vector<std::string> env = {
        "GPUWERK_DATABASE=" + database_,
        "GPUWERK_LEADER_LEASE_SECONDS=" + std::to_string(kLeaseSeconds),
        "GPUWERK_OPERATOR_EMAIL=op@example.test", "GPUWERK_OPERATOR_PASSWORD=operator password 1",
        "GPUWERK_PASSWORD_HASH_COST=test-only-minimum",
        // The host is heard from once: 10 s later its instance is on a silent host, which the
        // leader marks unknown every second from then on (a leader-only write, fenced).
        "GPUWERK_HOST_UNKNOWN_AFTER_SECONDS=" + std::to_string(kHostSilentAfterSeconds)};
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string(*e).rfind("GPUWERK_", 0) != 0) env.emplace_back(*e);
    }
    std::vector<char*> argv, envp;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    const std::string log = r.log().string();
    posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&files, 1, 2);
    const int spawned =
        ::posix_spawn(&r.pid, binary.c_str(), &files, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&files);
    ASSERT_EQ(spawned, 0);
    ASSERT_TRUE(Eventually([&] { return HttpClient(r.url()).Get("/healthz").status == 200; },
                           seconds(30), milliseconds(50)))
        << name << " did not come up:\n"
        << Log(r);
  }
  void Kill(Replica& r, int signal) {
    if (r.pid <= 0) return;
    if (signal == SIGKILL) ::kill(r.pid, SIGCONT);
    ::kill(r.pid, signal);
    ::waitpid(r.pid, nullptr, 0);
    r.pid = -1;
  }
  static std::string Log(const Replica& r) {
    std::ifstream in(r.log());
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  /// The value of the sample `name` (no labels) on `r`'s /metrics; -1 when absent.
  static double Metric(const Replica& r, const std::string& name) {
    auto answer = HttpClient(r.url()).Get("/metrics");
    std::istringstream lines(answer.body);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
    }
    return -1;
  }
  std::unique_ptr<HttpClient> Login(const Replica& r, const std::string& email,
                                    const std::string& password) {
    auto c = std::make_unique<HttpClient>(r.url());
    auto answer = c->PostJson("/api/v1/auth/login", {{"email", email}, {"password", password}});
    EXPECT_EQ(answer.status, 200) << answer.body;
    return c;
  }
  static HttpResult Sync(const Replica& r, const std::string& token) {
    HttpClient agent(r.url());
    agent.SetBearer(token);
    return agent.PostJson("/api/v1/agent/sync", {{"inventory", {{"cpus", 2}}},
                                                 {"engine", {{"ok", true}, {"error", ""}}},
                                                 {"containers", json::array()},
                                                 {"failures", json::array()}});
  }

  TempDir dir_;
  PostgresServer* server_ = nullptr;
  std::string database_;
  Replica a_, b_;
};

TEST_F(LeaderFailoverTest, TheFollowerTakesOverAKilledLeaderAndAPausedOneActsNoMore) {
  Start(a_, "a");
  ASSERT_EQ(Metric(a_, "gpuwerk_leader"), 1) << Log(a_);
  EXPECT_EQ(Metric(a_, "gpuwerk_leader_epoch"), 1);
  Start(b_, "b");
  EXPECT_EQ(Metric(b_, "gpuwerk_leader"), 0) << Log(b_);

  // Through the leader a (its outbox sends the sign-up mail into a's data directory): an
  // operator, a host never heard from (so no capacity), alice with a card and a key, queued.
  auto op = Login(a_, "op@example.test", "operator password 1");
  auto host =
      op->PostJson("/api/v1/admin/hosts",
                   {{"name", "spark-a"}, {"gpu_type", "spark-1x"}, {"ssh_address", "127.0.0.1"}});
  ASSERT_EQ(host.status, 201) << host.body;
  const std::string token = host.Json().value("token", "");
  HttpClient alice(a_.url());
  ASSERT_TRUE(SignUpAndProve(alice, a_.data / "mail", "alice@example.test", "alice password 1"));
  ASSERT_TRUE(RecordCard(*op, "alice@example.test"));
  auto key = alice.PostJson(
      "/api/v1/ssh-keys",
      {{"name", "laptop"}, {"public_key", GenerateKey(dir_.path(), "alice").public_line}});
  ASSERT_EQ(key.status, 201) << key.body;
  auto joined = alice.PostJson(
      "/api/v1/queue-entries",
      {{"name", "trainer"}, {"ssh_key_id", key.Json()["id"]}, {"gpu_type", "spark-1x"}});
  ASSERT_EQ(joined.status, 201) << joined.body;
  ASSERT_EQ(joined.Json()["status"], "open");

  // The leader dies; the host comes online through b, which only takes over (and launches the
  // entry) once a's lease has run out: within the lease time and a renewal round.
  Kill(a_, SIGKILL);
  ASSERT_EQ(Sync(b_, token).status, 200);
  auto alice_b = Login(b_, "alice@example.test", "alice password 1");
  ASSERT_TRUE(Eventually(
      [&] {
        auto history = alice_b->Get("/api/v1/usage/queue").Json();
        return history["total"] == 1 && history["items"][0]["outcome"] == "launched";
      },
      seconds(3 * kLeaseSeconds), milliseconds(100)))
      << Log(b_);
  EXPECT_EQ(Metric(b_, "gpuwerk_leader"), 1);
  EXPECT_EQ(Metric(b_, "gpuwerk_leader_epoch"), 2);
  auto instances = alice_b->Get("/api/v1/instances").Json();
  ASSERT_EQ(instances["total"], 1) << instances.dump();
  EXPECT_EQ(instances["items"][0]["name"], "trainer");

  // a comes back as a follower; b is paused past its lease and a takes over.
  Start(a_, "a2");
  EXPECT_EQ(Metric(a_, "gpuwerk_leader"), 0);
  // Once the host is silent, the leader b has leader-only work every second (marking its
  // instance unknown), each a fenced write.
  double fenced = -1;
  ASSERT_TRUE(Eventually(
      [&] {
        const double before = Metric(b_, "gpuwerk_leader_fenced_writes_total");
        std::this_thread::sleep_for(milliseconds(1500));
        fenced = Metric(b_, "gpuwerk_leader_fenced_writes_total");
        return fenced > before;
      },
      seconds(3 * kHostSilentAfterSeconds), milliseconds(0)))
      << Log(b_);
  ::kill(b_.pid, SIGSTOP);
  ASSERT_TRUE(Eventually([&] { return Metric(a_, "gpuwerk_leader") == 1; },
                         seconds(3 * kLeaseSeconds), milliseconds(100)))
      << Log(a_);
  EXPECT_EQ(Metric(a_, "gpuwerk_leader_epoch"), 3);
  ::kill(b_.pid, SIGCONT);
  // Resumed, b learns at its next lease round that it lost, and meanwhile does no leader-only
  // write: its own clock tells it that its lease ran out while it stood still.
  ASSERT_TRUE(Eventually([&] { return Log(b_).find("no longer holds") != std::string::npos; },
                         seconds(3 * kLeaseSeconds), milliseconds(100)))
      << Log(b_);
  EXPECT_EQ(Metric(b_, "gpuwerk_leader"), 0);
  // The work is still there (a2 does it now), and b does none of it: at most the one write that
  // may have fallen between the last reading and the SIGSTOP.
  const double a_fenced = Metric(a_, "gpuwerk_leader_fenced_writes_total");
  const double b_fenced = Metric(b_, "gpuwerk_leader_fenced_writes_total");
  EXPECT_LE(b_fenced, fenced + 1);
  std::this_thread::sleep_for(milliseconds(2500));
  EXPECT_EQ(Metric(b_, "gpuwerk_leader_fenced_writes_total"), b_fenced);
  EXPECT_GT(Metric(a_, "gpuwerk_leader_fenced_writes_total"), a_fenced);
  EXPECT_EQ(Metric(a_, "gpuwerk_leader"), 1);
}

}  // namespace
}  // namespace gpuwerk::testing
