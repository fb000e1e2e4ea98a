// Moving a `gpuwerk up` installation from SQLite onto PostgreSQL (docs/database.md "Moving from
// `gpuwerk up` (SQLite) to PostgreSQL"): a server on SQLite is filled through the API (people
// signed up with passwords, SSH keys, a team, instances with billing sessions, a closed month's
// invoice, the audit log), stopped, copied by `gpuwerk admin copy-database` into the run's
// PostgreSQL, and a server started on the copy answers the same things: sign-in with the same
// password, the same keys, instances, usage, invoice totals and audit events. Refused: a copy of
// the SQLite store while its server runs, into a target that is not empty, and of a source newer
// than this gpuwerk.
#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>

#include "app/admin_copy_database.h"
#include "core/time_format.h"
#include "store/database.h"
#include "store/open_database.h"
#include "tests/integration/queue_fixture.h"
#include "tests/support/postgres_server.h"
#include "tests/support/run_command.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

class CopyDatabaseTest : public QueueFixture {
 protected:
  void SetUp() override {
    if (auto why = PostgresUnavailable()) GTEST_SKIP() << *why;
    std::string error;
    postgres_ = PostgresServer::Shared(&error);
    ASSERT_NE(postgres_, nullptr) << error;
    QueueFixture::SetUp();
  }
  void TearDown() override {
    if (copy_) copy_->Stop();
    copy_.reset();
    QueueFixture::TearDown();
    std::string error;
    for (const auto& url : databases_) postgres_->DropDatabase(url, &error);
  }
  std::string NewDatabase() {
    std::string error;
    auto url = postgres_->CreateDatabase(&error);
    EXPECT_TRUE(url) << error;
    if (url) databases_.push_back(*url);
    return url.value_or("");
  }
  void SetNow(const char* rfc3339) {
    clock_.Advance(std::chrono::seconds(core::ParseRfc3339(rfc3339).value() - clock_.NowUnix()));
  }
  json Container(const std::string& instance_id) {
    return json::array({{{"instance_id", instance_id},
                         {"node_index", 0},
                         {"container_id", "c-" + instance_id},
                         {"state", "running"},
                         {"exit_code", 0},
                         {"started_at", "2027-01-15T08:00:01Z"},
                         {"finished_at", "0001-01-01T00:00:00Z"},
                         {"ssh_port", 40123},
                         {"ssh_ready", true},
                         {"restart_generation", 0},
                         {"error", ""}}});
  }
  /// What `who` reads of their own state through the API (stable across servers: no times
  /// relative to now, no per-server URLs).
  json Views(HttpClient& who) {
    json v;
    for (const char* path : {"/api/v1/ssh-keys", "/api/v1/billing/invoices",
                             "/api/v1/usage/sessions", "/api/v1/team", "/api/v1/instances"}) {
      auto r = who.Get(path);
      v[path] = r.status == 200 ? r.Json() : json{{"status", r.status}, {"body", r.body}};
    }
    return v;
  }

  PostgresServer* postgres_ = nullptr;
  std::vector<std::string> databases_;
  std::unique_ptr<app::ServerApp> copy_;
};

