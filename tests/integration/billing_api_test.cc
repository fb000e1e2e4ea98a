// The launch gate over real HTTP (R-14, docs/billing.md "Gating") with fake agents and the
// manual provider: 402 payment_method_required with nothing created for launch and restart,
// queue joins without a card, GET /me and GET /api/v1/billing, card setup under manual (409),
// removal keeping running instances running, the operator's card routes and who may call them,
// and a passed-over queue entry launched as soon as its owner's card is recorded.
#include <gtest/gtest.h>

#include "tests/integration/queue_fixture.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

class BillingApiTest : public QueueFixture {
 protected:
  int64_t Count(const std::string& sql) {
    auto n = app_->database().Read([&](store::Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(sql));
      return row->Int(0);
    });
    return n ? *n : -1;
  }
  /// The mails to `to` whose subject contains `part`, after delivering what is due.
  /// How many delivered mails to `to` have `part` in their subject, once there are at least
  /// `at_least` (waiting up to 10 s): the background outbox worker may hold a mail that
  /// DeliverMailNow then skips, so one read right after the drain can miss it.
  size_t MailsAbout(const std::string& to, const std::string& part, size_t at_least) {
    size_t n = 0;
    for (int i = 0; i < 200; ++i) {
      n = 0;
      for (const auto& m : Mails(to, 0)) n += m.subject.find(part) != std::string::npos ? 1 : 0;
      if (n >= at_least) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return n;
  }
};

TEST_F(BillingApiTest, LaunchWithoutACardIs402AndCreatesNothing) {
  AddHost("spark-a");
  Person alice = NewPerson("alice@example.test", Card::kNone);
  const std::vector<std::string> key = {"Idempotency-Key: launch-1"};
  auto r = Create(alice, "alpha", key);
  ExpectProblem(r, 402, "payment_method_required");
  EXPECT_NE(r.Json()["detail"].get<std::string>().find("ask your operator"), std::string::npos)
      << r.body;
  EXPECT_EQ(r.Json()["provider"], "manual");
  // Nothing: no instance, placement, billing session, audit event, nor an idempotency record
  // that a retry would replay.
  EXPECT_EQ(alice.browser->Get("/api/v1/instances").Json()["total"], 0);
  EXPECT_EQ(InstanceOn("spark-a"), "");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM instances"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM billing_sessions"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM idempotency_keys"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'instance.create'"), 0);
  // /me and /billing say so, and what to do.
  json me = alice.browser->Get("/api/v1/me").Json();
  EXPECT_EQ(me["billing"]["payment_method_on_file"], false);
  EXPECT_EQ(me["billing"]["account"]["kind"], "solo");
  EXPECT_EQ(me["billing"]["account"]["name"], "alice@example.test");
  json billing = alice.browser->Get("/api/v1/billing").Json();
  EXPECT_TRUE(billing["payment_method"].is_null());
  EXPECT_EQ(billing["provider"], "manual");
  EXPECT_NE(billing["how_to_add"].get<std::string>().find("operator"), std::string::npos);

  // The operator records her card: the same key now creates (no replay of the refusal).
  ASSERT_TRUE(RecordCard(*op_, "alice@example.test"));
  me = alice.browser->Get("/api/v1/me").Json();
  EXPECT_EQ(me["billing"]["payment_method_on_file"], true);
  billing = alice.browser->Get("/api/v1/billing").Json();
  EXPECT_EQ(billing["payment_method"]["brand"], "visa");
  EXPECT_EQ(billing["payment_method"]["last4"], "4242");
  EXPECT_EQ(billing["payment_method"]["exp_month"], 12);
  EXPECT_EQ(billing["payment_method"]["exp_year"], 2099);
  EXPECT_EQ(billing["payment_method"]["provider"], "manual");
  EXPECT_NE(billing["payment_method"]["description"].get<std::string>().find("manual"),
            std::string::npos);
  EXPECT_TRUE(billing["how_to_add"].is_null());
  auto created = Create(alice, "alpha", key);
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(InstanceOn("spark-a"), created.Json()["id"]);
}

