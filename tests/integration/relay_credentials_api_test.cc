// Relay credentials (docs/ssh.md "The relay's API credential"; issue 12 finding 8) over real HTTP
// with a real store: an operator registers a relay and gets its secret once; the relay's own
// client (relay::HttpRelayAuthorizer) authorizes a login with it; the credential opens nothing
// but the relay's routes, and the relay's routes take nothing but a relay credential; revoking
// it makes the next request 401; bad names are refused with stable codes and store nothing; the
// CLI verbs.
#include <gtest/gtest.h>

#include <string>

#include "core/time_format.h"
#include "relay/http_relay_authorizer.h"
#include "tests/integration/relay_fixture.h"
#include "tests/support/run_command.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

class RelayCredentialsApiTest : public RelayServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    if (HasFatalFailure()) return;
    SignInOperator();
    if (HasFatalFailure()) return;
    op_token_ = OperatorToken();
    SignUpAliceWithKey();
    if (HasFatalFailure()) return;
    // A host whose sshd the relay reaches on 127.0.0.1.
    host_token_ = AddHost("spark-a");
    ASSERT_EQ(Sync(host_token_).status, 200);
  }

  /// Alice's instance `name`, running with its sshd on port 40001.
  json RunningInstance(const std::string& name) {
    auto created =
        alice_->PostJson("/api/v1/instances",
                         {{"name", name}, {"ssh_key_id", alice_key_id_}, {"gpu_type", "spark-1x"}});
    EXPECT_EQ(created.status, 201) << created.body;
    const std::string id = created.Json().value("id", "");
    EXPECT_EQ(Sync(host_token_, json::array({RunningContainer(id, 40001)})).status, 200);
    return alice_->Get("/api/v1/instances/" + id).Json();
  }
  /// Alice's login to `hostname` as the relay asks about it.
  relay::AuthorizeRequest LoginTo(const std::string& hostname) const {
    const std::string& line = alice_key_.public_line;
    const size_t blob = line.find(' ') + 1;
    return {.user = hostname,
            .key_type = line.substr(0, blob - 1),
            .key_blob_base64 = line.substr(blob, line.find(' ', blob) - blob),
            .key_fingerprint = alice_fp_,
            .source_address = "203.0.113.7"};
  }
  /// A client with `Authorization: Bearer <bearer>`.
  std::unique_ptr<HttpClient> With(const std::string& bearer) {
    auto client = Browser();
    client->SetBearer(bearer);
    return client;
  }
  int64_t Count(const std::string& sql, std::initializer_list<store::Value> params = {}) {
    auto n = app_->database().Read([&](store::Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(sql, params));
      return row->Int(0);
    });
    return n ? *n : -1;
  }
  /// `gpuwerk ARGS --url … --token TOKEN`, the real binary.
  CommandResult Gpuwerk(const std::string& token, const std::string& args) {
    return RunCommand(dir_.path(), "env -u GPUWERK_URL -u GPUWERK_TOKEN GPUWERK_CONFIG_DIR='" +
                                       (dir_.path() / "config").string() + "' " + GpuwerkBinary() +
                                       " " + args + " --url " + app_->base_url() + " --token " +
                                       token);
  }

  std::string op_token_, host_token_;
};

