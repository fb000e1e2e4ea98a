// Issue 5, crash safety against a real engine: the real `gpuwerk server` is killed with
// SIGKILL by a fault point (GPUWERK_FAULT_POINTS, src/core/fault_point.h) at each step of a queue
// drain — `queue_instance_written` (inside the drain's transaction, after the instance rows) and
// `queue_drain_committed` (after the commit, before the agents are told) — while a real
// `gpuwerk agent` runs containers on the test's own podman API service (scripts/engine.sh) from
// the real instance image. After a restart on the same data dir, the store (read over the API and
// from its SQLite file) and the ENGINE (containers carrying the test host's `gpuwerk.host` label,
// read with the test's own EngineProbe) must agree: exactly one container, for the one launched
// entry; the entry launched exactly once and not open; the one behind it still open and never
// launched; the host held by exactly that instance. tests/integration/queue_crash_test.cc checks
// the store alone with a fake agent. QueueMailE2eTest (below) runs the same platform with the
// server's mail going to a real SMTP server (tests/support/smtp_sink.py) and logs in with the
// command the launch mail names. Needs root (rootful podman).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/strings.h"
#include "tests/support/child_process.h"
#include "tests/support/e2e_engine.h"
#include "tests/support/e2e_platform.h"
#include "tests/support/engine_probe.h"
#include "tests/support/eventually.h"
#include "tests/support/host_waits.h"
#include "tests/support/http_client.h"
#include "tests/support/mail_reader.h"
#include "tests/support/net.h"
#include "tests/support/run_command.h"
#include "tests/support/sign_up.h"
#include "tests/support/smtp_sink.h"
#include "tests/support/ssh_keygen.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::testing {
namespace {

const auto* const kEngine = RegisterEngineEnvironment("gpuwerk-qcrash-engine");

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

/// One integer from the server's SQLite store (read-only, beside the running server): the first
/// column of the first row of `sql` with `args` bound as text; -1 when the query fails.
int64_t StoreCount(const fs::path& db_path, const std::string& sql,
                   const std::vector<std::string>& args) {
  sqlite3* db = nullptr;
  int64_t out = -1;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
      for (size_t i = 0; i < args.size(); ++i) {
        sqlite3_bind_text(st, static_cast<int>(i + 1), args[i].c_str(), -1, SQLITE_TRANSIENT);
      }
      if (sqlite3_step(st) == SQLITE_ROW) out = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

/// The parameter: the fault point the server dies at.
class QueueCrashE2eTest : public E2eTest<::testing::TestWithParam<std::string>, 80> {
 protected:
  /// Starts `gpuwerk server` (E2ePlatform::StartServer: a free port the first time, the same
  /// one after) with `fault_points` as GPUWERK_FAULT_POINTS and the test's `extra_env_`.
  void StartServer(const std::string& fault_points) {
    std::map<std::string, std::string> env = extra_env_;
    if (!fault_points.empty()) env["GPUWERK_FAULT_POINTS"] = fault_points;
    platform_.StartServer(env);
  }

  /// Adds one spark-1x host called `name` and starts its `gpuwerk agent`; waits for its first
  /// sync.
  void AddHostWithAgent(const std::string& name) {
    E2eHost& host = platform_.AddHost(*op_, name);
    host_id_ = host.id;
    ASSERT_FALSE(host_id_.empty());
    platform_.StartAgent(host);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    ASSERT_TRUE(WaitHostsReady(*op_, 1)) << "the agent never synced with a working engine";
  }

  /// Where the server's mail lands: its Maildir outbox, or a test's SMTP sink.
  virtual fs::path MailDir() const { return platform_.data() / "mail"; }

  /// A new person (address proven) with an ssh-keygen key; returns the client and sets `key_id`.
  std::unique_ptr<HttpClient> Person(const std::string& name, std::string* key_id) {
    auto who = std::make_unique<HttpClient>(platform_.url());
    EXPECT_TRUE(SignUpAndProve(*who, MailDir(), name + "@example.test", kPassword));
    EXPECT_TRUE(RecordCard(*op_, name + "@example.test"));  // so that they can launch
    GeneratedKey key = GenerateKey(dir_.path(), name);
    EXPECT_FALSE(key.public_line.empty()) << "ssh-keygen failed";
    auto k =
        who->PostJson("/api/v1/ssh-keys", {{"name", "laptop"}, {"public_key", key.public_line}});
    EXPECT_EQ(k.status, 201) << k.body;
    *key_id = k.Json().value("id", "");
    return who;
  }

  /// Polls GET /api/v1/instances/{id} until `status` (≤ `limit`); the last answer.
  json WaitStatus(HttpClient& who, const std::string& id, const std::string& status,
                  milliseconds limit = seconds(90)) {
    json last;
    const bool ok = Eventually(
        [&] {
          auto r = who.Get("/api/v1/instances/" + id);
          last = r.status == 200 ? r.Json() : json{{"http_status", r.status}, {"body", r.body}};
          return r.status == 200 && last["status"] == status;
        },
        limit);
    EXPECT_TRUE(ok) << "instance " << id << " never became " << status << "; last: " << last.dump();
    return last;
  }

  /// The containers the engine has for this test's host (any state): [{Id, Labels, State}].
  json HostContainers() { return engine_->ContainersWithLabel(kHostLabel, host_id_); }

  /// The store and the engine agree: exactly one container on the host, running, for
  /// `instance_id`; the host's only placement is that instance.
  void ExpectOneContainerFor(const std::string& instance_id, const std::string& when) {
    json list = HostContainers();
    ASSERT_TRUE(list.is_array()) << when << ": the engine did not answer";
    ASSERT_EQ(list.size(), 1u) << when << ": " << list.dump();
    EXPECT_EQ(list[0]["Labels"][kInstanceLabel], instance_id) << when << ": " << list.dump();
    EXPECT_EQ(list[0]["State"], "running") << when << ": " << list.dump();
    auto hosts = op_->Get("/api/v1/admin/hosts").Json();
    ASSERT_EQ(hosts["items"].size(), 1u) << hosts.dump();
    EXPECT_EQ(hosts["items"][0]["instance_id"], instance_id) << when << ": " << hosts.dump();
    EXPECT_EQ(StoreCount(platform_.data() / "gpuwerk.db",
                         "SELECT COUNT(*) FROM placements WHERE host_id = ?", {host_id_}),
              1)
        << when;
  }

  void WaitAgentRounds(int rounds) {
    EXPECT_TRUE(gpuwerk::testing::WaitAgentRounds(*op_, rounds))
        << "the agents did not all sync " << rounds << " more times";
  }

  std::map<std::string, std::string> extra_env_;  ///< more server settings (e.g. SMTP); {} here
  std::string host_id_;
  std::unique_ptr<HttpClient> op_;
};

// A host with alice's instance; bob, then carol, queued behind it; alice deletes, the drain
// launches bob's entry onto the freed host and the server dies at the fault point. After a
// restart: bob's entry launched once, its one container running on the host, carol still
// waiting, alice's container gone.
TEST_P(QueueCrashE2eTest, ServerKilledInTheDrainLeavesStoreAndEngineAgreeing) {
  const std::string fault_point = GetParam();
  const auto t0 = std::chrono::steady_clock::now();
  StartServer(fault_point);
  ASSERT_FALSE(HasFatalFailure());
  op_ = platform_.Operator();
  AddHostWithAgent("spark-qcrash");
  ASSERT_FALSE(HasFatalFailure());

  // alice holds the only host.
  std::string alice_key, bob_key, carol_key;
  auto alice = Person("alice", &alice_key);
  auto created =
      alice->PostJson("/api/v1/instances",
                      {{"name", "first"}, {"ssh_key_id", alice_key}, {"gpu_type", "spark-1x"}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string alice_instance = created.Json()["id"];
  WaitStatus(*alice, alice_instance, "running");
  ASSERT_FALSE(HasFailure());
  ExpectOneContainerFor(alice_instance, "before the drain");

  // bob, then carol, wait behind it (the drains their joins start find no free host).
  auto bob = Person("bob", &bob_key);
  auto carol = Person("carol", &carol_key);
  auto bob_joined =
      bob->PostJson("/api/v1/queue-entries",
                    {{"name", "second"}, {"ssh_key_id", bob_key}, {"gpu_type", "spark-1x"}});
  ASSERT_EQ(bob_joined.status, 201) << bob_joined.body;
  const std::string bob_entry = bob_joined.Json()["id"];
  auto carol_joined =
      carol->PostJson("/api/v1/queue-entries",
                      {{"name", "third"}, {"ssh_key_id", carol_key}, {"gpu_type", "spark-1x"}});
  ASSERT_EQ(carol_joined.status, 201) << carol_joined.body;
  const std::string carol_entry = carol_joined.Json()["id"];
  EXPECT_EQ(carol_joined.Json()["position"], 2) << carol_joined.body;
  ASSERT_TRUE(platform_.server().Running()) << "the server died before any capacity freed";

  // alice deletes: the agent removes her container, the host frees, the drain launches bob's
  // entry, and the server dies at the fault point.
  auto deleted = alice->Delete("/api/v1/instances/" + alice_instance);
  ASSERT_TRUE(deleted.status == 204 || deleted.status == 202) << deleted.body;
  auto ended = platform_.server().Wait(seconds(60));
  ASSERT_TRUE(ended.has_value()) << "the server did not die at " << fault_point;
  EXPECT_TRUE(WIFSIGNALED(*ended) && WTERMSIG(*ended) == SIGKILL) << ChildProcess::Describe(*ended);
  EXPECT_NE(ReadFile(platform_.server_log()).find("fault point " + fault_point + " reached"),
            std::string::npos)
      << "the log does not name the fault point";

  // Restart on the same data dir and port, without fault points; the agent reconnects by itself.
  StartServer("");
  ASSERT_FALSE(HasFatalFailure());
  op_ = platform_.Operator();
  bob = platform_.SignIn("bob@example.test", kPassword);
  carol = platform_.SignIn("carol@example.test", kPassword);
  alice = platform_.SignIn("alice@example.test", kPassword);

  // bob's entry is launched (at once after queue_drain_committed; by the next drain after
  // queue_instance_written rolled it back) and its container runs.
  json bob_instances;
  ASSERT_TRUE(Eventually(
      [&] {
        bob_instances = bob->Get("/api/v1/instances").Json();
        return bob_instances.is_object() && bob_instances["total"] == 1;
      },
      seconds(60)))
      << "bob's entry was never launched: " << bob_instances.dump();
  const std::string bob_instance = bob_instances["items"][0]["id"];
  EXPECT_EQ(bob_instances["items"][0]["name"], "second");
  WaitStatus(*bob, bob_instance, "running");
  // alice's instance is gone for good, in the store and on the engine.
  EXPECT_TRUE(
      Eventually([&] { return alice->Get("/api/v1/instances/" + alice_instance).status == 404; },
                 seconds(30)));
  EXPECT_EQ(engine_->ContainersWithLabel(kInstanceLabel, alice_instance), json::array());

  auto check = [&](const std::string& when) {
    SCOPED_TRACE(when);
    ExpectOneContainerFor(bob_instance, when);
    // bob's entry: launched once, with that instance, not open.
    auto history = bob->Get("/api/v1/usage/queue").Json();
    ASSERT_EQ(history["total"], 1) << history.dump();
    EXPECT_EQ(history["items"][0]["outcome"], "launched") << history.dump();
    EXPECT_EQ(history["items"][0]["instance"]["id"], bob_instance) << history.dump();
    EXPECT_EQ(bob->Get("/api/v1/queue-entries").Json()["total"], 0);
    EXPECT_EQ(bob->Get("/api/v1/instances").Json()["total"], 1);
    const fs::path db = platform_.data() / "gpuwerk.db";
    EXPECT_EQ(StoreCount(db,
                         "SELECT COUNT(*) FROM audit_events WHERE action = 'queue.launch' AND "
                         "target = ?",
                         {bob_entry}),
              1);
    EXPECT_EQ(StoreCount(db, "SELECT COUNT(*) FROM instances WHERE name = 'second'", {}), 1);
    EXPECT_EQ(StoreCount(db,
                         "SELECT COUNT(*) FROM queue_entries WHERE status = 'open' AND "
                         "instance_id IS NOT NULL",
                         {}),
              0);
    // carol's: still open, first in line now, never launched, no container.
    auto open = carol->Get("/api/v1/queue-entries").Json();
    ASSERT_EQ(open["total"], 1) << open.dump();
    EXPECT_EQ(open["items"][0]["id"], carol_entry);
    EXPECT_EQ(open["items"][0]["status"], "open");
    EXPECT_EQ(open["items"][0]["position"], 1);
    EXPECT_TRUE(open["items"][0]["instance_id"].is_null()) << open.dump();
    EXPECT_EQ(carol->Get("/api/v1/instances").Json()["total"], 0);
    EXPECT_EQ(StoreCount(db, "SELECT COUNT(*) FROM instances WHERE name = 'third'", {}), 0);
  };
  check("once bob's instance runs");
  // And it stays so over further agent rounds and drains (the drain worker runs every 3 s).
  WaitAgentRounds(4);
  check("after four more agent rounds");
  std::cout << "[ timing ] " << fault_point << ": "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s\n";
}

INSTANTIATE_TEST_SUITE_P(FaultPoints, QueueCrashE2eTest,
                         ::testing::Values("queue_instance_written", "queue_drain_committed"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

/// Issue 5, "the launch mail arrives at a real SMTP server started by the test and its command
/// works": the same real server, agent and engine as above (no fault points), with the server
/// sending its mail to tests/support/smtp_sink.py (aiosmtpd) over SMTP. The queue's launch mail
/// (src/sched/queue_mails.cc) names `gpuwerk ssh NAME`, and also points at the ssh_command the
/// API shows; both, run as written with the person's own key, must reach the launched instance.
class QueueMailE2eTest : public QueueCrashE2eTest {
 protected:
  void SetUp() override {
    QueueCrashE2eTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (auto why = SinkUnavailable()) GTEST_SKIP() << "no real SMTP server: " << *why;
    // smtp_sink.h finds smtp_sink.py by GPUWERK_SOURCE_DIR, else by its own __FILE__ (relative
    // in ccache base_dir builds): name this tree's, as the build defines it.
    ::setenv("GPUWERK_SOURCE_DIR", SourceDir().c_str(), 0);
    std::string error;
    ASSERT_TRUE(sink_.Start(0, inbox(), {}, &error)) << error;
    extra_env_["GPUWERK_MAIL"] = "smtp";
    extra_env_["GPUWERK_SMTP_URL"] = "smtp://127.0.0.1:" + std::to_string(sink_.port());
    extra_env_["GPUWERK_SMTP_FROM"] = "gpuwerk <noreply@gpuwerk.test>";
  }

  void TearDown() override {
    QueueCrashE2eTest::TearDown();
    sink_.Stop();
  }

  fs::path inbox() const { return dir_.path() / "inbox"; }
  fs::path MailDir() const override { return inbox(); }

  /// The queue launch mails (not the sign-up ones) at the sink addressed to `to`.
  std::vector<ReceivedMail> LaunchMails(const std::string& to) const {
    std::vector<ReceivedMail> out;
    for (ReceivedMail& m : MailsTo(inbox(), to)) {
      if (m.subject.starts_with("Your gpuwerk instance ")) out.push_back(std::move(m));
    }
    return out;
  }

  /// `gpuwerk ARGS` as a person runs it, with its own login file under the test's directory.
  CommandResult Cli(const std::string& args, const std::string& input = "") {
    return RunCommand(dir_.path(),
                      "env -u GPUWERK_URL -u GPUWERK_TOKEN GPUWERK_CONFIG_DIR='" +
                          (dir_.path() / "cli").string() + "' " + args,
                      input);
  }

  SmtpSink sink_;
};

/// The text body's line (trimmed) that starts with `prefix`; "" when none.
std::string LineStartingWith(const std::string& text, const std::string& prefix) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line(
        core::Trim(core::TrimEnd(std::string_view(text).substr(start, end - start), " \t\r")));
    if (line.starts_with(prefix)) return line;
    start = end + 1;
  }
  return "";
}

// alice holds the only host; bob queues with his own key; alice deletes; the drain launches bob's
// entry, and his launch mail reaches the SMTP sink. The command it names (`gpuwerk ssh NAME`, the
// real CLI, logged in as bob) and the ssh_command the API shows (the stock ssh client) each log
// in to bob's running instance with bob's key.
TEST_F(QueueMailE2eTest, LaunchMailArrivesOverSmtpAndItsCommandWorks) {
  StartServer("");
  ASSERT_FALSE(HasFatalFailure());
  op_ = platform_.Operator();
  AddHostWithAgent("spark-qmail");
  ASSERT_FALSE(HasFatalFailure());

  std::string alice_key, bob_key;
  auto alice = Person("alice", &alice_key);
  auto created =
      alice->PostJson("/api/v1/instances",
                      {{"name", "first"}, {"ssh_key_id", alice_key}, {"gpu_type", "spark-1x"}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string alice_instance = created.Json()["id"];
  WaitStatus(*alice, alice_instance, "running");
  ASSERT_FALSE(HasFailure());

  auto bob = Person("bob", &bob_key);
  const fs::path bob_private = dir_.path() / "bob";  // Person's ssh-keygen key
  auto joined =
      bob->PostJson("/api/v1/queue-entries",
                    {{"name", "second"}, {"ssh_key_id", bob_key}, {"gpu_type", "spark-1x"}});
  ASSERT_EQ(joined.status, 201) << joined.body;
  EXPECT_EQ(joined.Json()["position"], 1) << joined.body;
  EXPECT_TRUE(LaunchMails("bob@example.test").empty()) << "mailed before the launch";

  auto deleted = alice->Delete("/api/v1/instances/" + alice_instance);
  ASSERT_TRUE(deleted.status == 204 || deleted.status == 202) << deleted.body;

  // bob's launch mail, over SMTP at the sink.
  std::vector<ReceivedMail> mails;
  ASSERT_TRUE(Eventually(
      [&] {
        mails = LaunchMails("bob@example.test");
        return !mails.empty();
      },
      seconds(90)))
      << "no mail to bob at the SMTP sink";
  ASSERT_EQ(mails.size(), 1u);
  EXPECT_EQ(mails[0].subject, "Your gpuwerk instance second is starting");
  const std::string mailed = LineStartingWith(mails[0].text_body, "gpuwerk ssh ");
  ASSERT_EQ(mailed, "gpuwerk ssh second") << mails[0].text_body;

  json bob_instances;
  ASSERT_TRUE(Eventually(
      [&] {
        bob_instances = bob->Get("/api/v1/instances").Json();
        return bob_instances.is_object() && bob_instances["total"] == 1;
      },
      seconds(30)))
      << bob_instances.dump();
  const std::string bob_instance = bob_instances["items"][0]["id"];
  const json running = WaitStatus(*bob, bob_instance, "running");
  ASSERT_FALSE(HasFailure());
  const std::string hostname = running["hostname"];
  EXPECT_NE(mails[0].text_body.find(hostname), std::string::npos) << mails[0].text_body;

  // The mailed command, run as written (the real CLI, logged in as bob), with bob's key and a
  // fresh known_hosts passed on to ssh after `--`.
  const std::string known_hosts = (dir_.path() / "bob_known_hosts").string();
  const std::string remote = "'echo launched-$(hostname)'";
  auto login = Cli(GpuwerkBinary() + " login --url " + platform_.url() +
                       " --email bob@example.test --password-stdin",
                   std::string(kPassword) + "\n");
  ASSERT_EQ(login.exit_code, 0) << login.err;
  auto via_cli = Cli(GpuwerkBinary() + mailed.substr(std::string("gpuwerk").size()) + " -- -i " +
                     bob_private.string() + " -o UserKnownHostsFile=" + known_hosts +
                     " -o BatchMode=yes -o ConnectTimeout=10 " + remote);
  EXPECT_EQ(via_cli.exit_code, 0) << "`" << mailed << "` failed: " << via_cli.err;
  EXPECT_EQ(via_cli.out, "launched-" + hostname + "\n") << via_cli.err;

  // The ssh_command the mail points at (API, dashboard), with the stock ssh client: only bob's
  // key and client options inserted after `ssh`.
  ASSERT_TRUE(running["ssh_command"].is_string()) << running.dump();
  const std::string shown = running["ssh_command"];
  ASSERT_TRUE(shown.starts_with("ssh ")) << shown;
  auto via_ssh = RunCommand(dir_.path(), "ssh -i " + bob_private.string() +
                                             " -o StrictHostKeyChecking=accept-new"
                                             " -o UserKnownHostsFile=" +
                                             known_hosts + "-direct -o BatchMode=yes " +
                                             shown.substr(4) + " " + remote);
  EXPECT_EQ(via_ssh.exit_code, 0) << "`" << shown << "` failed: " << via_ssh.err;
  EXPECT_EQ(via_ssh.out, "launched-" + hostname + "\n") << via_ssh.err;

  // Clean up: bob deletes; his container goes.
  auto gone = bob->Delete("/api/v1/instances/" + bob_instance);
  EXPECT_TRUE(gone.status == 204 || gone.status == 202) << gone.body;
  EXPECT_TRUE(Eventually(
      [&] {
        return bob->Get("/api/v1/instances/" + bob_instance).status == 404 &&
               engine_->ContainersWithLabel(kInstanceLabel, bob_instance) == json::array();
      },
      seconds(60)))
      << engine_->ContainersWithLabel(kInstanceLabel, bob_instance).dump();
}

}  // namespace
}  // namespace gpuwerk::testing