TEST_F(BillingApiTest, RemovingTheCardKeepsTheInstanceRunningAndRefusesRestarts) {
  AddHost("spark-a");
  Person alice = NewPerson("alice@example.test");
  auto created = Create(alice, "alpha");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.Json()["id"];
  ASSERT_EQ(Sync("spark-a", json::array({{{"instance_id", id},
                                          {"node_index", 0},
                                          {"container_id", "c1"},
                                          {"state", "running"},
                                          {"exit_code", 0},
                                          {"started_at", "2026-11-30T04:10:03Z"},
                                          {"ssh_port", 40123},
                                          {"ssh_ready", true},
                                          {"restart_generation", 0},
                                          {"error", ""}}}))
                .status,
            200);
  auto removed = alice.browser->Delete("/api/v1/billing/payment-method");
  ASSERT_EQ(removed.status, 200) << removed.body;
  EXPECT_EQ(removed.Json()["removed"]["last4"], "4242");
  EXPECT_TRUE(removed.Json()["payment_method"].is_null());
  const std::string message = removed.Json()["message"];
  EXPECT_NE(message.find("keep running"), std::string::npos) << message;
  EXPECT_NE(message.find("refused"), std::string::npos) << message;
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = "
                  "'billing.payment_method_remove'"),
            1);
  // Removing again: nothing on file.
  ExpectProblem(alice.browser->Delete("/api/v1/billing/payment-method"), 404, "not_found");
  // The instance keeps running and billing; a restart is refused and changes nothing.
  json in = alice.browser->Get("/api/v1/instances/" + id).Json();
  EXPECT_EQ(in["status"], "running");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM billing_sessions WHERE ended_at IS NULL"), 1);
  auto restart = alice.browser->PostJson("/api/v1/instances/" + id + "/restart", json::object());
  ExpectProblem(restart, 402, "payment_method_required");
  EXPECT_NE(restart.Json()["detail"].get<std::string>().find("Restarting"), std::string::npos);
  in = alice.browser->Get("/api/v1/instances/" + id).Json();
  EXPECT_EQ(in["restart_generation"], 0);
  EXPECT_EQ(in["status"], "running");
  // A new launch is refused too; deleting needs no card.
  ExpectProblem(Create(alice, "beta"), 402, "payment_method_required");
  EXPECT_EQ(alice.browser->Delete("/api/v1/instances/" + id).status, 204);
}

TEST_F(BillingApiTest, JoiningAQueueNeedsNoCard) {
  Person alice = NewPerson("alice@example.test", Card::kNone);
  // A type that is not online: a create enters its queue (202), card or not.
  auto queued = Create(alice, "waiting", {}, "spark-2x");
  ASSERT_EQ(queued.status, 202) << queued.body;
  EXPECT_EQ(queued.Json()["queued"], true);
  // And a direct join of an online, full type.
  AddHost("spark-a");
  Person holder = NewPerson("holder@example.test");
  ASSERT_EQ(Create(holder, "busy").status, 201);
  auto joined = Join(alice, "later");
  ASSERT_EQ(joined.status, 201) << joined.body;
  EXPECT_EQ(joined.Json()["status"], "open");
}

TEST_F(BillingApiTest, CardSetupUnderTheManualProviderSaysToAskTheOperator) {
  Person alice = NewPerson("alice@example.test", Card::kNone);
  auto r = alice.browser->PostJson("/api/v1/billing/card-setup", json::object());
  ExpectProblem(r, 409, "manual_provider");
  EXPECT_NE(r.Json()["detail"].get<std::string>().find("operator"), std::string::npos) << r.body;
  EXPECT_TRUE(alice.browser->Get("/api/v1/billing").Json()["payment_method"].is_null());
}

