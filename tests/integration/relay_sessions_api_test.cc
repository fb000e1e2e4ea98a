// Relay session records over real HTTP: the lists for an instance's owner and for
// operators, a remote relay's reports (idempotent PUTs, the restart announcement), the
// HttpRelaySessionLog's retries while the server is away, a real Relay with the HTTP authorizer
// and log in front of a real sshd (and deletion ending its relay session within about a second),
// key identity through the store's authorizer (a bare login lands nowhere; the relay session names
// the person who authenticated), and the CLI verbs.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "access/relay_session_records.h"
#include "app/store_relay_access.h"
#include "core/strings.h"
#include "protocol/relay_routing.h"
#include "relay/http_relay_authorizer.h"
#include "relay/http_relay_session_log.h"
#include "relay/http_relay_watch.h"
#include "relay/in_memory_relay_session_log.h"
#include "relay/relay.h"
#include "relay/ssh_key_file.h"
#include "tests/integration/relay_fixture.h"
#include "tests/support/child_process.h"
#include "tests/support/eventually.h"
#include "tests/support/run_command.h"
#include "tests/support/ssh_keygen.h"
#include "tests/support/test_sshd.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class RelaySessionsApiTest : public RelayServerTest {
 protected:
  void Customize(app::ServerConfig& config) override {
    // A fixed port, so that the server can be stopped and started again at the same address.
    port_ = FreePort();
    config.listen = "127.0.0.1:" + std::to_string(port_);
  }
  void SetUp() override {
    ServerTest::SetUp();
    if (HasFatalFailure()) return;
    SignInOperator();
    if (HasFatalFailure()) return;
    op_token_ = OperatorToken();
    // The relay's own credential (docs/ssh.md "The relay's API credential"): it names the relay.
    relay_token_ = RegisterRelay("edge-1");
    relay_client_ = Browser();
    relay_client_->SetBearer(relay_token_);
    SignUpAliceWithKey();
    if (HasFatalFailure()) return;
    auto me = alice_->Get("/api/v1/me");
    alice_id_ = me.Json()["id"].get<std::string>();
    bob_ = Browser();
    SignUp(*bob_, "bob@example.test");
    host_token_ = AddHeardHost("spark-a");
  }

  /// A client that calls as relay `name` (registered here).
  std::unique_ptr<HttpClient> RelayClient(const std::string& name) {
    auto client = Browser();
    client->SetBearer(RegisterRelay(name));
    return client;
  }
  /// AddHost(name, ssh), then one Sync: the host is heard from and takes instances.
  std::string AddHeardHost(const std::string& name, bool ssh = true) {
    std::string token = AddHost(name, ssh);
    EXPECT_EQ(Sync(token).status, 200);
    return token;
  }
  /// PUT /api/v1/admin/hosts/{name}/ssh as the operator.
  HttpResult SetSsh(const std::string& name, const json& body) {
    return op_->Send("PUT", "/api/v1/admin/hosts/" + name + "/ssh", body.dump(),
                     {"Content-Type: application/json"});
  }
  /// Counts audit events of `action` (straight from the store: there is no audit route yet).
  int64_t AuditCount(const std::string& action) {
    auto n = app_->database().Read([&](store::Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(
          auto row,
          tx.QueryOne("SELECT COUNT(*) AS n FROM audit_events WHERE action = ?", {action}));
      return row->Int("n");
    });
    return n ? *n : -1;
  }
  /// Every `relay_session.refused` and `relay.host_key_mismatch` audit event, straight from the
  /// store (the audit route's pages could hold events of the same second in any order): {action,
  /// actor_id, target, source_address, detail}.
  json RefusalAuditEvents() {
    auto events = app_->database().Read([&](store::Transaction& tx) -> core::Result<json> {
      GPUWERK_ASSIGN_OR_RETURN(
          auto rows, tx.Query("SELECT action, actor_id, target, source_address, detail FROM "
                              "audit_events WHERE action IN ('relay_session.refused', "
                              "'relay.host_key_mismatch')"));
      json out = json::array();
      for (const auto& row : rows) {
        out.push_back({{"action", row.Text("action")},
                       {"actor_id", row.Text("actor_id")},
                       {"target", row.Text("target")},
                       {"source_address", row.Text("source_address")},
                       {"detail", json::parse(row.Text("detail"))}});
      }
      return out;
    });
    EXPECT_TRUE(events) << events.error().message;
    return events ? *events : json::array();
  }
  /// `ssh -p PORT -i KEY USER@127.0.0.1 COMMAND` with the stock client, through a relay.
  CommandResult SshThrough(uint16_t relay_port, const GeneratedKey& key, const std::string& user,
                           const std::string& command) {
    return RunCommand(dir_.path(), SshVia(relay_port, key, user) + " '" + command + "'");
  }
  /// RunningContainer() of container `container_id` whose agent read its sshd's host key
  /// `key_line`.
  static json ContainerWithKey(const std::string& id, uint16_t ssh_port,
                               const std::string& container_id, const std::string& key_line) {
    json c = RunningContainer(id, ssh_port, container_id);
    if (!key_line.empty()) c["ssh_host_key"] = key_line;
    return c;
  }
  /// Alice's instance `name`, running with its sshd on `ssh_port`.
  json RunningInstance(const std::string& name, uint16_t ssh_port = 40001) {
    auto created =
        alice_->PostJson("/api/v1/instances",
                         {{"name", name}, {"ssh_key_id", alice_key_id_}, {"gpu_type", "spark-1x"}});
    EXPECT_EQ(created.status, 201) << created.body;
    const json in = created.Json();
    EXPECT_EQ(
        Sync(host_token_, json::array({RunningContainer(in["id"].get<std::string>(), ssh_port)}))
            .status,
        200);
    return alice_->Get("/api/v1/instances/" + in["id"].get<std::string>()).Json();
  }
  /// A report body as a remote relay sends it.
  json Report(const std::string& instance_id, const std::string& started,
              const json& ended = nullptr, const std::string& relay = "edge-1") {
    return {{"relay", relay},
            {"person_id", alice_id_},
            {"key_fingerprint", alice_fp_},
            {"instance_id", instance_id},
            {"hostname", "alpha-xxxxx"},
            {"login", "root"},
            {"source_address", "203.0.113.7"},
            {"started_at", started},
            {"ended_at", ended},
            {"bytes_from_client", ended.is_null() ? 0 : 100},
            {"bytes_to_client", ended.is_null() ? 0 : 2000},
            {"end_reason", ended.is_null() ? "" : "client closed"}};
  }
  HttpResult Put(const std::string& id, const json& body) { return Put(*relay_client_, id, body); }
  /// PUT /api/v1/relay/sessions/{id} as the relay (or whoever) `as` calls as.
  static HttpResult Put(HttpClient& as, const std::string& id, const json& body) {
    return as.Send("PUT", "/api/v1/relay/sessions/" + id, body.dump(),
                   {"Content-Type: application/json"});
  }
  /// Stops the server and starts it again on the same port and data directory.
  void StopServer() {
    app_->Stop();
    app_.reset();
  }
  void StartServer() {
    auto app = app::ServerApp::Start(config_, clock_, rng_);
    ASSERT_TRUE(app) << app.error().message;
    app_ = std::move(*app);
  }

  uint16_t port_ = 0;
  std::unique_ptr<HttpClient> relay_client_, bob_;
  std::string op_token_, relay_token_, alice_id_, host_token_;
};

TEST_F(RelaySessionsApiTest, OwnerAndOperatorListRelaySessionsNewestFirstInPages) {
  const json in = RunningInstance("alpha");
  const std::string id = in["id"];
  // 17 ended relay sessions and one open one, as a remote relay reports them.
  for (int i = 0; i < 17; ++i) {
    char started[32], ended[32];
    std::snprintf(started, sizeof started, "2027-01-14T10:%02d:00Z", i);
    std::snprintf(ended, sizeof ended, "2027-01-14T10:%02d:30Z", i);
    ASSERT_EQ(Put("rls_t" + std::to_string(100 + i), Report(id, started, ended)).status, 200);
  }
  ASSERT_EQ(Put("rls_open", Report(id, "2027-01-14T11:00:00Z")).status, 200);

  auto page1 = alice_->Get("/api/v1/instances/" + id + "/relay-sessions");
  ASSERT_EQ(page1.status, 200) << page1.body;
  const json p1 = page1.Json();
  EXPECT_EQ(p1["total"], 18);
  EXPECT_EQ(p1["pages"], 2);
  EXPECT_EQ(p1["page"], 1);
  ASSERT_EQ(p1["items"].size(), 15u);
  const json& open = p1["items"][0];
  EXPECT_EQ(open["id"], "rls_open");
  EXPECT_EQ(open["open"], true);
  EXPECT_TRUE(open["ended_at"].is_null());
  EXPECT_EQ(open["relay"], "edge-1");
  EXPECT_FALSE(open.contains("email"));  // the owner's view
  const json& newest_ended = p1["items"][1];
  EXPECT_EQ(newest_ended["id"], "rls_t116");
  EXPECT_EQ(newest_ended["started_at"], "2027-01-14T10:16:00Z");
  EXPECT_EQ(newest_ended["ended_at"], "2027-01-14T10:16:30Z");
  EXPECT_EQ(newest_ended["duration_seconds"], 30);
  EXPECT_EQ(newest_ended["bytes_from_client"], 100);
  EXPECT_EQ(newest_ended["bytes_to_client"], 2000);
  EXPECT_EQ(newest_ended["end_reason"], "client closed");
  EXPECT_EQ(newest_ended["open"], false);
  EXPECT_EQ(newest_ended["key_fingerprint"], alice_fp_);
  EXPECT_EQ(newest_ended["source_address"], "203.0.113.7");
  EXPECT_EQ(newest_ended["person_id"], alice_id_);
  auto p2 = alice_->Get("/api/v1/instances/" + id + "/relay-sessions?page=2").Json();
  ASSERT_EQ(p2["items"].size(), 3u);
  EXPECT_EQ(p2["items"][2]["id"], "rls_t100");
  // By live name too.
  EXPECT_EQ(alice_->Get("/api/v1/instances/alpha/relay-sessions").Json()["total"], 18);
  ExpectProblem(alice_->Get("/api/v1/instances/" + id + "/relay-sessions?page=0"), 400,
                "invalid_page");

  // Another person: 404 as for every instance route; no admin list.
  ExpectProblem(bob_->Get("/api/v1/instances/" + id + "/relay-sessions"), 404, "not_found");
  ExpectProblem(bob_->Get("/api/v1/instances/alpha/relay-sessions"), 404, "not_found");
  ExpectProblem(bob_->Get("/api/v1/admin/relay-sessions"), 403, "forbidden");
  ExpectProblem(alice_->Get("/api/v1/admin/relay-sessions"), 403, "forbidden");
  auto anonymous = Browser();
  ExpectProblem(anonymous->Get("/api/v1/admin/relay-sessions"), 401, "unauthenticated");

  // The operator sees everyone's, with the email, filtered by instance or person.
  auto all = op_->Get("/api/v1/admin/relay-sessions").Json();
  EXPECT_EQ(all["total"], 18);
  EXPECT_EQ(all["items"][0]["email"], "alice@example.test");
  EXPECT_EQ(
      op_->Get("/api/v1/admin/relay-sessions?instance_id=" + id + "&page=2").Json()["items"].size(),
      3u);
  EXPECT_EQ(op_->Get("/api/v1/admin/relay-sessions?instance_id=ins_other").Json()["total"], 0);
  EXPECT_EQ(op_->Get("/api/v1/admin/relay-sessions?person_id=" + alice_id_).Json()["total"], 18);
  EXPECT_EQ(op_->Get("/api/v1/admin/relay-sessions?person_id=per_nobody").Json()["total"], 0);

  // A deleted instance's history stays listed for its owner, by id.
  EXPECT_EQ(alice_->Delete("/api/v1/instances/" + id).status, 204);
  Sync(host_token_);  // its container is gone: finally deleted
  ExpectProblem(alice_->Get("/api/v1/instances/" + id), 404, "not_found");
  auto history = alice_->Get("/api/v1/instances/" + id + "/relay-sessions");
  ASSERT_EQ(history.status, 200) << history.body;
  EXPECT_EQ(history.Json()["total"], 18);
  ExpectProblem(bob_->Get("/api/v1/instances/" + id + "/relay-sessions"), 404, "not_found");
}