TEST_F(RelayCredentialsApiTest, ARegisteredRelayAuthorizesALoginAndARevokedOneGets401) {
  const json in = RunningInstance("alpha");
  ASSERT_EQ(in["status"], "running") << in;
  auto added = op_->PostJson("/api/v1/admin/relays", {{"name", "edge-1"}});
  ASSERT_EQ(added.status, 201) << added.body;
  const json relay = added.Json();
  const std::string secret = relay["token"];
  EXPECT_TRUE(secret.starts_with("gwr_")) << relay;
  EXPECT_EQ(relay["name"], "edge-1");
  EXPECT_EQ(relay["prefix"], secret.substr(0, 12));
  EXPECT_TRUE(relay["id"].get<std::string>().starts_with("rly_")) << relay;
  EXPECT_TRUE(relay["last_used_at"].is_null()) << relay;
  // Stored hashed, audited with actor, target and source address.
  EXPECT_EQ(Count("SELECT COUNT(*) FROM relay_credentials WHERE token_hash = ?", {secret}), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'relay_credential.add' AND "
                  "target = ? AND actor_id <> '' AND source_address = '127.0.0.1'",
                  {relay["id"].get<std::string>()}),
            1);

  // The relay's own client authorizes alice's login with it.
  relay::HttpRelayAuthorizer authorizer(app_->base_url(), secret);
  auto decision = authorizer.Authorize(LoginTo(in["hostname"]));
  ASSERT_TRUE(decision) << decision.error().message;
  ASSERT_TRUE(decision->target.has_value()) << decision->refusal;
  EXPECT_EQ(decision->target->instance_id, in["id"]);

  // Listed without its secret, with its use.
  const json listed = op_->Get("/api/v1/admin/relays").Json();
  ASSERT_EQ(listed["total"], 1) << listed;
  const json& item = listed["items"][0];
  EXPECT_EQ(item["name"], "edge-1");
  EXPECT_FALSE(item.contains("token")) << item;
  EXPECT_EQ(listed.dump().find(secret), std::string::npos);
  EXPECT_EQ(item["last_used_at"], core::FormatRfc3339(clock_.NowUnix())) << item;

  // Revoked: the next request is 401, and the relay's client says its credential was refused.
  ASSERT_EQ(op_->Delete("/api/v1/admin/relays/edge-1").status, 204);
  ExpectProblem(With(secret)->PostJson("/api/v1/relay/restarted", json::object()), 401,
                "unauthenticated");
  auto refused = authorizer.Authorize(LoginTo(in["hostname"]));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().api_code, "relay_token_refused");
  EXPECT_EQ(op_->Get("/api/v1/admin/relays").Json()["total"], 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'relay_credential.revoke' "
                  "AND target = ? AND source_address = '127.0.0.1'",
                  {relay["id"].get<std::string>()}),
            1);
  ExpectProblem(op_->Delete("/api/v1/admin/relays/edge-1"), 404, "not_found");
}

TEST_F(RelayCredentialsApiTest, ARelayCredentialOpensTheRelaysRoutesOnly) {
  const std::string secret =
      op_->PostJson("/api/v1/admin/relays", {{"name", "edge-1"}}).Json()["token"];
  auto relay = With(secret);
  // Person, operator, agent and public routes all refuse it.
  ExpectProblem(relay->Get("/api/v1/me"), 403, "relay_credential_not_allowed");
  ExpectProblem(relay->Get("/api/v1/instances"), 403, "relay_credential_not_allowed");
  ExpectProblem(relay->Get("/api/v1/admin/relays"), 403, "relay_credential_not_allowed");
  ExpectProblem(relay->PostJson("/api/v1/admin/relays", {{"name", "edge-2"}}), 403,
                "relay_credential_not_allowed");
  ExpectProblem(relay->Get("/api/v1/admin/relay-sessions"), 403, "relay_credential_not_allowed");
  ExpectProblem(relay->PostJson("/api/v1/agent/sync", json::object()), 403,
                "relay_credential_not_allowed");
  ExpectProblem(relay->PostJson("/api/v1/auth/login", {{"email", "op@example.test"},
                                                       {"password", "operator password 1"}}),
                403, "relay_credential_not_allowed");
  // …and it opens the relay's routes.
  EXPECT_EQ(relay->PostJson("/api/v1/relay/restarted", json::object()).status, 200);
}

TEST_F(RelayCredentialsApiTest, TheRelaysRoutesTakeNothingButARelayCredential) {
  const json in = RunningInstance("alpha");
  const json body = protocol::ToJson(relay::ToWire(LoginTo(in["hostname"])));
  // An operator's API token, an operator's sign-in, a host token: the wrong kind (403).
  ExpectProblem(With(op_token_)->PostJson("/api/v1/relay/authorize", body), 403,
                "relay_credential_required");
  ExpectProblem(op_->PostJson("/api/v1/relay/authorize", body), 403, "relay_credential_required");
  ExpectProblem(With(host_token_)->PostJson("/api/v1/relay/authorize", body), 403,
                "relay_credential_required");
  ExpectProblem(With(op_token_)->Get("/api/v1/relay/watch"), 403, "relay_credential_required");
  // None, or one that was never issued (401).
  ExpectProblem(Browser()->PostJson("/api/v1/relay/authorize", body), 401, "unauthenticated");
  ExpectProblem(With("gwr_" + std::string(43, 'A'))->PostJson("/api/v1/relay/authorize", body), 401,
                "unauthenticated");
  // The operator's own token still works where it belongs.
  EXPECT_EQ(With(op_token_)->Get("/api/v1/admin/relays").status, 200);
}