TEST_F(BillingApiTest, OnlyOperatorsRecordAndClearCards) {
  Person alice = NewPerson("alice@example.test", Card::kNone);
  Person bob = NewPerson("bob@example.test", Card::kNone);
  const std::string path = AdminCardPath("alice@example.test");
  const std::string card = TestCardJson().dump();
  const std::vector<std::string> json_type = {"Content-Type: application/json"};
  // A person (not an operator): 403, nothing recorded; signed out: 401.
  ExpectProblem(bob.browser->Send("PUT", path, card, json_type), 403, "forbidden");
  ExpectProblem(bob.browser->Delete(path), 403, "forbidden");
  auto signed_out = Browser();
  ExpectProblem(signed_out->Send("PUT", path, card, json_type), 401, "unauthenticated");
  ExpectProblem(signed_out->Get("/api/v1/billing"), 401, "unauthenticated");
  ExpectProblem(signed_out->Delete("/api/v1/billing/payment-method"), 401, "unauthenticated");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM payment_methods"), 0);
  // Bad cards and unknown people: nothing stored.
  ExpectProblem(
      op_->Send(
          "PUT", path,
          json{{"brand", "visa"}, {"last4", "42"}, {"exp_month", 12}, {"exp_year", 2099}}.dump(),
          json_type),
      400, "invalid_last4");
  ExpectProblem(op_->Send("PUT", path, json{{"brand", "visa"}}.dump(), json_type), 400,
                "invalid_field");
  ExpectProblem(op_->Send("PUT", AdminCardPath("nobody@example.test"), card, json_type), 404,
                "not_found");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM payment_methods"), 0);
  // The operator: recorded and cleared, each audited.
  ASSERT_TRUE(RecordCard(*op_, "alice@example.test"));
  EXPECT_EQ(alice.browser->Get("/api/v1/billing").Json()["payment_method"]["last4"], "4242");
  auto cleared = op_->Delete(path);
  ASSERT_EQ(cleared.status, 200) << cleared.body;
  EXPECT_EQ(cleared.Json()["removed"]["last4"], "4242");
  auto again = op_->Delete(path);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_TRUE(again.Json()["removed"].is_null());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'billing.set_card'"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'billing.clear_card'"), 1);
}

// A free host, an entry whose owner has no card: passed over at every drain (one mail), keeps
// its place; the card recorded by the operator launches it at once, ahead of a later entry.
TEST_F(BillingApiTest, PassedOverEntryLaunchesWhenTheCardIsRecorded) {
  AddHost("spark-a");
  Person holder = NewPerson("holder@example.test");
  ASSERT_EQ(Create(holder, "busy").status, 201);
  Person alice = NewPerson("alice@example.test", Card::kNone);
  Person bob = NewPerson("bob@example.test");
  ASSERT_EQ(Join(alice, "first").status, 201);
  ASSERT_EQ(Join(bob, "second").status, 201);
  // The host frees: alice is passed over, bob launches.
  ASSERT_EQ(holder.browser->Delete("/api/v1/instances/" + InstanceOn("spark-a")).status, 204);
  ASSERT_EQ(Sync("spark-a").status, 200);
  const std::string bobs = InstanceOn("spark-a");
  ASSERT_FALSE(bobs.empty());
  EXPECT_EQ(bob.browser->Get("/api/v1/instances").Json()["total"], 1);
  // Freed again, and drained several times while alice has no card: one mail only.
  ASSERT_EQ(bob.browser->Delete("/api/v1/instances/" + bobs).status, 204);
  ASSERT_EQ(Sync("spark-a").status, 200);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(app_->DrainQueuesNow());
  EXPECT_EQ(InstanceOn("spark-a"), "");
  json entry = alice.browser->Get("/api/v1/queue-entries").Json()["items"][0];
  EXPECT_EQ(entry["position"], 1);
  EXPECT_EQ(entry["status"], "open");
  EXPECT_NE(entry["last_failure"].get<std::string>().find("payment method"), std::string::npos);
  EXPECT_EQ(MailsAbout("alice@example.test", "passed over", 1), 1u);
  // The card: launched at once, no drain needed.
  ASSERT_TRUE(RecordCard(*op_, "alice@example.test"));
  const std::string alices = InstanceOn("spark-a");
  ASSERT_FALSE(alices.empty());
  EXPECT_EQ(alice.browser->Get("/api/v1/instances/" + alices).Json()["name"], "first");
  EXPECT_EQ(MailsAbout("alice@example.test", "passed over", 1), 1u);
}

}  // namespace
}  // namespace gpuwerk::testing