TEST_F(RelaySessionsApiTest, RemoteRelayReportsAreIdempotentAndCheckedAndARestartClosesOpenRows) {
  const json in = RunningInstance("alpha");
  const std::string id = in["id"];
  auto first = Put("rls_a1", Report(id, "2027-01-14T10:00:00Z"));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.Json()["recorded"], true);
  EXPECT_EQ(Put("rls_a1", Report(id, "2027-01-14T10:00:00Z")).Json()["recorded"], false);
  auto end = Put("rls_a1", Report(id, "2027-01-14T10:00:00Z", "2027-01-14T10:05:00Z"));
  EXPECT_EQ(end.Json()["recorded"], true) << end.body;
  EXPECT_EQ(
      Put("rls_a1", Report(id, "2027-01-14T10:00:00Z", "2027-01-14T10:09:00Z")).Json()["recorded"],
      false);  // the first end is final
  auto list = alice_->Get("/api/v1/instances/" + id + "/relay-sessions").Json();
  ASSERT_EQ(list["total"], 1);
  EXPECT_EQ(list["items"][0]["ended_at"], "2027-01-14T10:05:00Z");

  // Refusals change nothing. Another relay (its own credential) cannot take over a row.
  auto edge2 = RelayClient("edge-2");
  ExpectProblem(Put(*edge2, "rls_a1", Report(id, "2027-01-14T10:00:00Z", nullptr, "edge-2")), 409,
                "relay_session_conflict");
  // A relay reports under its credential's name only: not another's, not gpuwerk up's.
  ExpectProblem(Put("rls_x", Report(id, "2027-01-14T10:00:00Z", nullptr, "edge-2")), 403,
                "relay_name_mismatch");
  ExpectProblem(Put("rls_x", Report(id, "2027-01-14T10:00:00Z", nullptr, "local")), 403,
                "relay_name_mismatch");
  ExpectProblem(Put("rls_x", Report(id, "yesterday")), 400, "invalid_field");
  ExpectProblem(Put("rls_x", Report(id, "2027-01-14T10:00:00Z", "2027-01-14T09:00:00Z")), 400,
                "invalid_field");
  json no_person = Report(id, "2027-01-14T10:00:00Z");
  no_person.erase("person_id");
  ExpectProblem(Put("rls_x", no_person), 400, "invalid_field");
  ExpectProblem(Put("bad%20id", Report(id, "2027-01-14T10:00:00Z")), 400, "invalid_relay_session");
  json bad_source = Report(id, "2027-01-14T10:00:00Z");
  bad_source["source_address"] = "not an ip<script>";
  ExpectProblem(Put("rls_x", bad_source), 400, "invalid_field");
  // Times past the server's clock (the fake clock starts 2027-01-15T08:00Z; 5 minutes of skew
  // are allowed).
  ExpectProblem(Put("rls_x", Report(id, "2099-01-01T00:00:00Z")), 400, "invalid_field");
  ExpectProblem(Put("rls_x", Report(id, "2027-01-14T10:00:00Z", "2099-01-01T00:00:00Z")), 400,
                "invalid_field");
  // A report cannot file a relay session under an instance of someone else, or none.
  json not_owner = Report(id, "2027-01-14T10:00:00Z");
  not_owner["person_id"] = "per_nobody";
  ExpectProblem(Put("rls_x", not_owner), 400, "invalid_field");
  ExpectProblem(Put("rls_x", Report("ins_missing", "2027-01-14T10:00:00Z")), 400, "invalid_field");
  HttpClient as_alice(app_->base_url());
  auto alice_token = alice_->PostJson("/api/v1/tokens", {{"name", "cli"}});
  as_alice.SetBearer(alice_token.Json()["token"].get<std::string>());
  ExpectProblem(Put(as_alice, "rls_x", Report(id, "2027-01-14T10:00:00Z")), 403,
                "relay_credential_required");
  ExpectProblem(as_alice.PostJson("/api/v1/relay/restarted", {{"relay", "edge-1"}}), 403,
                "relay_credential_required");
  EXPECT_EQ(alice_->Get("/api/v1/instances/" + id + "/relay-sessions").Json()["total"], 1);

  // edge-1 restarts: its open rows end as "relay restarted"; edge-2's stay open.
  ASSERT_EQ(Put("rls_b1", Report(id, "2027-01-14T11:00:00Z")).status, 200);
  ASSERT_EQ(Put("rls_b2", Report(id, "2027-01-14T11:01:00Z")).status, 200);
  json c1 = Report(id, "2027-01-14T11:02:00Z");
  c1.erase("relay");  // the credential names the relay
  ASSERT_EQ(Put(*edge2, "rls_c1", c1).status, 200);
  auto restarted = relay_client_->PostJson("/api/v1/relay/restarted", json::object());
  ASSERT_EQ(restarted.status, 200) << restarted.body;
  EXPECT_EQ(restarted.Json()["relay"], "edge-1");
  EXPECT_EQ(restarted.Json()["closed"], 2);
  EXPECT_EQ(
      relay_client_->PostJson("/api/v1/relay/restarted", {{"relay", "edge-1"}}).Json()["closed"],
      0);
  ExpectProblem(relay_client_->PostJson("/api/v1/relay/restarted", {{"relay", "edge-2"}}), 403,
                "relay_name_mismatch");
  ExpectProblem(relay_client_->PostJson("/api/v1/relay/restarted", {{"relay", "local"}}), 403,
                "relay_name_mismatch");
  const json listed = op_->Get("/api/v1/admin/relay-sessions").Json();
  for (const auto& row : listed["items"]) {
    if (row["id"] == "rls_b1" || row["id"] == "rls_b2") {
      EXPECT_EQ(row["open"], false) << row;
      EXPECT_EQ(row["end_reason"], "relay restarted") << row;
    }
    if (row["id"] == "rls_c1") {
      EXPECT_EQ(row["open"], true) << row;
    }
  }
  // The audit log has the start and end once each, and the restart.
  auto& db = app_->database();
  auto count = [&](const std::string& action) {
    return db
        .Read([&](store::Transaction& tx) -> core::Result<int64_t> {
          GPUWERK_ASSIGN_OR_RETURN(
              auto row,
              tx.QueryOne("SELECT COUNT(*) FROM audit_events WHERE action = ?", {action}));
          return row->Int(0);
        })
        .value_or(-1);
  };
  EXPECT_EQ(count("relay_session.start"), 4);  // a1, b1, b2, c1
  EXPECT_EQ(count("relay_session.end"), 1);
  EXPECT_EQ(count("relay.restarted"), 1);
}

TEST_F(RelaySessionsApiTest, RemoteRelayReportTextIsKeptEscapedAndBounded) {
  // A relay's free text is outside text to the server: a forged line, an ESC sequence, a
  // direction override and 1,000 bytes go into the row and the audit details escaped and cut
  // (core::BoundedPrintable, docs/ssh.md "Outside text").
  const json in = RunningInstance("alpha");
  const std::string id = in["id"];
  for (const json& ended : {json(nullptr), json("2027-01-14T10:00:30Z")}) {  // start, then end
    json report = Report(id, "2027-01-14T10:00:00Z", ended);
    report["hostname"] = "alpha-xxxxx\n2026-12-01T00:00:00.000Z critical FORGED";
    report["login"] = "root\x1b[2J";
    report["key_fingerprint"] = "SHA256:\u202eabc";
    if (!ended.is_null()) report["end_reason"] = std::string(1000, 'r');
    ASSERT_EQ(Put("rls_text", report).status, 200);
  }

  const json row = op_->Get("/api/v1/admin/relay-sessions").Json()["items"][0];
  EXPECT_EQ(row["hostname"], "alpha-xxxxx\\n2026-12-01T00:00:00.000Z critical FORGED");
  EXPECT_EQ(row["login"], "root\\x1b[2J");
  EXPECT_EQ(row["key_fingerprint"], "SHA256:\\u{202e}abc");
  EXPECT_EQ(row["end_reason"], std::string(core::kPrintableBytes, 'r') + "…[1000 bytes]");
  auto details = app_->database().Read([&](store::Transaction& tx) {
    return tx.Query("SELECT detail FROM audit_events WHERE action LIKE 'relay_session.%'");
  });
  ASSERT_TRUE(details) << details.error().message;
  ASSERT_EQ(details->size(), 2u);  // the start and the end
  for (const auto& d : *details) {
    const std::string text = d.Text(0);
    EXPECT_EQ(text.find("FORGED\n"), std::string::npos);
    for (const json& value : json::parse(text)) {
      if (!value.is_string()) continue;
      EXPECT_FALSE(core::HasUnsafeText(value.get<std::string>())) << text;
      EXPECT_LE(value.get<std::string>().size(), core::kPrintableBytes + 31) << text;
    }
  }
}

