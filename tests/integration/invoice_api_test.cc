// Invoices and the usage history over real HTTP (R-13, R-16, issue 13): a fake agent reports a
// container for a while, the instance is deleted, the usage row and (after the operator closes
// the month) the invoice line agree to the minor unit; the admin routes are operators' only; the
// CSV export answers text/csv (its formula-injection guard: billing's invoices_test); usage by
// day at a UTC offset. The server runs on the test's FakeClock.
#include <gtest/gtest.h>

#include "core/time_format.h"
#include "tests/integration/queue_fixture.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

class InvoiceApiTest : public QueueFixture {
 protected:
  /// Moves the server's clock to `rfc3339`.
  void SetNow(const char* rfc3339) {
    clock_.Advance(std::chrono::seconds(core::ParseRfc3339(rfc3339).value() - clock_.NowUnix()));
  }
  /// A payment method on file for `email`'s solo account, straight into the store (the launch
  /// gate, R-14, is not what this test is about).
  void GiveCard(const std::string& email) {
    ASSERT_TRUE(app_->database().Write([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_ASSIGN_OR_RETURN(auto p,
                               tx.QueryOne("SELECT id FROM persons WHERE email = ?", {email}));
      GPUWERK_TRY(tx.Exec(
          "INSERT INTO payment_methods (billing_account_id, provider, brand, last4, exp_month, "
          "exp_year, provider_ref, created_at, updated_at) VALUES (?, 'manual', 'visa', '4242', "
          "12, 2099, '', 0, 0) ON CONFLICT DO NOTHING",
          {"solo_" + p->Text("id")}));
      return {};
    }));
  }
  json Container(const std::string& instance_id) {
    return json::array({{{"instance_id", instance_id},
                         {"node_index", 0},
                         {"container_id", "c1"},
                         {"state", "running"},
                         {"exit_code", 0},
                         {"started_at", "2027-01-15T08:00:01Z"},
                         {"finished_at", "0001-01-01T00:00:00Z"},
                         {"ssh_port", 40123},
                         {"ssh_ready", true},
                         {"restart_generation", 0},
                         {"error", ""}}});
  }
};