TEST_F(RelayCredentialsApiTest, BadNamesAndDuplicatesAreRefusedAndStoreNothing) {
  ASSERT_EQ(op_->PostJson("/api/v1/admin/relays", {{"name", "edge-1"}}).status, 201);
  const int64_t audit_before = Count("SELECT COUNT(*) FROM audit_events");
  ExpectProblem(op_->PostJson("/api/v1/admin/relays", {{"name", "edge-1"}}), 409, "name_taken");
  ExpectProblem(op_->PostJson("/api/v1/admin/relays", {{"name", ""}}), 400, "invalid_name");
  ExpectProblem(op_->PostJson("/api/v1/admin/relays", {{"name", std::string(129, 'a')}}), 400,
                "invalid_name");
  ExpectProblem(op_->PostJson("/api/v1/admin/relays", {{"name", std::string(100000, 'a')}}), 400,
                "invalid_name");
  for (const char* bad :
       {"edge\n1", "edge\x1b[31m", "edge\x7f", "edge 1", "Edge-1", "-edge", "edge/1",
        "\xe2\x80\xae"
        "edge"}) {
    ExpectProblem(op_->PostJson("/api/v1/admin/relays", {{"name", bad}}), 400, "invalid_name");
  }
  ExpectProblem(op_->PostJson("/api/v1/admin/relays", {{"name", "local"}}), 400, "reserved_name");
  ExpectProblem(op_->PostJson("/api/v1/admin/relays", {{"name", 7}}), 400, "invalid_field");
  ExpectProblem(op_->PostJson("/api/v1/admin/relays", json::object()), 400, "invalid_field");
  ExpectProblem(op_->PostJson("/api/v1/admin/relays", {{"name", "edge-2"}, {"admin", true}}), 400,
                "invalid_field");
  // Not an operator.
  ExpectProblem(alice_->PostJson("/api/v1/admin/relays", {{"name", "edge-3"}}), 403, "forbidden");
  ExpectProblem(alice_->Get("/api/v1/admin/relays"), 403, "forbidden");
  ExpectProblem(alice_->Delete("/api/v1/admin/relays/edge-1"), 403, "forbidden");
  // Nothing stored, nothing audited.
  EXPECT_EQ(Count("SELECT COUNT(*) FROM relay_credentials"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events"), audit_before);
  EXPECT_EQ(op_->Get("/api/v1/admin/relays").Json()["total"], 1);
}

TEST_F(RelayCredentialsApiTest, CliAddsListsAndRevokesRelays) {
  auto added = Gpuwerk(op_token_, "admin relays add edge-1");
  ASSERT_EQ(added.exit_code, 0) << added.err;
  EXPECT_NE(added.out.find("gwr_"), std::string::npos) << added.out;
  EXPECT_NE(added.out.find("GPUWERK_RELAY_TOKEN"), std::string::npos) << added.out;
  auto added_json = Gpuwerk(op_token_, "admin relays add edge-2 --json");
  ASSERT_EQ(added_json.exit_code, 0) << added_json.err;
  const json two = json::parse(added_json.out);
  EXPECT_EQ(two["name"], "edge-2");
  EXPECT_TRUE(two["token"].get<std::string>().starts_with("gwr_")) << two;

  auto table = Gpuwerk(op_token_, "admin relays list");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("edge-1"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("edge-2"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find(two["token"].get<std::string>()), std::string::npos) << table.out;
  auto listed = Gpuwerk(op_token_, "admin relays list --json");
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(json::parse(listed.out).size(), 2u) << listed.out;

  auto duplicate = Gpuwerk(op_token_, "admin relays add edge-1");
  EXPECT_EQ(duplicate.exit_code, 1);
  EXPECT_NE(duplicate.err.find("name_taken"), std::string::npos) << duplicate.err;
  auto revoked = Gpuwerk(op_token_, "admin relays revoke edge-1 --json");
  ASSERT_EQ(revoked.exit_code, 0) << revoked.err;
  EXPECT_EQ(json::parse(revoked.out)["revoked"], true);
  auto again = Gpuwerk(op_token_, "admin relays revoke edge-1");
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("not_found"), std::string::npos) << again.err;
  // The relay's credential is no client credential.
  auto as_relay = Gpuwerk(two["token"].get<std::string>(), "admin relays list");
  EXPECT_EQ(as_relay.exit_code, 1);
  EXPECT_NE(as_relay.err.find("relay_credential_not_allowed"), std::string::npos) << as_relay.err;
}

}  // namespace
}  // namespace gpuwerk::testing