TEST_F(RelaySessionsApiTest, HttpRelaySessionLogRetriesWhileTheServerIsAwayAndAnnouncesFirst) {
  const json in = RunningInstance("alpha");
  const std::string id = in["id"];
  // Left open by edge-1's previous process.
  ASSERT_EQ(Put("rls_left_open", Report(id, "2027-01-14T09:00:00Z")).status, 200);
  StopServer();

  relay::HttpRelaySessionLog log({.server_url = "http://127.0.0.1:" + std::to_string(port_),
                                  .token = relay_token_,
                                  .request_timeout = 2s,
                                  .initial_backoff = 100ms,
                                  .max_backoff = 400ms});
  log.Start();
  relay::RelaySessionRecord a;
  a.id = "rls_new_a";
  a.person_id = alice_id_;
  a.key_fingerprint = alice_fp_;
  a.instance_id = id;
  a.hostname = in["hostname"].get<std::string>();
  a.login = "root";
  a.source_address = "198.51.100.1";
  a.started_at = std::chrono::system_clock::now();
  relay::RelaySessionRecord b = a;
  b.id = "rls_new_b";
  log.OnStart(a);
  log.OnStart(b);
  b.ended_at = b.started_at + 3s;
  b.bytes_from_client = 11;
  b.bytes_to_client = 22;
  b.end_reason = "client closed";
  log.OnEnd(b);  // replaces b's start, still queued
  std::this_thread::sleep_for(1s);
  auto stats = log.Stats();
  EXPECT_GE(stats.failed_attempts, 2u);
  EXPECT_EQ(stats.sent, 0u);
  EXPECT_EQ(stats.queued, 3u);  // the announcement, a's start, b's end
  EXPECT_FALSE(stats.announced);

  StartServer();
  ASSERT_TRUE(log.WaitUntilIdle(10s));
  stats = log.Stats();
  EXPECT_TRUE(stats.announced);
  EXPECT_EQ(stats.relay_name, "edge-1");  // the credential's name, as the server answered it
  EXPECT_EQ(stats.sent, 3u);
  EXPECT_EQ(stats.dropped, 0u);
  std::map<std::string, json> rows;
  const json all_rows = op_->Get("/api/v1/admin/relay-sessions").Json();
  for (const auto& row : all_rows["items"]) {
    rows[row["id"].get<std::string>()] = row;
  }
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows["rls_left_open"]["end_reason"], "relay restarted");
  EXPECT_EQ(rows["rls_new_a"]["open"], true);  // announced first, so not closed by it
  EXPECT_EQ(rows["rls_new_b"]["open"], false);
  EXPECT_EQ(rows["rls_new_b"]["bytes_to_client"], 22);
  EXPECT_EQ(rows["rls_new_b"]["relay"], "edge-1");
  EXPECT_EQ(rows["rls_new_b"]["duration_seconds"], 3);

  // Stop drains: an end queued just before Stop still arrives.
  a.ended_at = a.started_at + 5s;
  a.end_reason = "relay stopping";
  log.OnEnd(a);
  log.Stop();
  EXPECT_EQ(log.Stats().sent, 4u);
  auto a_row = op_->Get("/api/v1/admin/relay-sessions?instance_id=" + id).Json()["items"];
  bool found = false;
  for (const auto& row : a_row) {
    if (row["id"] == "rls_new_a") {
      found = true;
      EXPECT_EQ(row["end_reason"], "relay stopping");
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(RelaySessionsApiTest, HttpRelaySessionLogBoundsItsQueueAndGivesUpAtStop) {
  relay::HttpRelaySessionLog log({.server_url = "http://127.0.0.1:1",  // nothing listens
                                  .token = relay_token_,
                                  .request_timeout = 1s,
                                  .initial_backoff = 50ms,
                                  .max_backoff = 100ms,
                                  .max_queued = 5,
                                  .drain_timeout = 300ms});
  log.Start();
  for (int i = 0; i < 8; ++i) {
    relay::RelaySessionRecord r;
    r.id = "rls_q" + std::to_string(i);
    log.OnStart(r);
  }
  auto stats = log.Stats();
  EXPECT_EQ(stats.queued, 5u);  // the announcement is never the one dropped
  EXPECT_EQ(stats.dropped, 4u);
  const auto t0 = std::chrono::steady_clock::now();
  log.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  EXPECT_EQ(log.Stats().dropped, 9u);
  EXPECT_EQ(log.Stats().queued, 0u);
}

/// A remote relay's refusals become audit events on the server (docs/ssh.md "Refusals of a remote
/// relay"): grouped per minute by the relay, at most kMaxRefusalGroups groups a period (more are
/// only counted), through the relay credential alone, and rate-limited per relay.
TEST_F(RelaySessionsApiTest, RemoteRelayRefusalsBecomeBoundedAuditEvents) {
  const json in = RunningInstance("alpha");
  const std::string id = in["id"];
  relay::HttpRelaySessionLog log({.server_url = "http://127.0.0.1:" + std::to_string(port_),
                                  .token = relay_token_,
                                  .refusal_interval = 300ms});
  log.Start();
  relay::RelayRefusalRecord flood;
  flood.code = "not_authorized";
  flood.user = "root";
  flood.key_fingerprint = "SHA256:stranger";
  flood.source_address = "203.0.113.9";
  flood.at = std::chrono::system_clock::now();
  for (int i = 0; i < 5; ++i) log.OnRefused(flood);  // one group, count 5
  relay::RelayRefusalRecord mismatch;
  mismatch.code = "upstream_host_key_mismatch";
  mismatch.user = in["hostname"].get<std::string>();
  mismatch.key_fingerprint = alice_fp_;
  mismatch.person_id = alice_id_;
  mismatch.instance_id = id;
  mismatch.source_address = "198.51.100.1";
  mismatch.expected_host_key = "SHA256:old";
  mismatch.presented_host_key = "SHA256:new";
  log.OnRefused(mismatch);
  // 150 more kinds: 98 fit (100 groups a period), 52 are only counted.
  for (int i = 0; i < 150; ++i) {
    relay::RelayRefusalRecord r = flood;
    r.user = "user" + std::to_string(i);
    log.OnRefused(r);
  }
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (log.Stats().refusal_reports < 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(log.Stats().refusal_reports, 1u);
  EXPECT_EQ(log.Stats().refusals, 156u);
  EXPECT_EQ(log.Stats().refusals_dropped, 52u);
  EXPECT_EQ(AuditCount("relay_session.refused"), 100);
  EXPECT_EQ(AuditCount("relay.host_key_mismatch"), 1);
  EXPECT_EQ(AuditCount("relay_session.refusals_dropped"), 1);
  auto row = [&](const std::string& action, const std::string& where) {
    auto r = app_->database().Read([&](store::Transaction& tx) -> core::Result<json> {
      GPUWERK_ASSIGN_OR_RETURN(auto found,
                               tx.QueryOne("SELECT actor_id, target, source_address, detail FROM "
                                           "audit_events WHERE action = ? AND " +
                                               where,
                                           {action}));
      if (!found) return json();
      return json{{"actor_id", found->Text("actor_id")},
                  {"target", found->Text("target")},
                  {"source_address", found->Text("source_address")},
                  {"detail", json::parse(found->Text("detail"))}};
    });
    return r ? *r : json();
  };
  const json grouped = row("relay_session.refused", "detail LIKE '%\"user\":\"root\"%'");
  EXPECT_EQ(grouped["source_address"], "203.0.113.9") << grouped;
  EXPECT_EQ(grouped["actor_id"], "") << grouped;
  EXPECT_EQ(grouped["detail"]["count"], 5) << grouped;
  EXPECT_EQ(grouped["detail"]["code"], "not_authorized") << grouped;
  EXPECT_EQ(grouped["detail"]["relay"], "edge-1") << grouped;
  const json refused = row("relay_session.refused", "target = '" + id + "'");
  EXPECT_EQ(refused["actor_id"], alice_id_) << refused;
  EXPECT_EQ(refused["source_address"], "198.51.100.1") << refused;
  const json keys = row("relay.host_key_mismatch", "1 = 1");
  EXPECT_EQ(keys["detail"]["presented"], "SHA256:new") << keys;
  EXPECT_EQ(row("relay_session.refusals_dropped", "1 = 1")["detail"]["count"], 52);
  // What is gathered when the relay stops goes with the drain.
  log.OnRefused(flood);
  log.Stop();
  EXPECT_EQ(log.Stats().refusal_reports, 2u);
  EXPECT_EQ(AuditCount("relay_session.refused"), 101);

  // The relay credential alone opens the route.
  const json empty = {{"refusals", json::array()}, {"dropped", 0}};
  auto as_person = alice_->PostJson("/api/v1/relay/refusals", empty);
  EXPECT_TRUE(as_person.status == 401 || as_person.status == 403) << as_person.body;
  auto client = Browser();
  client->SetBearer(op_token_);
  auto as_operator = client->PostJson("/api/v1/relay/refusals", empty);
  EXPECT_TRUE(as_operator.status == 401 || as_operator.status == 403) << as_operator.body;
  // A source that is not an address is refused, nothing recorded.
  json bad = {{"refusals", json::array({{{"code", "not_authorized"},
                                         {"user", "root"},
                                         {"key_fingerprint", ""},
                                         {"person_id", ""},
                                         {"instance_id", ""},
                                         {"source_address", "-oProxyCommand=x"},
                                         {"expected_host_key", ""},
                                         {"presented_host_key", ""},
                                         {"count", 1},
                                         {"first_at", "2027-01-14T09:00:00Z"},
                                         {"last_at", "2027-01-14T09:00:00Z"}}})},
              {"dropped", 0}};
  ExpectProblem(relay_client_->PostJson("/api/v1/relay/refusals", bad), 400, "invalid_field");
  EXPECT_EQ(AuditCount("relay_session.refused"), 101);
  // Ten reports a minute per relay: two were sent above; the eleventh is refused.
  int accepted = 0;
  HttpResult last;
  for (int i = 0; i < 12; ++i) {
    last = relay_client_->PostJson("/api/v1/relay/refusals", empty);
    if (last.status != 200) break;
    ++accepted;
  }
  EXPECT_EQ(accepted, 8);
  ExpectProblem(last, 429, "rate_limited");
}

/// One refusal group as a relay reports it, with `fields` set over a plain refusal of `root`.
json RefusalGroup(const json& fields) {
  json g = {{"code", "not_authorized"},
            {"user", "root"},
            {"key_fingerprint", "SHA256:x"},
            {"person_id", ""},
            {"instance_id", ""},
            {"source_address", "203.0.113.9"},
            {"expected_host_key", ""},
            {"presented_host_key", ""},
            {"count", 1},
            {"first_at", "2027-01-14T09:00:00Z"},
            {"last_at", "2027-01-14T09:00:01Z"}};
  g.update(fields);
  return g;
}

/// Breaker finding (relay refusal reports): a relay credential named the operator as the actor of
/// a refusal and stored an instance id with ESC, a newline and U+202E as the target. The person and
/// instance a relay names are the actor and target only when the store has that instance as that
/// person's; otherwise the events name nobody and keep the claimed ids as bounded printable
/// details (docs/ssh.md "Refusals of a remote relay").
TEST_F(RelaySessionsApiTest, RefusalReportCannotNameAnyoneAsActorOrStoreRawControlText) {
  const json in = RunningInstance("alpha");
  const std::string id = in["id"];
  const std::string op_id = op_->Get("/api/v1/me").Json()["id"];
  const std::string forged_instance = "ins_\x1b[2J\x1b[31mFAKE\nroot@x:~# \u202e";
  json groups = json::array();
  // The operator, and an instance id that is no instance at all.
  groups.push_back(RefusalGroup({{"code", "upstream_host_key_mismatch"},
                                 {"person_id", op_id},
                                 {"instance_id", forged_instance},
                                 {"expected_host_key", "\x1b]0;pwned\x07"},
                                 {"presented_host_key", std::string(512, 'x')},
                                 {"source_address", "203.0.113.1"}}));
  // The operator, and alice's instance: not the operator's.
  groups.push_back(RefusalGroup({{"code", "upstream_unreachable"},
                                 {"person_id", op_id},
                                 {"instance_id", id},
                                 {"source_address", "203.0.113.2"}}));
  // A person the store does not know.
  groups.push_back(RefusalGroup({{"code", "upstream_unreachable"},
                                 {"person_id", "per_nobody"},
                                 {"instance_id", id},
                                 {"source_address", "203.0.113.3"}}));
  // Alice and her own instance: what a relay really reports.
  groups.push_back(RefusalGroup({{"code", "upstream_unreachable"},
                                 {"person_id", alice_id_},
                                 {"instance_id", id},
                                 {"source_address", "203.0.113.4"}}));
  const json report = {{"refusals", groups}, {"dropped", 0}};
  auto posted = relay_client_->PostJson("/api/v1/relay/refusals", report);
  ASSERT_EQ(posted.status, 200) << posted.body;
  EXPECT_EQ(posted.Json()["recorded"], 4);

  std::map<std::string, std::vector<json>> by_source;
  for (const json& e : RefusalAuditEvents()) {
    by_source[e["source_address"].get<std::string>()].push_back(e);
    // Nothing a relay sent is stored raw: no control, direction or zero-width character anywhere.
    std::function<void(const json&)> check = [&](const json& v) {
      if (v.is_string()) {
        EXPECT_FALSE(core::HasUnsafeText(v.get<std::string>())) << core::BoundedPrintable(e.dump());
        EXPECT_LE(v.get<std::string>().size(), core::kPrintableBytes + 31);
      }
      if (v.is_structured()) {
        for (const json& child : v) check(child);
      }
    };
    check(e);
  }
  ASSERT_EQ(by_source["203.0.113.1"].size(), 2u);  // refused + host key mismatch
  for (const json& e : by_source["203.0.113.1"]) {
    EXPECT_EQ(e["actor_id"], "") << e;
    EXPECT_EQ(e["target"], "") << e;
    EXPECT_EQ(e["detail"]["claimed_person_id"], op_id) << e;
    EXPECT_EQ(e["detail"]["claimed_instance_id"], core::BoundedPrintable(forged_instance)) << e;
  }
  for (const char* source : {"203.0.113.2", "203.0.113.3"}) {
    ASSERT_EQ(by_source[source].size(), 1u) << source;
    const json& e = by_source[source][0];
    EXPECT_EQ(e["actor_id"], "") << e;
    EXPECT_EQ(e["target"], "") << e;
    EXPECT_EQ(e["detail"]["claimed_instance_id"], id) << e;
  }
  ASSERT_EQ(by_source["203.0.113.4"].size(), 1u);
  EXPECT_EQ(by_source["203.0.113.4"][0]["actor_id"], alice_id_);
  EXPECT_EQ(by_source["203.0.113.4"][0]["target"], id);
  EXPECT_FALSE(by_source["203.0.113.4"][0]["detail"].contains("claimed_person_id"));
  // Nothing a relay reported names the operator.
  for (const json& e : RefusalAuditEvents()) EXPECT_NE(e["actor_id"], op_id) << e;

  // A user name that is not in the relay's escaped form is refused, and nothing is recorded.
  const int64_t before = AuditCount("relay_session.refused");
  ExpectProblem(relay_client_->PostJson(
                    "/api/v1/relay/refusals",
                    {{"refusals", json::array({RefusalGroup({{"user", "ro\x1b[31mot\n\r"}})})},
                     {"dropped", 0}}),
                400, "invalid_field");
  EXPECT_EQ(AuditCount("relay_session.refused"), before);
}

/// Breaker finding (relay refusal reports): a refused user name was escaped twice in a relay's
/// audit details, by the relay and again by the server ("x\\\\x1b[31mEVIL"). It is escaped once,
/// by the relay (docs/ssh.md "Outside text"), and the server keeps that form.
TEST_F(RelaySessionsApiTest, RefusedUserNameIsEscapedOnceInTheAuditDetails) {
  relay::HttpRelaySessionLog log({.server_url = "http://127.0.0.1:" + std::to_string(port_),
                                  .token = relay_token_,
                                  .refusal_interval = 100ms});
  log.Start();
  const std::string raw = "x\x1b[31mEVIL\"\\ \u202e";
  relay::RelayRefusalRecord r;
  r.code = "not_authorized";
  r.user = core::BoundedPrintable(raw);  // as the relay writes it (internal/client_login.cc)
  r.key_fingerprint = "SHA256:stranger";
  r.source_address = "203.0.113.9";
  r.at = std::chrono::system_clock::now();
  log.OnRefused(r);
  ASSERT_TRUE(Eventually([&] { return AuditCount("relay_session.refused") == 1; }, 10s));
  log.Stop();
  // The in-process relay's refusals take the same path (access::RecordRelayRefusal).
  app::AuditRelaySessionLog in_process(app_->database(), app_->clock(), app_->rng());
  r.source_address = "203.0.113.10";
  in_process.OnRefused(r);
  const json items = RefusalAuditEvents();
  for (const char* source : {"203.0.113.9", "203.0.113.10"}) {
    const auto refused = std::find_if(items.begin(), items.end(), [&](const json& e) {
      return e["action"] == "relay_session.refused" && e["source_address"] == source;
    });
    ASSERT_NE(refused, items.end()) << source << " " << items;
    EXPECT_EQ((*refused)["detail"]["user"], "x\\x1b[31mEVIL\\\"\\\\ \\u{202e}") << *refused;
  }
}

/// A RelayAuthorizer that counts the logins it is asked about and passes them on.
class CountingAuthorizer final : public relay::RelayAuthorizer {
 public:
  explicit CountingAuthorizer(relay::RelayAuthorizer& inner) : inner_(inner) {}
  core::Result<relay::AuthorizeDecision> Authorize(const relay::AuthorizeRequest& r) override {
    ++calls;
    return inner_.Authorize(r);
  }
  std::atomic<int> calls{0};

 private:
  relay::RelayAuthorizer& inner_;
};

/// Breaker finding (relay refusal reports): a 60,000-byte SSH user name was logged as
/// `authorizer_unavailable`: the relay passed it on, and the server refused the authorize request
/// (its fields are bounded), which the relay reads as a failing authorizer. The relay refuses a
/// name longer than any instance's itself, as bad input (`invalid_relay_user`), without asking
/// the control plane (docs/ssh.md "Refusals").
TEST_F(RelaySessionsApiTest, OverlongUserNameIsRefusedAtTheRelayAsBadInput) {
  relay::HttpRelayAuthorizer http(app_->base_url(), relay_token_);
  CountingAuthorizer authorizer(http);
  relay::InMemoryRelaySessionLog log;
  auto relay = relay::Relay::Start(LocalRelayOptions(), authorizer, log);
  ASSERT_TRUE(relay) << relay.error().message;
  size_t refused = 0;
  for (const size_t length : {size_t{60'000}, protocol::kMaxRelayUserBytes + 1}) {
    const std::string user(length, 'q');
    auto r = SshThrough((*relay)->port(), alice_key_, user, "true");
    EXPECT_EQ(r.exit_code, 255);
    EXPECT_NE(r.err.find("the SSH user name is too long (" + std::to_string(length) +
                         " bytes; at most 128): use the instance's hostname"),
              std::string::npos)
        << core::BoundedPrintable(r.err, 2000);
    ASSERT_TRUE(Eventually([&] { return log.Refused().size() == refused + 1; }, 10s));
    ++refused;
    const relay::RelayRefusalRecord record = log.Refused().back();
    EXPECT_EQ(record.code, "invalid_relay_user");
    EXPECT_EQ(record.user, core::BoundedPrintable(user));
    EXPECT_EQ(record.key_fingerprint, alice_fp_);
  }
  EXPECT_EQ(authorizer.calls.load(), 0);
  // A name of the longest length still goes to the control plane, which refuses it.
  auto r = SshThrough((*relay)->port(), alice_key_, std::string(protocol::kMaxRelayUserBytes, 'q'),
                      "true");
  EXPECT_EQ(r.exit_code, 255);
  ASSERT_TRUE(Eventually([&] { return log.Refused().size() == refused + 1; }, 10s));
  EXPECT_EQ(log.Refused().back().code, "not_authorized");
  EXPECT_EQ(authorizer.calls.load(), 1);
  (*relay)->Stop();
}

/// A real relay in front of a real sshd, asking this server over HTTP (as `gpuwerk relay` does).
TEST_F(RelaySessionsApiTest, RemoteRelayRecordsItsRelaySessionsAndDeletionEndsThemFast) {
  const auto relay_ca = RelayCa();
  ASSERT_TRUE(relay_ca) << relay_ca.error().message;
  Sshd sshd(dir_.path() / "instance", "");
  const json in = RunningInstance("alpha", sshd.port());
  ASSERT_EQ(in["status"], "running") << in;
  const std::string id = in["id"];
  sshd.SetAuthorizedKeys(RelayCaLines(relay_ca->public_line, {id}));
  const std::string hostname = in["hostname"];

  relay::HttpRelayAuthorizer authorizer(app_->base_url(), relay_token_);
  relay::HttpRelaySessionLog log({.server_url = app_->base_url(), .token = relay_token_});
  log.Start();
  relay::RelayOptions options = LocalRelayOptions();
  options.recheck_interval = 1s;  // the backstop alone (no watch stream here)
  auto relay = relay::Relay::Start(options, authorizer, log);
  ASSERT_TRUE(relay) << relay.error().message;
  const std::string ssh = SshVia((*relay)->port(), alice_key_, hostname);

  auto r = RunCommand(dir_.path(), ssh + " 'cat; echo done; exit 3'", "0123456789");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.out, "0123456789done\n");
  // The relay ends its side after the client has gone; then the end is queued, then sent.
  auto relay_done = [&] {
    for (int i = 0; i < 500 && (*relay)->Stats().open_connections > 0; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    return (*relay)->Stats().open_connections == 0 && log.WaitUntilIdle(10s);
  };
  ASSERT_TRUE(relay_done());
  auto list = alice_->Get("/api/v1/instances/" + id + "/relay-sessions").Json();
  ASSERT_EQ(list["total"], 1) << list;
  const json row = list["items"][0];
  EXPECT_EQ(row["relay"], "edge-1");
  EXPECT_EQ(row["open"], false);
  EXPECT_EQ(row["hostname"], hostname);
  EXPECT_EQ(row["login"], "root");
  EXPECT_EQ(row["source_address"], "127.0.0.1");
  EXPECT_EQ(row["key_fingerprint"], alice_fp_);
  EXPECT_EQ(row["person_id"], alice_id_);
  EXPECT_EQ(row["bytes_from_client"], 10);
  EXPECT_EQ(row["bytes_to_client"], 15);
  EXPECT_NE(row["end_reason"], "");
  EXPECT_TRUE(row["id"].get<std::string>().starts_with("rls_")) << row;

  // An open relay session shows as open; deleting the instance ends it within about a second
  // (the relay's re-authorization every second).
  CommandResult shell;
  std::thread t([&] { shell = RunCommand(dir_.path(), ssh + " 'sleep 30'"); });
  for (int i = 0; i < 500 && (*relay)->Stats().open_relay_sessions == 0; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ((*relay)->Stats().open_relay_sessions, 1);
  ASSERT_TRUE(log.WaitUntilIdle(10s));
  // The second relay session: the row that is not the first (both may start in one second,
  // and then their order is by id).
  const std::string first_id = row["id"];
  auto second = [&] {
    const json l = alice_->Get("/api/v1/instances/" + id + "/relay-sessions").Json();
    EXPECT_EQ(l["total"], 2) << l;
    for (const auto& item : l["items"]) {
      if (item["id"] != first_id) return item;
    }
    return json();
  };
  EXPECT_EQ(second()["open"], true);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(alice_->Delete("/api/v1/instances/" + id).status, 204);
  t.join();
  const auto took = std::chrono::steady_clock::now() - t0;
  std::printf(
      "[ info ] deletion to the remote relay session's end: %lld ms\n",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  EXPECT_LT(took, 2s);
  EXPECT_EQ(shell.exit_code, 255);
  ASSERT_TRUE(relay_done());
  const json ended = second();
  EXPECT_EQ(ended["open"], false) << ended;
  EXPECT_EQ(ended["end_reason"], "your access to instance " + hostname + " has ended") << ended;
  (*relay)->Stop();
  log.Stop();
  EXPECT_EQ(log.Stats().dropped, 0u);
}

/// `gpuwerk up`'s arrangement without the engine: the relay in the server's process with the
/// store as its authorizer and its relay session log (app::AuditRelaySessionLog).
TEST_F(RelaySessionsApiTest, InProcessRelayWritesLocalRowsAndClosesWhatItLeftOpen) {
  const auto relay_ca = RelayCa();
  ASSERT_TRUE(relay_ca) << relay_ca.error().message;
  Sshd sshd(dir_.path() / "instance", "");
  const json in = RunningInstance("alpha", sshd.port());
  const std::string id = in["id"];
  sshd.SetAuthorizedKeys(RelayCaLines(relay_ca->public_line, {id}));
  const std::string hostname = in["hostname"];

  // A row a killed earlier run left open.
  app::AuditRelaySessionLog log(app_->database(), app_->clock(), app_->rng());
  relay::RelaySessionRecord left;
  left.id = "rls_left";
  left.person_id = alice_id_;
  left.instance_id = id;
  left.started_at = std::chrono::system_clock::now() - 1h;
  log.OnStart(left);
  auto closed = log.CloseLeftOpen();
  ASSERT_TRUE(closed) << closed.error().message;
  EXPECT_EQ(*closed, 1);

  app::StoreRelayAuthorizer authorizer(app_->database(), app_->instances(), app_->clock(),
                                       app_->rng());
  relay::RelayOptions options = LocalRelayOptions();
  options.recheck_interval = 1s;
  auto relay = relay::Relay::Start(options, authorizer, log);
  ASSERT_TRUE(relay) << relay.error().message;
  auto r = SshThrough((*relay)->port(), alice_key_, hostname, "head -c 100000 /dev/zero");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.size(), 100000u);
  (*relay)->Stop();

  auto list = alice_->Get("/api/v1/instances/" + id + "/relay-sessions").Json();
  ASSERT_EQ(list["total"], 2) << list;
  const json row = list["items"][0];
  EXPECT_EQ(row["relay"], "local");
  EXPECT_EQ(row["open"], false);
  EXPECT_EQ(row["bytes_to_client"], 100000);
  EXPECT_EQ(row["key_fingerprint"], alice_fp_);
  EXPECT_EQ(row["source_address"], "127.0.0.1");
  EXPECT_EQ(list["items"][1]["id"], "rls_left");
  EXPECT_EQ(list["items"][1]["end_reason"], "relay restarted");
  // The audit log still has the relay session's start and end.
  auto ends = app_->database().Read([&](store::Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(
        auto n, tx.QueryOne("SELECT COUNT(*) FROM audit_events WHERE action = 'relay_session.end' "
                            "AND target = ?",
                            {id}));
    return n->Int(0);
  });
  EXPECT_EQ(ends.value_or(-1), 1);
}

/// Key identity: the break test's misrouting. Bob cannot put Alice's public key on his
/// account; Alice's bare `ssh root@relay` lands nowhere and says to use the hostname; the relay
/// session she opens by hostname names her, the person who authenticated, and only she (and
/// operators) can list it.
TEST_F(RelaySessionsApiTest, C06_BareLoginLandsNowhereAndTheRelaySessionNamesWhoAuthenticated) {
  ExpectProblem(bob_->PostJson("/api/v1/ssh-keys",
                               {{"name", "stolen-a-pub"}, {"public_key", alice_key_.public_line}}),
                409, "key_taken");
  EXPECT_EQ(bob_->Get("/api/v1/ssh-keys").Json()["total"], 0);

  const auto relay_ca = RelayCa();
  ASSERT_TRUE(relay_ca) << relay_ca.error().message;
  Sshd sshd(dir_.path() / "instance", "");
  const json in = RunningInstance("alpha", sshd.port());
  const std::string id = in["id"];
  sshd.SetAuthorizedKeys(RelayCaLines(relay_ca->public_line, {id}));
  const std::string hostname = in["hostname"];

  app::AuditRelaySessionLog log(app_->database(), app_->clock(), app_->rng());
  app::StoreRelayAuthorizer authorizer(app_->database(), app_->instances(), app_->clock(),
                                       app_->rng());
  relay::RelayOptions options = LocalRelayOptions();
  options.recheck_interval = 1s;
  auto relay = relay::Relay::Start(options, authorizer, log);
  ASSERT_TRUE(relay) << relay.error().message;
  auto ssh = [&](const std::string& user, const std::string& command) {
    return SshThrough((*relay)->port(), alice_key_, user, command);
  };

  // Her only instance, and still a bare user name picks nothing.
  auto bare = ssh("root", "echo landed");
  EXPECT_EQ(bare.exit_code, 255);
  EXPECT_EQ(bare.out, "");
  EXPECT_NE(bare.err.find("\"root\" does not name an instance"), std::string::npos) << bare.err;
  EXPECT_NE(bare.err.find("ssh <hostname>@<relay>"), std::string::npos) << bare.err;
  EXPECT_NE(bare.err.find(hostname), std::string::npos) << bare.err;
  EXPECT_EQ(alice_->Get("/api/v1/instances/" + id + "/relay-sessions").Json()["total"], 0);

  auto named = ssh(hostname, "echo landed");
  ASSERT_EQ(named.exit_code, 0) << named.err;
  EXPECT_EQ(named.out, "landed\n");
  (*relay)->Stop();

  auto list = alice_->Get("/api/v1/instances/" + id + "/relay-sessions").Json();
  ASSERT_EQ(list["total"], 1) << list;
  EXPECT_EQ(list["items"][0]["person_id"], alice_id_);
  EXPECT_EQ(list["items"][0]["key_fingerprint"], alice_fp_);
  EXPECT_EQ(list["items"][0]["hostname"], hostname);
  ExpectProblem(bob_->Get("/api/v1/instances/" + id + "/relay-sessions"), 404, "not_found");
  auto all = op_->Get("/api/v1/admin/relay-sessions?instance_id=" + id).Json();
  ASSERT_EQ(all["total"], 1) << all;
  EXPECT_EQ(all["items"][0]["email"], "alice@example.test");
}

/// Issue 12 finding 1: with one host's agent token, a forged sync cannot send a login into
/// another host's container. The relay connects to the address the operator registered for the
/// attacker's host, never to the one its agent reports, and a reported port outside that host's
/// registered range is not stored; and where the attacker's host does reach the victim's sshd
/// (a port of its own range forwarded there), the relay's certificate names the attacker's
/// instance, which the victim's container does not trust. Bob (the attacker) holds host spark-b's
/// token and an instance on it; alice's instance runs on spark-a. Each container's file trusts
/// the relay CA for its own instance only, as the agents write it; each sshd names itself in
/// GPUWERK_TEST_SSHD. The relay asks the server over HTTP, as `gpuwerk relay` does.
TEST_F(RelaySessionsApiTest, F1_ForgedSyncOfOneHostNeverSendsALoginIntoAnotherHostsContainer) {
  const auto relay_ca = RelayCa();
  ASSERT_TRUE(relay_ca) << relay_ca.error().message;
  Sshd victim(dir_.path() / "victim", "", {.listen_address = "127.0.0.2", .name = "victim"});
  Sshd own(dir_.path() / "attacker", "", {.listen_address = "127.0.0.2", .name = "attacker"});
  // Both hosts publish on 127.0.0.2, each in its own registered range (one port each).
  const uint16_t vp = victim.port(), mp = own.port();
  ASSERT_EQ(
      SetSsh("spark-a", {{"ssh_address", "127.0.0.2"}, {"ssh_ports", {{"low", vp}, {"high", vp}}}})
          .status,
      200);
  auto alpha = alice_->PostJson(
      "/api/v1/instances",
      {{"name", "alpha"}, {"ssh_key_id", alice_key_id_}, {"gpu_type", "spark-1x"}});
  ASSERT_EQ(alpha.status, 201) << alpha.body;
  const std::string alpha_id = alpha.Json()["id"], alpha_host = alpha.Json()["hostname"];
  victim.SetAuthorizedKeys(RelayCaLines(relay_ca->public_line, {alpha_id}));
  ASSERT_EQ(Sync(host_token_, json::array({RunningContainer(alpha_id, vp)})).status, 200);

  const std::string b_token = AddHeardHost("spark-b");
  ASSERT_EQ(
      SetSsh("spark-b", {{"ssh_address", "127.0.0.2"}, {"ssh_ports", {{"low", mp}, {"high", mp}}}})
          .status,
      200);
  const GeneratedKey bob_key = GenerateKey(dir_.path(), "bob");
  auto bob_key_row =
      bob_->PostJson("/api/v1/ssh-keys", {{"name", "laptop"}, {"public_key", bob_key.public_line}});
  ASSERT_EQ(bob_key_row.status, 201) << bob_key_row.body;
  auto mal = bob_->PostJson(
      "/api/v1/instances",
      {{"name", "mal"}, {"ssh_key_id", bob_key_row.Json()["id"]}, {"gpu_type", "spark-1x"}});
  ASSERT_EQ(mal.status, 201) << mal.body;
  const std::string mal_id = mal.Json()["id"], mal_host = mal.Json()["hostname"];
  own.SetAuthorizedKeys(RelayCaLines(relay_ca->public_line, {mal_id}));
  EXPECT_EQ(mal.Json()["hosts"], json::array({"spark-b"}));
  ASSERT_EQ(Sync(b_token, json::array({RunningContainer(mal_id, mp)})).status, 200);

  app::AuditRelaySessionLog log(app_->database(), app_->clock(), app_->rng());
  relay::HttpRelayAuthorizer authorizer(app_->base_url(), relay_token_);
  relay::RelayOptions options = LocalRelayOptions();
  auto relay = relay::Relay::Start(options, authorizer, log);
  ASSERT_TRUE(relay) << relay.error().message;
  const uint16_t port = (*relay)->port();
  const std::string who = "echo \"in $GPUWERK_TEST_SSHD\"";

  // Honest rounds: each lands in its own container.
  auto honest = SshThrough(port, bob_key, mal_host, who);
  ASSERT_EQ(honest.exit_code, 0) << honest.err;
  EXPECT_EQ(honest.out, "in attacker\n");
  auto alice_own = SshThrough(port, alice_key_, alpha_host, who);
  ASSERT_EQ(alice_own.exit_code, 0) << alice_own.err;
  EXPECT_EQ(alice_own.out, "in victim\n");

  // 1. Same address, the victim's port: outside spark-b's range, so not stored; the instance says
  //    why, the operator is told once, and the relay goes nowhere.
  auto forged_port = Sync(b_token, json::array({RunningContainer(mal_id, vp)}));
  ASSERT_EQ(forged_port.status, 200) << forged_port.body;
  EXPECT_EQ(Sync(b_token, json::array({RunningContainer(mal_id, vp)})).status, 200);
  const json mal_shown = bob_->Get("/api/v1/instances/" + mal_id).Json();
  EXPECT_EQ(mal_shown["status"], "provisioning") << mal_shown;
  EXPECT_NE(mal_shown["status_reason"].get<std::string>().find("outside the ports registered"),
            std::string::npos)
      << mal_shown;
  EXPECT_TRUE(mal_shown["ssh"].is_null()) << mal_shown;
  EXPECT_EQ(AuditCount("host.ssh_port_refused"), 1);
  auto by_port = SshThrough(port, bob_key, mal_host, who);
  EXPECT_EQ(by_port.exit_code, 255) << by_port.out;
  EXPECT_EQ(by_port.out.find("victim"), std::string::npos) << by_port.out;
  EXPECT_NE(by_port.err.find("is not reachable yet"), std::string::npos) << by_port.err;

  // 2. The victim's address and port in the agent's own words: spark-b is registered on
  //    127.0.0.1 now, with every port allowed. The agent reports 127.0.0.2 and the victim's port;
  //    the relay still connects to 127.0.0.1, where nothing answers on that port.
  ASSERT_EQ(SetSsh("spark-b", {{"ssh_address", "127.0.0.1"}}).status, 200);
  HttpClient agent(app_->base_url());
  agent.SetBearer(b_token);
  auto forged_address = agent.PostJson(
      "/api/v1/agent/sync",
      {{"agent_version", "0.1.0"},
       {"inventory", {{"addresses", json::array({"127.0.0.2"})}, {"ssh_address", "127.0.0.2"}}},
       {"engine", {{"ok", true}, {"error", ""}}},
       {"containers", json::array({RunningContainer(mal_id, vp)})},
       {"failures", json::array()}});
  ASSERT_EQ(forged_address.status, 200) << forged_address.body;
  const json shown = bob_->Get("/api/v1/instances/" + mal_id).Json();
  EXPECT_EQ(shown["status"], "running") << shown;
  EXPECT_EQ(shown["ssh"], json({{"host", "127.0.0.1"}, {"port", vp}, {"user", "root"}})) << shown;
  auto by_address = SshThrough(port, bob_key, mal_host, who);
  EXPECT_EQ(by_address.exit_code, 255) << by_address.out;
  EXPECT_EQ(by_address.out.find("victim"), std::string::npos) << by_address.out;
  EXPECT_NE(by_address.err.find("is not accepting connections yet"), std::string::npos)
      << by_address.err;

  // 3. The compromised host forwards a port of its own to the victim's sshd: here spark-b's
  //    registration covers the victim's address and port, so the relay does connect there. The
  //    relay's certificate for bob's instance is refused by the victim's sshd: bob hears that
  //    the relay credential is missing, the refusal is audited for his instance, and nothing
  //    runs in the victim's container.
  ASSERT_EQ(
      SetSsh("spark-b", {{"ssh_address", "127.0.0.2"}, {"ssh_ports", {{"low", vp}, {"high", vp}}}})
          .status,
      200);
  ASSERT_EQ(Sync(b_token, json::array({RunningContainer(mal_id, vp)})).status, 200);
  const json forwarded = bob_->Get("/api/v1/instances/" + mal_id).Json();
  ASSERT_EQ(forwarded["ssh"], json({{"host", "127.0.0.2"}, {"port", vp}, {"user", "root"}}))
      << forwarded;
  const int64_t refused_before = AuditCount("relay_session.refused");
  auto by_forwarding = SshThrough(port, bob_key, mal_host, who);
  EXPECT_EQ(by_forwarding.exit_code, 255) << by_forwarding.out;
  EXPECT_EQ(by_forwarding.out.find("victim"), std::string::npos) << by_forwarding.out;
  EXPECT_NE(by_forwarding.err.find("relay credential is missing"), std::string::npos)
      << by_forwarding.err;
  EXPECT_EQ(AuditCount("relay_session.refused"), refused_before + 1);

  // The victim's own login still lands, and no relay session ever named her instance but hers.
  auto alice_again = SshThrough(port, alice_key_, alpha_host, who);
  EXPECT_EQ(alice_again.out, "in victim\n") << alice_again.err;
  (*relay)->Stop();
  auto mal_sessions = bob_->Get("/api/v1/instances/" + mal_id + "/relay-sessions").Json();
  EXPECT_EQ(mal_sessions["total"], 1) << mal_sessions;  // the honest one only
  EXPECT_EQ(alice_->Get("/api/v1/instances/" + alpha_id + "/relay-sessions").Json()["total"], 2);
}

/// A host registered without an SSH address: the relay refuses its instances with a banner that
/// says they are not reachable yet, and the operator is told by an audit event; once the operator
/// registers the address, the same login lands.
TEST_F(RelaySessionsApiTest, HostWithoutARegisteredSshAddressIsRefusedAndAudited) {
  const auto relay_ca = RelayCa();
  ASSERT_TRUE(relay_ca) << relay_ca.error().message;
  Sshd sshd(dir_.path() / "instance", "", {.name = "alpha"});
  ASSERT_EQ(op_->PostJson("/api/v1/admin/hosts/spark-a/drain", json::object()).status, 200);
  const std::string token = AddHeardHost("spark-n", /*ssh=*/false);
  const json listed = op_->Get("/api/v1/admin/hosts").Json();
  ASSERT_EQ(listed["items"][1]["name"], "spark-n") << listed;
  EXPECT_TRUE(listed["items"][1]["ssh_address"].is_null()) << listed;
  EXPECT_TRUE(listed["items"][1]["ssh_ports"].is_null()) << listed;
  EXPECT_EQ(listed["items"][0]["ssh_address"], "127.0.0.1") << listed;
  EXPECT_EQ(listed["items"][0]["ssh_ports"], json({{"low", 1024}, {"high", 65535}})) << listed;
  auto created = alice_->PostJson(
      "/api/v1/instances",
      {{"name", "alpha"}, {"ssh_key_id", alice_key_id_}, {"gpu_type", "spark-1x"}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.Json()["id"], hostname = created.Json()["hostname"];
  sshd.SetAuthorizedKeys(RelayCaLines(relay_ca->public_line, {id}));
  ASSERT_EQ(Sync(token, json::array({RunningContainer(id, sshd.port())})).status, 200);

  app::AuditRelaySessionLog log(app_->database(), app_->clock(), app_->rng());
  app::StoreRelayAuthorizer authorizer(app_->database(), app_->instances(), app_->clock(),
                                       app_->rng());
  relay::RelayOptions options = LocalRelayOptions();
  auto relay = relay::Relay::Start(options, authorizer, log);
  ASSERT_TRUE(relay) << relay.error().message;
  auto refused = SshThrough((*relay)->port(), alice_key_, hostname, "echo $GPUWERK_TEST_SSHD");
  EXPECT_EQ(refused.exit_code, 255);
  EXPECT_EQ(refused.out, "");
  EXPECT_NE(refused.err.find("instance alpha (" + hostname +
                             ") is not reachable yet: the operator has not registered the SSH "
                             "address of its host"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(AuditCount("relay.upstream_unregistered"), 1);

  ASSERT_EQ(SetSsh("spark-n", {{"ssh_address", "127.0.0.1"}}).status, 200);
  EXPECT_EQ(AuditCount("host.set_ssh"), 1);
  auto landed = SshThrough((*relay)->port(), alice_key_, hostname, "echo $GPUWERK_TEST_SSHD");
  EXPECT_EQ(landed.exit_code, 0) << landed.err;
  EXPECT_EQ(landed.out, "alpha\n");
  (*relay)->Stop();
}

/// Host key pinning (R-9, R-22; docs/ssh.md "Host key pinning"): the first host key the agent
/// reports for a container is pinned, and the relay requires it of the sshd it reaches. A host key
/// changed behind the agent's back is refused with a banner and the audit event
/// `relay.host_key_mismatch`, and the agent's word for another key of the same container changes
/// nothing; a container made again is pinned again deliberately, and its owner is mailed.
TEST_F(RelaySessionsApiTest, PinnedHostKeyIsRequiredAndAContainerMadeAgainIsPinnedAgain) {
  const auto relay_ca = RelayCa();
  ASSERT_TRUE(relay_ca) << relay_ca.error().message;
  Sshd sshd(dir_.path() / "instance", "", {.name = "alpha"});
  const std::string first_key = sshd.HostKeyLine();
  auto created = alice_->PostJson(
      "/api/v1/instances",
      {{"name", "alpha"}, {"ssh_key_id", alice_key_id_}, {"gpu_type", "spark-1x"}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.Json()["id"], hostname = created.Json()["hostname"];
  sshd.SetAuthorizedKeys(RelayCaLines(relay_ca->public_line, {id}));
  ASSERT_EQ(
      Sync(host_token_, json::array({ContainerWithKey(id, sshd.port(), "c0", first_key)})).status,
      200);
  EXPECT_EQ(AuditCount("instance.host_key_pinned"), 1);
  // Reported again each round: pinned once.
  ASSERT_EQ(
      Sync(host_token_, json::array({ContainerWithKey(id, sshd.port(), "c0", first_key)})).status,
      200);
  EXPECT_EQ(AuditCount("instance.host_key_pinned"), 1);

  app::AuditRelaySessionLog log(app_->database(), app_->clock(), app_->rng());
  app::StoreRelayAuthorizer authorizer(app_->database(), app_->instances(), app_->clock(),
                                       app_->rng());
  relay::RelayOptions options = LocalRelayOptions();
  auto relay = relay::Relay::Start(options, authorizer, log);
  ASSERT_TRUE(relay) << relay.error().message;
  const uint16_t port = (*relay)->port();
  const std::string who = "echo \"in $GPUWERK_TEST_SSHD\"";
  auto pinned = SshThrough(port, alice_key_, hostname, who);
  ASSERT_EQ(pinned.exit_code, 0) << pinned.err;
  EXPECT_EQ(pinned.out, "in alpha\n");

  // The host key changes behind the agent's back: refused, said, recorded.
  sshd.ReplaceHostKey();
  const std::string second_key = sshd.HostKeyLine();
  ASSERT_NE(second_key, first_key);
  auto changed = SshThrough(port, alice_key_, hostname, who);
  EXPECT_EQ(changed.exit_code, 255);
  EXPECT_EQ(changed.out, "");
  EXPECT_NE(changed.err.find("instance alpha (" + hostname +
                             ") answered with an unexpected host key; the relay did not log in"),
            std::string::npos)
      << changed.err;
  EXPECT_EQ(AuditCount("relay.host_key_mismatch"), 1);
  // The agent's word for another key of the same container is not taken.
  ASSERT_EQ(
      Sync(host_token_, json::array({ContainerWithKey(id, sshd.port(), "c0", second_key)})).status,
      200);
  auto still = SshThrough(port, alice_key_, hostname, who);
  EXPECT_EQ(still.exit_code, 255);
  EXPECT_EQ(still.out, "");
  EXPECT_EQ(AuditCount("relay.host_key_mismatch"), 2);
  EXPECT_EQ(AuditCount("instance.host_key_repinned"), 0);

  // A container made again, its key not read yet: not reachable until it is.
  ASSERT_EQ(Sync(host_token_, json::array({ContainerWithKey(id, sshd.port(), "c1", "")})).status,
            200);
  auto unread = SshThrough(port, alice_key_, hostname, who);
  EXPECT_EQ(unread.exit_code, 255);
  EXPECT_NE(unread.err.find("is not reachable yet"), std::string::npos) << unread.err;
  EXPECT_EQ(AuditCount("relay.host_key_mismatch"), 2);
  // Its key read: pinned again on purpose, the owner told, and the login lands.
  ASSERT_EQ(
      Sync(host_token_, json::array({ContainerWithKey(id, sshd.port(), "c1", second_key)})).status,
      200);
  EXPECT_EQ(AuditCount("instance.host_key_repinned"), 1);
  const auto mails = Mails("alice@example.test", 2);  // the address proof, this one
  bool told = false;
  for (const auto& m : mails) {
    if (m.subject.find("has a new container and SSH host key") != std::string::npos) told = true;
  }
  EXPECT_TRUE(told);
  auto again = SshThrough(port, alice_key_, hostname, who);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, "in alpha\n");
  (*relay)->Stop();
}

/// The real `gpuwerk relay` binary: reports under its credential's name, a killed relay's open
/// row is closed when it starts again, and a SIGTERM ends open relay sessions and still reports
/// their end.
TEST_F(RelaySessionsApiTest, GpuwerkRelayBinaryReportsAndAKilledRelaysRowIsClosedAtRestart) {
  const auto relay_ca = RelayCa();
  ASSERT_TRUE(relay_ca) << relay_ca.error().message;
  Sshd sshd(dir_.path() / "instance", "");
  const json in = RunningInstance("alpha", sshd.port());
  const std::string id = in["id"];
  sshd.SetAuthorizedKeys(RelayCaLines(relay_ca->public_line, {id}));
  const std::string hostname = in["hostname"];
  const uint16_t port = FreePort();
  const std::string edge7_token = RegisterRelay("edge-7");
  ChildProcess relay;
  auto start_relay = [&] {
    ASSERT_TRUE(relay.Start({GpuwerkBinary(), "relay", "--server", app_->base_url(), "--listen",
                             "127.0.0.1:" + std::to_string(port), "--host-key",
                             (dir_.path() / "relay" / "host_key").string(), "--relay-key",
                             (dir_.path() / "relay" / "relay_key").string(), "--relay-ca",
                             (dir_.path() / "relay" / "relay_ca").string()},
                            {{"GPUWERK_RELAY_TOKEN", edge7_token}}, dir_.path() / "relay.log"))
        << relay.error();
    for (int i = 0; i < 500; ++i) {
      if (int fd = Connect(port); fd >= 0) {
        ::close(fd);
        return;
      }
      std::this_thread::sleep_for(10ms);
    }
    FAIL() << "gpuwerk relay did not listen: " << ReadFile(dir_.path() / "relay.log");
  };
  const std::string ssh = SshVia(port, alice_key_, hostname);
  // The rows of this instance, once `done` holds for them (≤ 10 s).
  auto rows_when = [&](const std::function<bool(const json&)>& done) {
    json items;
    for (int i = 0; i < 200; ++i) {
      items = op_->Get("/api/v1/admin/relay-sessions?instance_id=" + id).Json()["items"];
      if (done(items)) break;
      std::this_thread::sleep_for(50ms);
    }
    return items;
  };

  ASSERT_NO_FATAL_FAILURE(start_relay());
  CommandResult shell;
  std::thread t([&] { shell = RunCommand(dir_.path(), ssh + " 'sleep 30'"); });
  json items = rows_when([](const json& i) { return i.size() == 1; });
  ASSERT_EQ(items.size(), 1u) << ReadFile(dir_.path() / "relay.log");
  EXPECT_EQ(items[0]["relay"], "edge-7");
  EXPECT_EQ(items[0]["open"], true);
  const std::string killed_id = items[0]["id"];
  relay.Kill(SIGKILL);  // no chance to report the end
  t.join();
  EXPECT_EQ(shell.exit_code, 255);
  EXPECT_EQ(op_->Get("/api/v1/admin/relay-sessions?instance_id=" + id).Json()["items"][0]["open"],
            true);

  ASSERT_NO_FATAL_FAILURE(start_relay());
  items = rows_when([](const json& i) { return i.size() == 1 && i[0]["open"] == false; });
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0]["end_reason"], "relay restarted");

  // Stopped with SIGTERM while a relay session is open: it ends, and its end is reported.
  std::thread t2([&] { shell = RunCommand(dir_.path(), ssh + " 'sleep 30'"); });
  items = rows_when([](const json& i) { return i.size() == 2; });
  ASSERT_EQ(items.size(), 2u);
  const auto status = relay.Stop(10s);
  t2.join();
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(ChildProcess::Describe(*status), "exit 0") << ReadFile(dir_.path() / "relay.log");
  EXPECT_EQ(shell.exit_code, 255);
  items = op_->Get("/api/v1/admin/relay-sessions?instance_id=" + id).Json()["items"];
  ASSERT_EQ(items.size(), 2u);
  for (const auto& row : items) {
    EXPECT_EQ(row["open"], false) << row;
    EXPECT_EQ(row["end_reason"], row["id"] == killed_id ? "relay restarted" : "relay stopping")
        << row;
  }
  // One log line per start and end as well.
  const std::string stopped_id =
      items[items[0]["id"] == killed_id ? 1 : 0]["id"].get<std::string>();
  const std::string log = ReadFile(dir_.path() / "relay.log");
  EXPECT_NE(log.find("relay_session start id=" + stopped_id), std::string::npos) << log;
  EXPECT_NE(log.find("relay_session end id=" + stopped_id), std::string::npos) << log;
}

/// `gpuwerk instances relay-sessions` and `gpuwerk admin relay-sessions`, the real binary.
TEST_F(RelaySessionsApiTest, CliListsRelaySessions) {
  const json in = RunningInstance("alpha");
  const std::string id = in["id"];
  for (int i = 0; i < 16; ++i) {
    char started[32], ended[32];
    std::snprintf(started, sizeof started, "2027-01-14T10:%02d:00Z", i);
    std::snprintf(ended, sizeof ended, "2027-01-14T10:%02d:05Z", i);
    ASSERT_EQ(Put("rls_c" + std::to_string(100 + i), Report(id, started, ended)).status, 200);
  }
  const std::string alice_token =
      alice_->PostJson("/api/v1/tokens", {{"name", "cli"}}).Json()["token"].get<std::string>();
  auto gpuwerk = [&](const std::string& token, const std::string& args) {
    return RunCommand(dir_.path(), "env -u GPUWERK_URL -u GPUWERK_TOKEN GPUWERK_CONFIG_DIR='" +
                                       (dir_.path() / "config").string() + "' " + GpuwerkBinary() +
                                       " " + args + " --url " + app_->base_url() + " --token " +
                                       token);
  };
  auto table = gpuwerk(alice_token, "instances relay-sessions alpha");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("STARTED"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("2027-01-14T10:15:00Z"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("2027-01-14T10:00:00Z"), std::string::npos) << table.out;  // page 2
  EXPECT_NE(table.out.find("0h00m05s"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("2.0 KiB"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("client closed"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("Page 1 of 2, 16 relay sessions"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("--page 2"), std::string::npos) << table.out;

  auto page2 = gpuwerk(alice_token, "instances relay-sessions alpha --page 2 --json");
  ASSERT_EQ(page2.exit_code, 0) << page2.err;
  const json p2 = json::parse(page2.out);
  EXPECT_EQ(p2["page"], 2);
  ASSERT_EQ(p2["items"].size(), 1u);
  EXPECT_EQ(p2["items"][0]["id"], "rls_c100");

  auto missing = gpuwerk(alice_token, "instances relay-sessions nope");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("not_found"), std::string::npos) << missing.err;
  auto not_operator = gpuwerk(alice_token, "admin relay-sessions");
  EXPECT_EQ(not_operator.exit_code, 1);
  EXPECT_NE(not_operator.err.find("forbidden"), std::string::npos) << not_operator.err;

  auto admin = gpuwerk(op_token_, "admin relay-sessions --instance " + id);
  ASSERT_EQ(admin.exit_code, 0) << admin.err;
  EXPECT_NE(admin.out.find("alice@example.test"), std::string::npos) << admin.out;
  EXPECT_NE(admin.out.find("edge-1"), std::string::npos) << admin.out;
  auto admin_json = gpuwerk(op_token_, "admin relay-sessions --page 2 --json");
  ASSERT_EQ(admin_json.exit_code, 0) << admin_json.err;
  EXPECT_EQ(json::parse(admin_json.out)["total"], 16);
  auto none = gpuwerk(op_token_, "admin relay-sessions --instance ins_none");
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_NE(none.out.find("No relay sessions."), std::string::npos) << none.out;

  // A deleted instance's history, by its id.
  ASSERT_EQ(alice_->Delete("/api/v1/instances/" + id).status, 204);
  Sync(host_token_);
  auto deleted = gpuwerk(alice_token, "instances relay-sessions " + id + " --json");
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_EQ(json::parse(deleted.out)["total"], 16);
}

// Issue 12 finding 6: revocation fails closed and is pushed (docs/ssh.md "Revocation"). A real
// relay in front of a real sshd, asking this server over HTTP and holding its watch stream open
// (as `gpuwerk relay` does), or in-process with the store's authorizer (as `gpuwerk up` does).
// The authorizer is wrapped so that the order of events (re-checks and their outcomes, relay
// session ends) can be asserted; every wait is bounded by the documented bound
// (RelayOptions::max_failed_rechecks and friends) computed from the options the test sets.

/// An authorizer in front of another that notes each re-check's outcome in order, counts the
/// requests, and can hold re-checks until released.
class NotingAuthorizer final : public relay::RelayAuthorizer {
 public:
  explicit NotingAuthorizer(relay::RelayAuthorizer& inner) : inner_(inner) {}
  core::Result<relay::AuthorizeDecision> Authorize(const relay::AuthorizeRequest& r) override {
    ++authorize_calls;
    return inner_.Authorize(r);
  }
  core::Result<std::vector<relay::RecheckVerdict>> Recheck(
      const std::vector<relay::RecheckItem>& items) override {
    {
      std::unique_lock lock(mu_);
      batch_sizes_.push_back(items.size());
      ++holding_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !held_; });
      --holding_;
    }
    auto r = inner_.Recheck(items);
    Note(r ? "recheck ok" : "recheck failed: " + r.error().api_code);
    return r;
  }
  void Note(const std::string& event) {
    std::lock_guard lock(mu_);
    events_.push_back(event);
  }
  std::vector<std::string> Events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  std::vector<size_t> BatchSizes() {
    std::lock_guard lock(mu_);
    return batch_sizes_;
  }
  /// Re-checks wait from now until Release().
  void Hold() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  void Release() {
    {
      std::lock_guard lock(mu_);
      held_ = false;
    }
    cv_.notify_all();
  }
  /// Whether a re-check is waiting in Hold() now.
  bool Holding() {
    std::lock_guard lock(mu_);
    return holding_ > 0;
  }
  std::atomic<int> authorize_calls{0};

 private:
  relay::RelayAuthorizer& inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  int holding_ = 0;
  std::vector<std::string> events_;
  std::vector<size_t> batch_sizes_;
};

/// Relay session ends into the NotingAuthorizer's events ("end: <reason>"), so that their order
/// against the re-checks shows.
class NotingLog final : public relay::RelaySessionLog {
 public:
  explicit NotingLog(NotingAuthorizer& events) : events_(events) {}
  void OnStart(const relay::RelaySessionRecord&) override {}
  void OnEnd(const relay::RelaySessionRecord& r) override { events_.Note("end: " + r.end_reason); }
  void OnRefused(const relay::RelayRefusalRecord&) override {}

 private:
  NotingAuthorizer& events_;
};

class RelayRevocationTest : public RelaySessionsApiTest {
 protected:
  /// The authorizer's timeout T in these tests.
  static constexpr auto kAuthorizerTimeout = std::chrono::milliseconds(2000);

  void SetUp() override {
    RelaySessionsApiTest::SetUp();
    if (HasFatalFailure()) return;
    auto ca = RelayCa();
    ASSERT_TRUE(ca) << ca.error().message;
    sshd_ = std::make_unique<Sshd>(dir_.path() / "instance", "");
    in_ = RunningInstance("alpha", sshd_->port());
    ASSERT_EQ(in_["status"], "running") << in_;
    sshd_->SetAuthorizedKeys(RelayCaLines(ca->public_line, {in_["id"].get<std::string>()}));
    options_ = LocalRelayOptions();
    // Only pushed changes and failures may end relay sessions here: no backstop within a test.
    options_.recheck_interval = std::chrono::hours(1);
    options_.recheck_retry_interval = 200ms;
    options_.max_failed_rechecks = 3;
  }
  void TearDown() override {
    if (noting_) noting_->Release();
    push_.reset();  // before the server (and its feed) goes
    if (watch_) watch_->Stop();
    if (relay_) relay_->Stop();
    RelaySessionsApiTest::TearDown();
  }

  /// The documented bound after the control plane stops answering (RelayOptions), when the
  /// watch stream notices at once: max_failed_rechecks × T + (max_failed_rechecks − 1) × retry.
  std::chrono::milliseconds FailClosedBound() const {
    return options_.max_failed_rechecks * kAuthorizerTimeout +
           (options_.max_failed_rechecks - 1) * options_.recheck_retry_interval;
  }
  /// The documented bound of a pushed change: one re-check, at most T, after it is committed.
  static constexpr std::chrono::milliseconds PushBound() { return kAuthorizerTimeout; }

  /// A remote relay (HTTP authorizer and watch stream, as `gpuwerk relay` runs), or with
  /// `in_process` the store's authorizer and the server's feed (as `gpuwerk up` runs).
  void StartRelay(bool in_process = false) {
    if (in_process) {
      inner_ = std::make_unique<app::StoreRelayAuthorizer>(app_->database(), app_->instances(),
                                                           app_->clock(), app_->rng());
    } else {
      inner_ = std::make_unique<relay::HttpRelayAuthorizer>(app_->base_url(), relay_token_,
                                                            kAuthorizerTimeout);
    }
    noting_ = std::make_unique<NotingAuthorizer>(*inner_);
    log_ = std::make_unique<NotingLog>(*noting_);
    auto relay = relay::Relay::Start(options_, *noting_, *log_);
    ASSERT_TRUE(relay) << relay.error().message;
    relay_ = std::move(*relay);
    if (in_process) {
      push_ = std::make_unique<app::RelayAccessPush>(app_->access_changes(), *relay_);
    } else {
      watch_ = std::make_unique<relay::HttpRelayWatch>(
          relay::HttpRelayWatch::Options{
              .server_url = app_->base_url(), .token = relay_token_, .reconnect_delay = 100ms},
          *relay_);
      watch_->Start();
      ASSERT_TRUE(Eventually([&] { return watch_->stats().connected; }, 10s));
    }
  }

  /// `ssh <hostname>@relay COMMAND` on a thread of its own; Join() gives its result.
  struct Shell {
    std::thread thread;
    CommandResult result;
    CommandResult Join() {
      if (thread.joinable()) thread.join();
      return result;
    }
  };
  std::unique_ptr<Shell> OpenShell(const std::string& command = "sleep 60") {
    auto shell = std::make_unique<Shell>();
    Shell* raw = shell.get();
    const std::string hostname = in_["hostname"];
    shell->thread = std::thread([this, raw, hostname, command] {
      raw->result = SshThrough(relay_->port(), alice_key_, hostname, command);
    });
    return shell;
  }
  bool OpenRelaySessions(int n) {
    return Eventually([&] { return relay_->Stats().open_relay_sessions == n; }, 20s, 20ms);
  }
  /// The events from the first that starts with `prefix`.
  static std::vector<std::string> From(const std::vector<std::string>& events,
                                       const std::string& prefix) {
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].starts_with(prefix)) return {events.begin() + i, events.end()};
    }
    return {};
  }
  static int Count(const std::vector<std::string>& events, const std::string& prefix) {
    return static_cast<int>(std::count_if(events.begin(), events.end(),
                                          [&](const auto& e) { return e.starts_with(prefix); }));
  }

  std::unique_ptr<Sshd> sshd_;
  json in_;
  relay::RelayOptions options_;
  std::unique_ptr<relay::RelayAuthorizer> inner_;
  std::unique_ptr<NotingAuthorizer> noting_;
  std::unique_ptr<NotingLog> log_;
  std::unique_ptr<relay::Relay> relay_;
  std::unique_ptr<relay::HttpRelayWatch> watch_;
  std::unique_ptr<app::RelayAccessPush> push_;
};

TEST_F(RelayRevocationTest, F6_DeletingTheInstanceClosesARemoteRelaySessionThroughTheWatchStream) {
  StartRelay();
  auto shell = OpenShell();
  ASSERT_TRUE(OpenRelaySessions(1));
  ASSERT_EQ(alice_->Delete("/api/v1/instances/" + in_["id"].get<std::string>()).status, 204);
  // Pushed: no backstop re-check is due for an hour.
  ASSERT_TRUE(Eventually([&] { return relay_->Stats().ended_by_recheck == 1; }, PushBound(), 20ms))
      << ::testing::PrintToString(noting_->Events());
  const auto r = shell->Join();
  EXPECT_EQ(r.exit_code, 255);
  EXPECT_NE(
      r.err.find("your access to instance " + in_["hostname"].get<std::string>() + " has ended"),
      std::string::npos)
      << r.err;
  EXPECT_GE(watch_->stats().changes, 1u);
  ASSERT_TRUE(Eventually([&] { return Count(noting_->Events(), "end: ") == 1; }, 10s));
  // One targeted re-check, answered, then the end.
  EXPECT_EQ(noting_->Events(),
            (std::vector<std::string>{"recheck ok", "end: your access to instance " +
                                                        in_["hostname"].get<std::string>() +
                                                        " has ended"}));
}

TEST_F(RelayRevocationTest, F6_DeletingTheInstanceClosesAnInProcessRelaySessionAtOnce) {
  StartRelay(/*in_process=*/true);
  auto shell = OpenShell();
  ASSERT_TRUE(OpenRelaySessions(1));
  ASSERT_EQ(alice_->Delete("/api/v1/instances/" + in_["id"].get<std::string>()).status, 204);
  ASSERT_TRUE(Eventually([&] { return relay_->Stats().ended_by_recheck == 1; }, PushBound(), 20ms));
  EXPECT_EQ(shell->Join().exit_code, 255);
  ASSERT_TRUE(Eventually([&] { return Count(noting_->Events(), "end: ") == 1; }, 10s));
  EXPECT_EQ(noting_->Events().front(), "recheck ok");
}

TEST_F(RelayRevocationTest, F6_RemovingTheKeyFromTheAccountClosesTheRelaySession) {
  StartRelay();
  auto shell = OpenShell();
  ASSERT_TRUE(OpenRelaySessions(1));
  // Bob proves that he holds the key alice's instance was reached with (alice never proved it):
  // it leaves her account, and with it her access (docs/ssh-keys.md "Proof of possession").
  auto challenge =
      bob_->PostJson("/api/v1/ssh-keys/claim-challenge", {{"public_key", alice_key_.public_line}});
  ASSERT_EQ(challenge.status, 201) << challenge.body;
  const std::string c = challenge.Json()["challenge"];
  const std::string sig =
      RunCommand(
          dir_.path(),
          "ssh-keygen -q -Y sign -n gpuwerk-key-claim -f " + alice_key_.private_path.string(), c)
          .out;
  ASSERT_NE(sig, "");
  auto claimed = bob_->PostJson("/api/v1/ssh-keys/claim", {{"name", "laptop"},
                                                           {"public_key", alice_key_.public_line},
                                                           {"challenge", c},
                                                           {"signature", sig}});
  ASSERT_EQ(claimed.status, 201) << claimed.body;
  ASSERT_TRUE(Eventually([&] { return relay_->Stats().ended_by_recheck == 1; }, PushBound(), 20ms))
      << ::testing::PrintToString(noting_->Events());
  EXPECT_EQ(shell->Join().exit_code, 255);
  ASSERT_TRUE(Eventually([&] { return Count(noting_->Events(), "end: ") == 1; }, 10s));
  EXPECT_EQ(noting_->Events().front(), "recheck ok");
}

TEST_F(RelayRevocationTest, F6_RevokingTheRelaysCredentialClosesEveryRelaySessionAtOnce) {
  StartRelay();
  auto one = OpenShell();
  auto two = OpenShell();
  ASSERT_TRUE(OpenRelaySessions(2));
  // Deleting an operator's API token is nothing to the relay (its credential is its own).
  const json tokens = op_->Get("/api/v1/tokens").Json();
  ASSERT_EQ(tokens["items"].size(), 1u) << tokens;
  ASSERT_EQ(op_->Delete("/api/v1/tokens/" + tokens["items"][0]["id"].get<std::string>()).status,
            204);
  ASSERT_TRUE(Eventually([&] { return watch_->stats().changes >= 1; }, 10s));
  EXPECT_EQ(relay_->Stats().open_relay_sessions, 2);
  // The relay's credential is revoked: its watch stream ends at once, the relay re-checks at
  // once, gets 401, and ends both without counting failures (max_failed_rechecks is 3).
  ASSERT_EQ(op_->Delete("/api/v1/admin/relays/edge-1").status, 204);
  ASSERT_TRUE(Eventually([&] { return relay_->Stats().ended_by_recheck == 2; }, PushBound(), 20ms))
      << ::testing::PrintToString(noting_->Events());
  for (auto* shell : {one.get(), two.get()}) {
    const auto r = shell->Join();
    EXPECT_EQ(r.exit_code, 255);
    EXPECT_NE(r.err.find("its credential was refused"), std::string::npos) << r.err;
  }
  ASSERT_TRUE(Eventually([&] { return Count(noting_->Events(), "end: ") == 2; }, 10s));
  // One refused re-check, then both ends (and no end before it).
  const auto events = From(noting_->Events(), "recheck failed");
  ASSERT_EQ(events.size(), 3u) << ::testing::PrintToString(noting_->Events());
  EXPECT_EQ(events.front(), "recheck failed: relay_token_refused");
  EXPECT_EQ(Count(noting_->Events(), "recheck failed"), 1);
  // The revoked credential is refused from now on (401), on every relay route.
  ExpectProblem(relay_client_->PostJson("/api/v1/relay/restarted", json::object()), 401,
                "unauthenticated");
}

TEST_F(RelayRevocationTest, F6_StoppingTheControlPlaneClosesRelaySessionsAfterTheBoundedFailures) {
  StartRelay();
  auto one = OpenShell();
  auto two = OpenShell();
  ASSERT_TRUE(OpenRelaySessions(2));
  StopServer();
  ASSERT_TRUE(
      Eventually([&] { return relay_->Stats().ended_by_recheck == 2; }, FailClosedBound(), 20ms))
      << ::testing::PrintToString(noting_->Events());
  for (auto* shell : {one.get(), two.get()}) {
    const auto r = shell->Join();
    EXPECT_EQ(r.exit_code, 255);
    EXPECT_NE(r.err.find("cannot reach the control plane"), std::string::npos) << r.err;
  }
  ASSERT_TRUE(Eventually([&] { return Count(noting_->Events(), "end: ") == 2; }, 10s));
  // Exactly max_failed_rechecks failures, then the ends: not one failure sooner.
  const auto events = From(noting_->Events(), "recheck failed");
  ASSERT_GE(events.size(), 5u) << ::testing::PrintToString(noting_->Events());
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(events[i].starts_with("recheck failed: server_unavailable")) << events[i];
  }
  EXPECT_TRUE(events[3].starts_with("end: ")) << ::testing::PrintToString(events);
  EXPECT_TRUE(events[4].starts_with("end: ")) << ::testing::PrintToString(events);
  EXPECT_EQ(Count(noting_->Events(), "end: "), 2);
}

TEST_F(RelayRevocationTest, F6_TheBackstopRechecksEveryRelaySessionInOneBatch) {
  options_.recheck_interval = 300ms;
  StartRelay();
  auto one = OpenShell();
  auto two = OpenShell();
  auto three = OpenShell();
  ASSERT_TRUE(OpenRelaySessions(3));
  const size_t before = noting_->BatchSizes().size();
  // Several backstop rounds with three relay sessions open: one request each, carrying all three;
  // no per-relay-session authorize request after the three logins.
  // (The first round counted may have gathered its relay sessions before the third opened.)
  ASSERT_TRUE(Eventually([&] { return noting_->BatchSizes().size() >= before + 4; }, 10s));
  const auto sizes = noting_->BatchSizes();
  for (size_t i = before + 1; i < sizes.size(); ++i) EXPECT_EQ(sizes[i], 3u) << i;
  EXPECT_EQ(noting_->authorize_calls.load(), 3);
  EXPECT_EQ(relay_->Stats().open_relay_sessions, 3);
  EXPECT_EQ(relay_->Stats().ended_by_recheck, 0u);
  // Still answered as allowed: the relay sessions go on.
  for (const auto& e : noting_->Events()) EXPECT_EQ(e, "recheck ok");
  relay_->Stop();
  for (auto* shell : {one.get(), two.get(), three.get()}) EXPECT_EQ(shell->Join().exit_code, 255);
}

TEST_F(RelayRevocationTest, F6_ASlowRecheckAnswerDoesNotHoldUpData) {
  StartRelay();
  auto idle = OpenShell();
  ASSERT_TRUE(OpenRelaySessions(1));
  // A re-check hangs (the control plane is slow to answer) ...
  noting_->Hold();
  relay_->RecheckAllRelaySessions();
  ASSERT_TRUE(Eventually([&] { return noting_->Holding(); }, 10s, 20ms));
  // ... and meanwhile data flows through the open relay session and through a new one: a
  // round trip of 1 MiB completes while the re-check is still held.
  auto r = SshThrough(relay_->port(), alice_key_, in_["hostname"].get<std::string>(),
                      "head -c 1048576 /dev/zero");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.size(), 1048576u);
  EXPECT_TRUE(noting_->Holding());  // the order: the data came through first
  // No re-check has answered yet (the data relay session's own end is the only event).
  EXPECT_EQ(Count(noting_->Events(), "recheck"), 0) << ::testing::PrintToString(noting_->Events());
  noting_->Release();
  ASSERT_TRUE(Eventually([&] { return Count(noting_->Events(), "recheck ok") >= 1; }, 10s));
  EXPECT_EQ(relay_->Stats().ended_by_recheck, 0u);
  relay_->Stop();
  EXPECT_EQ(idle->Join().exit_code, 255);
}

}  // namespace
}  // namespace gpuwerk::testing