TEST_F(InvoiceApiTest, UsageRowAndInvoiceLineAgreeAndOnlyOperatorsCloseMonths) {
  // The fixture's clock starts at 2027-01-15T08:00:00Z: January is the month billed.
  Person alice = NewPerson("alice@example.test");
  GiveCard("alice@example.test");
  AddHost("spark-a");
  auto made = Create(alice, "alpha");
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = made.Json()["id"];
  // 61 minutes of reports every 10 s, then a delete: 3660 s → 61 minutes.
  for (int i = 0; i < 366; ++i) {
    clock_.Advance(std::chrono::seconds(10));
    ASSERT_EQ(Sync("spark-a", Container(id)).status, 200);
  }
  // Live: the amount so far.
  auto live = alice.browser->Get("/api/v1/usage/sessions");
  ASSERT_EQ(live.status, 200) << live.body;
  ASSERT_EQ(live.Json()["items"].size(), 1u);
  EXPECT_EQ(live.Json()["items"][0]["active"], true);
  EXPECT_EQ(live.Json()["items"][0]["minutes"], 61);
  EXPECT_EQ(live.Json()["items"][0]["ended_at"], nullptr);
  ASSERT_EQ(alice.browser->Send("DELETE", "/api/v1/instances/" + id, "", {}).status, 204);
  clock_.Advance(std::chrono::hours(3));

  auto usage = alice.browser->Get("/api/v1/usage/sessions");
  ASSERT_EQ(usage.status, 200) << usage.body;
  const json row = usage.Json()["items"][0];
  EXPECT_EQ(row["active"], false);
  EXPECT_EQ(row["instance_id"], id);
  EXPECT_EQ(row["gpu_type"], "spark-1x");
  EXPECT_EQ(row["duration_seconds"], 3660);
  EXPECT_EQ(row["minutes"], 61);
  EXPECT_EQ(row["amount_minor"], 66);  // 65 an hour × 61 minutes = 66.08
  EXPECT_EQ(row["currency"], "usd");
  EXPECT_EQ(row["amount"], "0.66 USD");
  EXPECT_EQ(usage.Json().count("next"), 0u);
  EXPECT_EQ(usage.Json()["total"], 1);
  ExpectProblem(alice.browser->Get("/api/v1/usage/sessions?before=nonsense"), 400,
                "invalid_cursor");
  // The running total says what January's invoice will: the usage row's amount.
  const json running = alice.browser->Get("/api/v1/billing").Json()["current_month"];
  EXPECT_EQ(running["month"], "2027-01");
  ASSERT_EQ(running["totals"].size(), 1u) << running.dump();
  EXPECT_EQ(running["totals"][0]["currency"], "usd");
  EXPECT_EQ(running["totals"][0]["amount_minor"], 66);
  EXPECT_EQ(running["totals"][0]["amount"], "0.66 USD");

  // People cannot close or export; signed out is 401.
  ExpectProblem(alice.browser->PostJson("/api/v1/admin/invoices/close", {{"month", "2027-01"}}),
                403, "forbidden");
  ExpectProblem(alice.browser->Get("/api/v1/admin/invoices/export?month=2027-01"), 403,
                "forbidden");
  HttpClient nobody(app_->base_url());
  ExpectProblem(nobody.Get("/api/v1/billing/invoices"), 401, "unauthenticated");
  ExpectProblem(nobody.Get("/api/v1/usage/sessions"), 401, "unauthenticated");
  // January has not ended.
  ExpectProblem(op_->PostJson("/api/v1/admin/invoices/close", {{"month", "2027-01"}}), 409,
                "month_not_ended");
  ExpectProblem(op_->PostJson("/api/v1/admin/invoices/close", {{"month", "2026-13"}}), 400,
                "invalid_month");
  EXPECT_EQ(alice.browser->Get("/api/v1/billing/invoices").Json()["items"].size(), 0u);

  SetNow("2027-02-01T00:00:05Z");
  auto closed = op_->PostJson("/api/v1/admin/invoices/close", {{"month", "2027-01"}});
  ASSERT_EQ(closed.status, 200) << closed.body;
  EXPECT_EQ(closed.Json()["invoices_created"], 1);
  // The manual provider collects nothing itself: nothing is pushed anywhere.
  EXPECT_TRUE(closed.Json()["push"].is_null()) << closed.body;
  auto again = op_->PostJson("/api/v1/admin/invoices/close", {{"month", "2027-01"}});
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.Json()["invoices_created"], 0);
  EXPECT_EQ(again.Json()["already_closed"], true);
  EXPECT_EQ(again.Json()["invoices"], 1);

  auto invoices = alice.browser->Get("/api/v1/billing/invoices");
  ASSERT_EQ(invoices.status, 200) << invoices.body;
  ASSERT_EQ(invoices.Json()["items"].size(), 1u);
  const json inv = invoices.Json()["items"][0];
  EXPECT_EQ(inv["month"], "2027-01");
  EXPECT_EQ(inv["total_minor"], 66);
  EXPECT_EQ(inv["total_minor"], running["totals"][0]["amount_minor"]);
  // February has nothing billed yet.
  const json february = alice.browser->Get("/api/v1/billing").Json()["current_month"];
  EXPECT_EQ(february["month"], "2027-02");
  EXPECT_EQ(february["totals"].size(), 0u);
  ASSERT_EQ(inv["lines"].size(), 1u);
  EXPECT_EQ(inv["lines"][0]["billing_session_id"], row["billing_session_id"]);
  EXPECT_EQ(inv["lines"][0]["minutes"], row["minutes"]);
  EXPECT_EQ(inv["lines"][0]["amount_minor"], row["amount_minor"]);
  EXPECT_EQ(inv["lines"][0]["currency"], row["currency"]);

  auto csv = op_->Get("/api/v1/admin/invoices/export?month=2027-01");
  ASSERT_EQ(csv.status, 200) << csv.body;
  EXPECT_NE(csv.body.find("," + std::string(row["billing_session_id"]) + ","), std::string::npos)
      << csv.body;
  EXPECT_TRUE(csv.body.starts_with("invoice_id,billing_account_id,month,")) << csv.body;
  EXPECT_NE(csv.body.find(",alpha,spark-1x,"), std::string::npos) << csv.body;
  ExpectProblem(op_->Get("/api/v1/admin/invoices/export"), 400, "invalid_month");
  // The close is audited.
  auto audited = app_->database().Read([&](store::Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto n, tx.QueryOne("SELECT COUNT(*) FROM audit_events WHERE action = "
                                                 "'billing.month_close' AND target = '2027-01'"));
    return n->Int(0);
  });
  EXPECT_EQ(*audited, 1);
}