TEST_F(CopyDatabaseTest, AServerOnTheCopyAnswersWhatTheSqliteServerDid) {
  // Filled through the product's own paths. The fixture's clock starts at 2027-01-15T08:00:00Z.
  Person alice = NewPerson("alice@example.test");
  const std::string team_name = "Lab One";
  Person carol = NewPerson("carol@example.test");
  auto team = carol.browser->PostJson("/api/v1/team", {{"name", team_name}});
  ASSERT_EQ(team.status, 201) << team.body;
  Person bob = NewPerson("bob@example.test");
  AddHost("spark-a");
  AddHost("spark-b");
  auto alpha = Create(alice, "alpha");
  ASSERT_EQ(alpha.status, 201) << alpha.body;
  const std::string alpha_id = alpha.Json()["id"];
  for (int i = 0; i < 366; ++i) {  // 61 minutes of reports, then a delete
    clock_.Advance(std::chrono::seconds(10));
    ASSERT_EQ(Sync("spark-a", Container(alpha_id)).status, 200);
  }
  ASSERT_EQ(alice.browser->Send("DELETE", "/api/v1/instances/" + alpha_id, "", {}).status, 204);
  SetNow("2027-02-01T00:00:05Z");
  auto closed = op_->PostJson("/api/v1/admin/invoices/close", {{"month", "2027-01"}});
  ASSERT_EQ(closed.status, 200) << closed.body;
  ASSERT_EQ(closed.Json()["invoices_created"], 1) << closed.body;
  // A live instance with an open billing session (its host heard from again first).
  ASSERT_EQ(Sync("spark-b").status, 200);
  auto beta = Create(bob, "beta");
  ASSERT_EQ(beta.status, 201) << beta.body;
  ASSERT_EQ(Sync("spark-b", Container(beta.Json()["id"])).status, 200);
  // Odd text and a 64-bit amount the API cannot make: control bytes (no NUL) and an emoji in an
  // audit event,
  // a price in minor units past 2^53.
  const int64_t huge = (int64_t{1} << 62) + 7;
  const std::string odd = "ctl \x01\x1b[31m\x7f \xF0\x9F\x9A\x80 end";
  ASSERT_TRUE(app_->database().Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_TRY(
        tx.Exec("INSERT INTO audit_events (id, at, actor_id, action, target, source_address, "
                "detail) VALUES ('aud_odd', 1, NULL, 'test.odd', 'per_odd', '127.0.0.1', ?)",
                {odd}));
    GPUWERK_TRY(
        tx.Exec("UPDATE gpu_types SET price_minor_per_hour = ? WHERE name = 'spark-2x'", {huge}));
    return {};
  }));

  const json alice_before = Views(*alice.browser);
  const json bob_before = Views(*bob.browser);
  const json carol_before = Views(*carol.browser);
  const json types_before = alice.browser->Get("/api/v1/gpu-types").Json();
  const json audit_before = op_->Get("/api/v1/admin/audit").Json();
  const json alpha_audit_before = op_->Get("/api/v1/admin/audit?target=" + alpha_id).Json();
  ASSERT_GE(alpha_audit_before["items"].size(), 2u) << alpha_audit_before.dump();
  ASSERT_EQ(alice_before["/api/v1/billing/invoices"]["items"].size(), 1u);
  const json invoice = alice_before["/api/v1/billing/invoices"]["items"][0];
  EXPECT_EQ(invoice["total_minor"], 66);  // 65 an hour × 61 minutes

  // Refused while the SQLite store's server runs: its data directory is locked.
  const std::string target = NewDatabase();
  ASSERT_FALSE(target.empty());
  std::ostringstream out;
  auto live = app::CopyDatabaseCommand(config_.data_dir.string(), target, out);
  ASSERT_FALSE(live);
  EXPECT_EQ(live.error().api_code, "data_dir_in_use") << live.error().message;

  // Stopped: the copy, by the command operators run.
  app_->Stop();
  app_.reset();
  auto copied = RunCommand(dir_.path(), GpuwerkBinary() + " admin copy-database --from '" +
                                            config_.data_dir.string() + "' --to '" + target + "'");
  ASSERT_EQ(copied.exit_code, 0) << copied.out << copied.err;
  EXPECT_NE(copied.out.find("schema version " + std::to_string(store::LatestSchemaVersion())),
            std::string::npos)
      << copied.out;
  EXPECT_NE(copied.out.find("invoice_lines"), std::string::npos) << copied.out;
  EXPECT_NE(copied.out.find("total"), std::string::npos) << copied.out;

  // Copying again into the now full target is refused, naming what it holds.
  auto again = app::CopyDatabaseCommand(config_.data_dir.string(), target, out);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().api_code, "target_not_empty");
  EXPECT_NE(again.error().message.find("persons"), std::string::npos) << again.error().message;

  // A server on the copy: the same password signs in, and everyone reads the same.
  app::ServerConfig on_copy = config_;
  on_copy.data_dir = dir_.path() / "data-on-postgresql";
  on_copy.database = target;
  auto started = app::ServerApp::Start(on_copy, clock_, rng_);
  ASSERT_TRUE(started) << started.error().message;
  copy_ = std::move(*started);
  auto sign_in = [&](const std::string& email, const std::string& password) {
    auto browser = std::make_unique<HttpClient>(copy_->base_url());
    auto login =
        browser->PostJson("/api/v1/auth/login", {{"email", email}, {"password", password}});
    EXPECT_EQ(login.status, 200) << email << " " << login.body;
    return browser;
  };
  auto alice_after = sign_in("alice@example.test", "correct horse battery");
  auto bob_after = sign_in("bob@example.test", "correct horse battery");
  auto op_after = sign_in("op@example.test", "operator password 1");
  ExpectProblem(std::make_unique<HttpClient>(copy_->base_url())
                    ->PostJson("/api/v1/auth/login",
                               {{"email", "alice@example.test"}, {"password", "wrong password"}}),
                401, "invalid_credentials");
  EXPECT_EQ(Views(*alice_after), alice_before);
  EXPECT_EQ(Views(*bob_after), bob_before);
  EXPECT_EQ(alice_after->Get("/api/v1/gpu-types").Json(), types_before);
  const json invoice_after = Views(*alice_after)["/api/v1/billing/invoices"]["items"][0];
  EXPECT_EQ(invoice_after["total_minor"], invoice["total_minor"]);
  EXPECT_EQ(invoice_after["lines"], invoice["lines"]);
  auto carol_after = sign_in("carol@example.test", "correct horse battery");
  EXPECT_EQ(Views(*carol_after), carol_before);
  EXPECT_EQ(Views(*carol_after)["/api/v1/team"]["name"], team_name);
  // The audit log: the same events, and the five sign-ins (one failed) made on the copy.
  EXPECT_EQ(op_after->Get("/api/v1/admin/audit?target=" + alpha_id).Json(), alpha_audit_before);
  const json audit_after = op_after->Get("/api/v1/admin/audit").Json();
  EXPECT_EQ(audit_after["total"], audit_before["total"].get<int64_t>() + 5);
  bool found_huge = false;
  const json types_after = alice_after->Get("/api/v1/gpu-types").Json();
  for (const auto& t : types_after["items"]) {
    if (t["name"] == "spark-2x")
      found_huge = t.dump().find(std::to_string(huge)) != std::string::npos;
  }
  EXPECT_TRUE(found_huge) << types_before.dump();
  auto odd_after = copy_->database().Read([](store::Transaction& tx) -> core::Result<std::string> {
    GPUWERK_ASSIGN_OR_RETURN(auto row,
                             tx.QueryOne("SELECT detail FROM audit_events WHERE id = 'aud_odd'"));
    if (!row) return std::string("(missing)");
    return row->Text("detail");
  });
  ASSERT_TRUE(odd_after) << odd_after.error().message;
  EXPECT_EQ(*odd_after, odd);
  // The copy works on: bob's live instance deletes, ending its billing session.
  const std::string beta_id = beta.Json()["id"];
  EXPECT_EQ(bob_after->Send("DELETE", "/api/v1/instances/" + beta_id, "", {}).status, 204);
}

TEST_F(CopyDatabaseTest, RefusesASourceNewerThanThisGpuwerk) {
  ASSERT_TRUE(app_->database().Write([](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_TRY(tx.Exec("INSERT INTO schema_migrations (version, applied_at) VALUES (?, 1)",
                        {int64_t{store::LatestSchemaVersion() + 1}}));
    return {};
  }));
  app_->Stop();
  app_.reset();
  const std::string target = NewDatabase();
  auto refused = RunCommand(dir_.path(), GpuwerkBinary() + " admin copy-database --from '" +
                                             config_.data_dir.string() + "' --to '" + target + "'");
  EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("newer"), std::string::npos) << refused.err;
  // Nothing was made in the target.
  auto db = store::OpenDatabase(target, "");
  ASSERT_TRUE(db) << db.error().message;
  auto version = store::SchemaVersion(**db);
  ASSERT_TRUE(version) << version.error().message;
  EXPECT_EQ(*version, 0);
}

}  // namespace
}  // namespace gpuwerk::testing