TEST_F(InvoiceApiTest, UsageByDaySplitsMinutesAtTheAskedOffsetAndRoundsOncePerDay) {
  // 21:50 UTC is 23:50 at UTC+02:00: 20 minutes of running cross that day's midnight.
  SetNow("2027-01-15T21:50:00Z");
  Person alice = NewPerson("alice@example.test");
  GiveCard("alice@example.test");
  AddHost("spark-a");
  auto made = Create(alice, "alpha");
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = made.Json()["id"];
  for (int i = 0; i < 120; ++i) {
    clock_.Advance(std::chrono::seconds(10));
    ASSERT_EQ(Sync("spark-a", Container(id)).status, 200);
  }
  ASSERT_EQ(alice.browser->Send("DELETE", "/api/v1/instances/" + id, "", {}).status, 204);

  // At UTC+02:00 (now 2027-01-16 00:10 there): 10 minutes on the 15th, 10 on the 16th, each
  // 65 an hour × 10 minutes = 10.83 → 11, rounded once for its day.
  auto east = alice.browser->Get("/api/v1/usage/daily?days=3&utc_offset_minutes=120");
  ASSERT_EQ(east.status, 200) << east.body;
  const json e = east.Json();
  EXPECT_EQ(e["utc_offset"], "+02:00");
  EXPECT_EQ(e["utc_offset_minutes"], 120);
  EXPECT_EQ(e["as_of"], "2027-01-15T22:10:00Z");
  ASSERT_EQ(e["days"].size(), 3u) << east.body;
  EXPECT_EQ(e["days"][0]["date"], "2027-01-14");
  EXPECT_EQ(e["days"][0]["start"], "2027-01-14T00:00:00+02:00");
  EXPECT_EQ(e["days"][0]["minutes"], 0);
  EXPECT_EQ(e["days"][0]["totals"], json::array());
  EXPECT_EQ(e["days"][1]["date"], "2027-01-15");
  EXPECT_EQ(e["days"][1]["minutes"], 10);
  EXPECT_EQ(e["days"][2]["date"], "2027-01-16");
  EXPECT_EQ(e["days"][2]["start"], "2027-01-16T00:00:00+02:00");
  EXPECT_EQ(e["days"][2]["minutes"], 10);
  for (int day : {1, 2}) {
    ASSERT_EQ(e["days"][day]["totals"].size(), 1u) << east.body;
    EXPECT_EQ(e["days"][day]["totals"][0]["currency"], "usd");
    EXPECT_EQ(e["days"][day]["totals"][0]["amount_minor"], 11);
    EXPECT_EQ(e["days"][day]["totals"][0]["amount"], "0.11 USD");
  }
  // UTC days (the default offset): all 20 minutes on the 15th, 21.67 → 22 once for the day.
  auto utc = alice.browser->Get("/api/v1/usage/daily?days=2");
  ASSERT_EQ(utc.status, 200) << utc.body;
  const json u = utc.Json();
  EXPECT_EQ(u["utc_offset"], "+00:00");
  ASSERT_EQ(u["days"].size(), 2u) << utc.body;
  EXPECT_EQ(u["days"][1]["date"], "2027-01-15");
  EXPECT_EQ(u["days"][1]["start"], "2027-01-15T00:00:00+00:00");
  EXPECT_EQ(u["days"][1]["minutes"], 20);
  EXPECT_EQ(u["days"][1]["totals"][0]["amount_minor"], 22);
  // West of UTC: at UTC-05:00 it is still the 15th (17:10), all of it on that day.
  auto west = alice.browser->Get("/api/v1/usage/daily?utc_offset_minutes=-300");
  ASSERT_EQ(west.status, 200) << west.body;
  EXPECT_EQ(west.Json()["utc_offset"], "-05:00");
  ASSERT_EQ(west.Json()["days"].size(), 30u);  // the default
  EXPECT_EQ(west.Json()["days"][29]["date"], "2027-01-15");
  EXPECT_EQ(west.Json()["days"][29]["start"], "2027-01-15T00:00:00-05:00");
  EXPECT_EQ(west.Json()["days"][29]["minutes"], 20);

  // Another person sees none of it.
  Person bob = NewPerson("bob@example.test");
  auto theirs = bob.browser->Get("/api/v1/usage/daily?days=2");
  ASSERT_EQ(theirs.status, 200) << theirs.body;
  EXPECT_EQ(theirs.Json()["days"][1]["minutes"], 0);

  for (const char* bad : {"days=0", "days=93", "days=thirty", "days=", "days=3.5"}) {
    ExpectProblem(alice.browser->Get(std::string("/api/v1/usage/daily?") + bad), 400,
                  "invalid_days");
  }
  for (const char* bad : {"utc_offset_minutes=841", "utc_offset_minutes=-841",
                          "utc_offset_minutes=%2B02:00", "utc_offset_minutes=x"}) {
    ExpectProblem(alice.browser->Get(std::string("/api/v1/usage/daily?") + bad), 400,
                  "invalid_utc_offset");
  }
  HttpClient nobody(app_->base_url());
  ExpectProblem(nobody.Get("/api/v1/usage/daily"), 401, "unauthenticated");
}

}  // namespace
}  // namespace gpuwerk::testing
