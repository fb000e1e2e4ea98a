// billing: the month close, invoices, the CSV export and the usage history against a real store
// (R-13, R-16, docs/billing.md "Invoices", "Usage history"). Times are chosen, never read.
#include "billing/invoices.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "billing/charges.h"
#include "billing/invoice_pusher.h"
#include "billing/payment_method_table.h"
#include "billing/usage_history.h"
#include "core/logging.h"
#include "core/time_format.h"
#include "tests/support/temp_database.h"

namespace gpuwerk::billing {
namespace {

constexpr int64_t kSilentAfter = 30;

int64_t At(const char* rfc3339) { return core::ParseRfc3339(rfc3339).value(); }

class InvoicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::InitCrypto();
    ASSERT_TRUE(db_.Open());
    AddPerson("per_a");
    AddPerson("per_b");
    invoices_ = std::make_unique<Invoices>(*db_, clock_, rng_, kSilentAfter);
    usage_ = std::make_unique<UsageHistory>(*db_, clock_, kSilentAfter);
  }
  void TearDown() override {
    invoices_.reset();
    usage_.reset();
    db_.reset();
  }
  void AddPerson(const std::string& id) {
    ASSERT_TRUE(db_->Write([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_TRY(
          tx.Exec("INSERT INTO persons (id, email, email_norm, created_at) VALUES (?, ?, ?, 0)",
                  {id, id + "@example.test", id + "@example.test"}));
      return {};
    }));
  }
  /// A session of `person` from `start` to `end` (nullopt: active) with evidence up to its end
  /// (or `evidence_at`), at 65 minor units an hour unless told, billed to `account` (default
  /// their solo account).
  void AddSession(const std::string& id, const std::string& person, int64_t start,
                  std::optional<int64_t> end, int64_t price = 65,
                  const std::string& currency = "usd",
                  std::optional<int64_t> evidence_at = std::nullopt,
                  const std::string& account = "") {
    ASSERT_TRUE(db_->Write([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_TRY(BillingSessionTable::Insert(
          tx, {.id = id,
               .instance_id = "ins_" + id,
               .person_id = person,
               .billing_account_id = account.empty() ? SoloBillingAccountId(person) : account,
               .instance_name = "name-" + id,
               .gpu_type = "spark-1x",
               .price_minor_per_hour = price,
               .currency = currency,
               .started_at = start,
               .evidence_at = evidence_at.value_or(end.value_or(start))}));
      if (end) GPUWERK_TRY(BillingSessionTable::End(tx, id, *end));
      return {};
    }));
  }
  /// Moves the clock to `t` (Unix seconds).
  void SetNow(int64_t t) { clock_.Advance(std::chrono::seconds(t - clock_.NowUnix())); }
  int64_t Count(const std::string& sql) {
    auto n = db_->Read([&](store::Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(sql));
      return row->Int(0);
    });
    return n ? *n : -1;
  }
  /// Every line of every invoice checked against the sessions table: its minutes and amount are
  /// what SessionCharges gives for that session and month, its price the session's; each invoice's
  /// total is the sum of its lines.
  void ExpectLinesMatchSessions(const std::string& month, int64_t now) {
    auto all = db_->Read([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_ASSIGN_OR_RETURN(auto invoices, InvoiceTable::OfMonth(tx, month));
      for (const InvoiceRow& inv : invoices) {
        int64_t sum = 0;
        for (const InvoiceLineRow& l : inv.lines) {
          sum += l.amount_minor;
          GPUWERK_ASSIGN_OR_RETURN(auto s, BillingSessionTable::Find(tx, l.session_id));
          EXPECT_TRUE(s);
          if (!s) continue;
          GPUWERK_ASSIGN_OR_RETURN(auto gaps, BillingSessionTable::Gaps(tx, l.session_id));
          EXPECT_EQ(s->billing_account_id, inv.billing_account_id);
          EXPECT_EQ(s->currency, inv.currency);
          EXPECT_EQ(s->price_minor_per_hour, l.price_minor_per_hour);
          bool found = false;
          for (const MonthCharge& c : SessionCharges(*s, gaps, now, kSilentAfter)) {
            if (MonthLabel(c.month_start) != month) continue;
            found = true;
            EXPECT_EQ(c.minutes, l.minutes) << l.session_id;
            EXPECT_EQ(c.amount_minor, l.amount_minor) << l.session_id;
            EXPECT_EQ(LineAmountMinor(s->price_minor_per_hour, l.minutes), l.amount_minor);
          }
          EXPECT_TRUE(found) << l.session_id;
        }
        EXPECT_EQ(inv.total_minor, sum) << inv.id;
      }
      return {};
    });
    ASSERT_TRUE(all) << all.error().message;
  }

  gpuwerk::testing::TempDatabase db_;
  core::FakeClock clock_{At("2026-12-01T02:00:00Z")};
  core::SodiumRng rng_;
  std::unique_ptr<Invoices> invoices_;
  std::unique_ptr<UsageHistory> usage_;
};

TEST_F(InvoicesTest, ClosingAMonthMakesOneInvoicePerAccountWithOneLinePerSession) {
  // per_a: 61 minutes and 1 second (→ 62 minutes) and 1 second (→ 1 minute); per_b: 60 s (→ 1).
  AddSession("bil_a1", "per_a", At("2026-11-10T10:00:00Z"), At("2026-11-10T11:01:01Z"));
  AddSession("bil_a2", "per_a", At("2026-11-11T10:00:00Z"), At("2026-11-11T10:00:01Z"));
  AddSession("bil_b1", "per_b", At("2026-11-12T10:00:00Z"), At("2026-11-12T10:01:00Z"), 90);
  // Another month: not on November's invoices.
  AddSession("bil_a3", "per_a", At("2026-10-05T10:00:00Z"), At("2026-10-05T10:10:00Z"));

  auto closed = invoices_->CloseMonth("2026-11", "per_op", "10.0.0.1");
  ASSERT_TRUE(closed) << closed.error().message;
  EXPECT_EQ(closed->invoices_created, 2);
  EXPECT_EQ(closed->lines_created, 3);
  EXPECT_FALSE(closed->already_closed);

  auto a = invoices_->ForPerson("per_a");
  ASSERT_TRUE(a);
  ASSERT_EQ(a->size(), 1u);
  EXPECT_EQ((*a)[0].month, "2026-11");
  EXPECT_EQ((*a)[0].currency, "usd");
  ASSERT_EQ((*a)[0].lines.size(), 2u);
  EXPECT_EQ((*a)[0].lines[0].session_id, "bil_a1");
  EXPECT_EQ((*a)[0].lines[0].minutes, 62);
  EXPECT_EQ((*a)[0].lines[0].amount_minor, 67);  // 65 × 62 / 60 = 67.17
  EXPECT_EQ((*a)[0].lines[1].minutes, 1);
  EXPECT_EQ((*a)[0].lines[1].amount_minor, 1);  // 1.08
  EXPECT_EQ((*a)[0].total_minor, 68);
  auto b = invoices_->ForPerson("per_b");
  ASSERT_TRUE(b);
  ASSERT_EQ(b->size(), 1u);
  EXPECT_EQ((*b)[0].lines[0].amount_minor, 2);  // 90 × 1 / 60 = 1.5 → 2
  ExpectLinesMatchSessions("2026-11", clock_.NowUnix());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'billing.month_close' AND "
                  "target = '2026-11' AND actor_id = 'per_op'"),
            1);
}

TEST_F(InvoicesTest, ClosingTwiceOrConcurrentlyMakesOneInvoice) {
  for (int i = 0; i < 20; ++i) {
    AddSession("bil_" + std::to_string(i), i % 2 ? "per_a" : "per_b",
               At("2026-11-10T10:00:00Z") + i * 600, At("2026-11-10T10:05:00Z") + i * 600);
  }
  std::vector<std::thread> threads;
  std::atomic<int> created{0}, failed{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      auto r = invoices_->CloseMonth("2026-11", "", "system");
      if (!r) {
        ++failed;
        return;
      }
      created += static_cast<int>(r->invoices_created);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(created, 2);
  auto again = invoices_->CloseMonth("2026-11", "", "system");
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->already_closed);
  EXPECT_EQ(again->invoices_created, 0);
  EXPECT_EQ(again->invoices, 2);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM invoices"), 2);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM invoice_lines"), 20);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM invoice_months_closed"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'billing.month_close'"), 1);
}

TEST_F(InvoicesTest, ASessionAcrossOneAndTwoMonthBoundariesIsSplitWithoutAnExtraMinute) {
  // 23:59:30 Oct 31 → 00:00:31 Nov 1: 61 s → 2 minutes, one in each month.
  AddSession("bil_one", "per_a", At("2026-10-31T23:59:30Z"), At("2026-11-01T00:00:31Z"));
  // Oct 31 23:00 → Dec 1 01:00 (still running on Dec 1, 02:00): 60 + 43200 + 60 minutes.
  AddSession("bil_two", "per_b", At("2026-10-31T23:00:00Z"), At("2026-12-01T01:00:00Z"));
  SetNow(At("2026-12-01T02:00:00Z"));
  for (const char* m : {"2026-10", "2026-11"}) ASSERT_TRUE(invoices_->CloseMonth(m, "", "system"));
  auto dec = invoices_->CloseMonth("2026-12", "", "system");
  ASSERT_FALSE(dec);
  EXPECT_EQ(dec.error().api_code, "month_not_ended");
  SetNow(At("2027-01-01T00:00:00Z"));
  ASSERT_TRUE(invoices_->CloseMonth("2026-12", "", "system"));

  auto minutes = [&](const std::string& session) {
    std::map<std::string, int64_t> out;
    auto rows = db_->Read([&](store::Transaction& tx) -> core::Result<std::vector<store::Row>> {
      return tx.Query(
          "SELECT i.month, l.minutes FROM invoice_lines l JOIN invoices i ON i.id = l.invoice_id "
          "WHERE l.session_id = ?",
          {session});
    });
    for (const auto& r : *rows) out[r.Text("month")] = r.Int("minutes");
    return out;
  };
  EXPECT_EQ(minutes("bil_one"), (std::map<std::string, int64_t>{{"2026-10", 1}, {"2026-11", 1}}));
  EXPECT_EQ(minutes("bil_two"),
            (std::map<std::string, int64_t>{{"2026-10", 60}, {"2026-11", 43200}, {"2026-12", 60}}));
  for (const char* m : {"2026-10", "2026-11", "2026-12"}) {
    ExpectLinesMatchSessions(m, clock_.NowUnix());
  }
  // The usage row is the sum of the session's lines.
  auto page = usage_->Sessions("per_b", "", "");
  ASSERT_TRUE(page);
  ASSERT_EQ(page->rows.size(), 1u);
  EXPECT_EQ(page->rows[0].minutes, 60 + 43200 + 60);
  EXPECT_EQ(page->rows[0].amount_minor,
            LineAmountMinor(65, 60) + LineAmountMinor(65, 43200) + LineAmountMinor(65, 60));
  EXPECT_FALSE(page->rows[0].active);
}

TEST_F(InvoicesTest, AnActiveSessionIsBilledUpToTheMonthEndAndItsLastSighting) {
  // Active since Nov 30 23:00 with its host reporting: November has its 60 minutes.
  AddSession("bil_live", "per_a", At("2026-11-30T23:00:00Z"), std::nullopt, 65, "usd",
             At("2026-12-01T01:59:50Z"));
  // Active, but its host fell silent at Nov 30 23:30: billed to the last sighting only.
  AddSession("bil_silent", "per_b", At("2026-11-30T23:00:00Z"), std::nullopt, 65, "usd",
             At("2026-11-30T23:30:00Z"));
  ASSERT_TRUE(invoices_->CloseMonth("2026-11", "", "system"));
  auto a = invoices_->ForPerson("per_a");
  ASSERT_TRUE(a);
  ASSERT_EQ(a->size(), 1u);
  EXPECT_EQ((*a)[0].lines[0].minutes, 60);
  auto b = invoices_->ForPerson("per_b");
  ASSERT_EQ(b->size(), 1u);
  EXPECT_EQ((*b)[0].lines[0].minutes, 30);
  ExpectLinesMatchSessions("2026-11", clock_.NowUnix());
  // The usage history shows the live row with its amount so far.
  auto page = usage_->Sessions("per_a", "", "");
  ASSERT_TRUE(page);
  ASSERT_EQ(page->rows.size(), 1u);
  EXPECT_TRUE(page->rows[0].active);
  EXPECT_EQ(page->rows[0].duration_seconds, 3 * 3600);
  EXPECT_EQ(page->rows[0].minutes, 180);
  EXPECT_EQ(page->rows[0].amount_minor, LineAmountMinor(65, 60) + LineAmountMinor(65, 120));
}

TEST_F(InvoicesTest, ASessionMovedToAnotherAccountAfterTheCloseIsNotBilledForThatMonthAgain) {
  // Active through November on per_a's solo account; November is closed, then the session moves
  // whole to a new team's account (teams::MoveSoloBillingToTeam) and November is closed again.
  AddSession("bil_open", "per_a", At("2026-11-30T23:00:00Z"), std::nullopt, 65, "usd",
             At("2026-12-01T01:59:50Z"));
  auto first = invoices_->CloseMonth("2026-11", "", "system");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->lines_created, 1);
  ASSERT_TRUE(db_->Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(
        int64_t moved,
        BillingSessionTable::MoveOpen(tx, "per_a", SoloBillingAccountId("per_a"), "team_new"));
    EXPECT_EQ(moved, 1);
    return {};
  }));
  auto again = invoices_->CloseMonth("2026-11", "", "system");
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->invoices_created, 0);
  EXPECT_EQ(again->lines_created, 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM invoices"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM invoice_lines WHERE session_id = 'bil_open'"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM invoices WHERE billing_account_id = 'team_new'"), 0);
}

TEST_F(InvoicesTest, ATeamMemberSeesOnlyTheirOwnLinesAndTheOwnerSeesThemAll) {
  // per_a owns team_t, per_b is a member; both launched billed to the team.
  Invoices team_invoices(
      *db_, clock_, rng_, kSilentAfter, [](store::Transaction&, const std::string& person) {
        return core::Result<BillingAccount>(BillingAccount{.id = "team_t",
                                                           .kind = AccountKind::kTeam,
                                                           .name = "t",
                                                           .may_manage = person == "per_a"});
      });
  AddSession("bil_own", "per_a", At("2026-11-10T10:00:00Z"), At("2026-11-10T11:00:00Z"), 65, "usd",
             std::nullopt, "team_t");
  AddSession("bil_mem", "per_b", At("2026-11-11T10:00:00Z"), At("2026-11-11T10:30:00Z"), 65, "usd",
             std::nullopt, "team_t");
  ASSERT_TRUE(team_invoices.CloseMonth("2026-11", "", "system"));
  auto owner = team_invoices.ForPerson("per_a");
  ASSERT_TRUE(owner);
  ASSERT_EQ(owner->size(), 1u);
  EXPECT_EQ((*owner)[0].lines.size(), 2u);
  EXPECT_EQ((*owner)[0].total_minor, LineAmountMinor(65, 60) + LineAmountMinor(65, 30));
  auto member = team_invoices.ForPerson("per_b");
  ASSERT_TRUE(member);
  ASSERT_EQ(member->size(), 1u);
  ASSERT_EQ((*member)[0].lines.size(), 1u);
  EXPECT_EQ((*member)[0].lines[0].session_id, "bil_mem");
  EXPECT_EQ((*member)[0].total_minor, LineAmountMinor(65, 30));
  // A member with no line of their own that month sees no invoice at all.
  AddPerson("per_c");
  auto other = team_invoices.ForPerson("per_c");
  ASSERT_TRUE(other);
  EXPECT_TRUE(other->empty());
}

TEST_F(InvoicesTest, TheRunningTotalIsWhatTheMonthsInvoiceThenSays) {
  // Clock: 2026-12-01T02:00Z; the running month is December. per_a: one ended session, one still
  // active (charged up to now: its last sighting is now), one in euros; a session per_a launched
  // billed to team_t is not per_a's solo account's (only sessions billed to the account count).
  SetNow(At("2026-12-20T12:00:00Z"));
  AddSession("bil_d1", "per_a", At("2026-12-10T10:00:00Z"), At("2026-12-10T11:01:01Z"));
  AddSession("bil_d2", "per_a", At("2026-12-20T11:00:00Z"), std::nullopt, 65, "usd",
             At("2026-12-20T12:00:00Z"));
  AddSession("bil_d3", "per_a", At("2026-12-11T10:00:00Z"), At("2026-12-11T10:10:00Z"), 100, "eur");
  AddSession("bil_dt", "per_a", At("2026-12-12T10:00:00Z"), At("2026-12-12T13:00:00Z"), 65, "usd",
             std::nullopt, "team_t");
  // November's session that ran into December: its December minutes are December's.
  AddSession("bil_nov", "per_a", At("2026-11-30T23:30:00Z"), At("2026-12-01T00:30:00Z"));
  AddSession("bil_b", "per_b", At("2026-12-13T10:00:00Z"), At("2026-12-13T10:05:00Z"));

  auto running = invoices_->CurrentMonthOf("per_a");
  ASSERT_TRUE(running) << running.error().message;
  EXPECT_EQ(running->month, "2026-12");
  EXPECT_EQ(running->as_of, At("2026-12-20T12:00:00Z"));
  const int64_t usd = LineAmountMinor(65, 62) + LineAmountMinor(65, 60) + LineAmountMinor(65, 30);
  EXPECT_EQ(running->totals,
            (std::vector<CurrencyTotal>{{"eur", LineAmountMinor(100, 10)}, {"usd", usd}}));

  // The active session ends now; December closes in January: the invoice says the same.
  ASSERT_TRUE(db_->Write([&](store::Transaction& tx) {
    return BillingSessionTable::End(tx, "bil_d2", At("2026-12-20T12:00:00Z"));
  }));
  SetNow(At("2027-01-01T02:00:00Z"));
  ASSERT_TRUE(invoices_->CloseMonth("2026-12", "", "system"));
  auto invoices = invoices_->ForPerson("per_a");
  ASSERT_TRUE(invoices);
  std::vector<CurrencyTotal> closed;
  for (const InvoiceRow& inv : *invoices) {
    if (inv.month == "2026-12") closed.push_back({inv.currency, inv.total_minor});
  }
  std::sort(closed.begin(), closed.end(),
            [](const auto& x, const auto& y) { return x.currency < y.currency; });
  EXPECT_EQ(closed, running->totals);
  // A new month with nothing billed yet: no totals.
  auto january = invoices_->CurrentMonthOf("per_a");
  ASSERT_TRUE(january);
  EXPECT_EQ(january->month, "2027-01");
  EXPECT_TRUE(january->totals.empty());
}

TEST_F(InvoicesTest, ATeamMembersRunningTotalIsTheirOwnLaunchesOnly) {
  Invoices team_invoices(
      *db_, clock_, rng_, kSilentAfter, [](store::Transaction&, const std::string& person) {
        return core::Result<BillingAccount>(BillingAccount{.id = "team_t",
                                                           .kind = AccountKind::kTeam,
                                                           .name = "t",
                                                           .may_manage = person == "per_a"});
      });
  SetNow(At("2026-12-20T12:00:00Z"));
  AddSession("bil_own", "per_a", At("2026-12-10T10:00:00Z"), At("2026-12-10T11:00:00Z"), 65, "usd",
             std::nullopt, "team_t");
  AddSession("bil_mem", "per_b", At("2026-12-11T10:00:00Z"), At("2026-12-11T10:30:00Z"), 65, "usd",
             std::nullopt, "team_t");
  auto owner = team_invoices.CurrentMonthOf("per_a");
  ASSERT_TRUE(owner);
  EXPECT_EQ(
      owner->totals,
      (std::vector<CurrencyTotal>{{"usd", LineAmountMinor(65, 60) + LineAmountMinor(65, 30)}}));
  auto member = team_invoices.CurrentMonthOf("per_b");
  ASSERT_TRUE(member);
  EXPECT_EQ(member->totals, (std::vector<CurrencyTotal>{{"usd", LineAmountMinor(65, 30)}}));
}

TEST_F(InvoicesTest, OneInvoicePerCurrency) {
  AddSession("bil_usd", "per_a", At("2026-11-10T10:00:00Z"), At("2026-11-10T11:00:00Z"), 65);
  AddSession("bil_jpy", "per_a", At("2026-11-11T10:00:00Z"), At("2026-11-11T11:00:00Z"), 100,
             "jpy");
  auto r = invoices_->CloseMonth("2026-11", "", "system");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->invoices_created, 2);
  auto a = invoices_->ForPerson("per_a");
  ASSERT_EQ(a->size(), 2u);
  std::set<std::string> currencies{(*a)[0].currency, (*a)[1].currency};
  EXPECT_EQ(currencies, (std::set<std::string>{"jpy", "usd"}));
  ExpectLinesMatchSessions("2026-11", clock_.NowUnix());
}

TEST_F(InvoicesTest, BackgroundCloseWaitsForTheGraceAndClosesOnce) {
  AddSession("bil_1", "per_a", At("2026-11-10T10:00:00Z"), At("2026-11-10T11:00:00Z"));
  SetNow(At("2026-12-01T00:30:00Z"));
  auto early = invoices_->CloseDueMonth();
  ASSERT_TRUE(early);
  EXPECT_FALSE(*early);
  SetNow(At("2026-12-01T01:00:00Z"));
  auto due = invoices_->CloseDueMonth();
  ASSERT_TRUE(due);
  ASSERT_TRUE(*due);
  EXPECT_EQ((*due)->month, "2026-11");
  EXPECT_EQ((*due)->invoices_created, 1);
  auto again = invoices_->CloseDueMonth();
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again);
}

TEST_F(InvoicesTest, BadMonthsAreRefused) {
  for (const char* m : {"2026-13", "2026-1", "november", ""}) {
    auto r = invoices_->CloseMonth(m, "", "system");
    ASSERT_FALSE(r) << m;
    EXPECT_EQ(r.error().api_code, "invalid_month") << m;
    EXPECT_EQ(invoices_->ExportCsv(m).error().api_code, "invalid_month") << m;
  }
  EXPECT_EQ(Count("SELECT COUNT(*) FROM invoices"), 0);
}

TEST_F(InvoicesTest, CsvExportEscapesFormulasAndQuotes) {
  ASSERT_TRUE(db_->Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_TRY(BillingSessionTable::Insert(tx, {.id = "bil_x",
                                                 .instance_id = "ins_x",
                                                 .person_id = "per_a",
                                                 .billing_account_id = "solo_per_a",
                                                 .instance_name = "=HYPERLINK(\"x\",\"y\")",
                                                 .gpu_type = "@spark",
                                                 .price_minor_per_hour = 65,
                                                 .currency = "usd",
                                                 .started_at = At("2026-11-10T10:00:00Z"),
                                                 .evidence_at = At("2026-11-10T10:30:00Z")}));
    return BillingSessionTable::End(tx, "bil_x", At("2026-11-10T10:30:00Z"));
  }));
  ASSERT_TRUE(invoices_->CloseMonth("2026-11", "", "system"));
  auto csv = invoices_->ExportCsv("2026-11");
  ASSERT_TRUE(csv) << csv.error().message;
  EXPECT_NE(csv->find("\"'=HYPERLINK(\"\"x\"\",\"\"y\"\")\""), std::string::npos) << *csv;
  EXPECT_NE(csv->find(",'@spark,"), std::string::npos) << *csv;
  EXPECT_NE(csv->find(",30,65,33,0.33 USD\r\n"), std::string::npos) << *csv;
  EXPECT_TRUE(csv->starts_with("invoice_id,billing_account_id,month,"));
  EXPECT_EQ(CsvCell("-1+1"), "'-1+1");
  EXPECT_EQ(CsvCell("a\nb"), "\"a\nb\"");
  EXPECT_EQ(CsvCell("plain"), "plain");
}

TEST_F(InvoicesTest, UsagePagesHoldStillWhileRowsArrive) {
  // 40 sessions, one a minute; some share a start time (the id breaks the tie).
  for (int i = 0; i < 40; ++i) {
    AddSession(fmt::format("bil_{:03}", i), "per_a", At("2026-11-10T10:00:00Z") + (i / 2) * 60,
               At("2026-11-10T10:00:00Z") + (i / 2) * 60 + 30);
  }
  auto p1 = usage_->Sessions("per_a", "", "");
  ASSERT_TRUE(p1);
  ASSERT_EQ(p1->rows.size(), 15u);
  EXPECT_EQ(p1->page, 1);
  EXPECT_EQ(p1->pages, 3);
  EXPECT_EQ(p1->total, 40);
  EXPECT_EQ(p1->prev_cursor, "");
  ASSERT_NE(p1->next_cursor, "");
  EXPECT_EQ(p1->rows[0].session.id, "bil_039");
  // New sessions arrive between the two reads.
  for (int i = 40; i < 45; ++i) {
    AddSession(fmt::format("bil_{:03}", i), "per_a", At("2026-11-20T10:00:00Z") + i, std::nullopt);
  }
  auto p2 = usage_->Sessions("per_a", p1->next_cursor, "");
  ASSERT_TRUE(p2);
  auto p3 = usage_->Sessions("per_a", p2->next_cursor, "");
  ASSERT_TRUE(p3);
  EXPECT_EQ(p3->next_cursor, "");
  std::vector<std::string> seen;
  for (const auto* p : {&*p1, &*p2, &*p3}) {
    for (const UsageRow& r : p->rows) seen.push_back(r.session.id);
  }
  ASSERT_EQ(seen.size(), 40u);  // none repeated, none missing
  for (int i = 0; i < 40; ++i) EXPECT_EQ(seen[i], fmt::format("bil_{:03}", 39 - i));
  // Back from page 2: the same 15 rows page 1 showed.
  auto back = usage_->Sessions("per_a", "", p2->prev_cursor);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->rows.size(), 15u);
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ(back->rows[i].session.id, p1->rows[i].session.id);
  EXPECT_NE(back->prev_cursor, "");  // the five new rows are newer still
  // Another person's rows never show.
  auto b = usage_->Sessions("per_b", "", "");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->total, 0);
  // Bad cursors.
  for (const char* c : {"x", "12.", ".bil_1", "12.BIL", "1.bil_1;drop", "-1.bil_1"}) {
    auto bad = usage_->Sessions("per_a", c, "");
    ASSERT_FALSE(bad) << c;
    EXPECT_EQ(bad.error().api_code, "invalid_cursor") << c;
  }
  EXPECT_EQ(usage_->Sessions("per_a", p1->next_cursor, p1->next_cursor).error().api_code,
            "invalid_cursor");
}

TEST_F(InvoicesTest, ACollectingProvidersCloseQueuesEachInvoiceButNotTheOperatorCollectedOnes) {
  AddPerson("per_c");
  AddSession("bil_a1", "per_a", At("2026-11-10T10:00:00Z"), At("2026-11-10T11:00:00Z"));
  AddSession("bil_b1", "per_b", At("2026-11-12T10:00:00Z"), At("2026-11-12T10:01:00Z"));
  AddSession("bil_c1", "per_c", At("2026-11-12T10:00:00Z"), At("2026-11-12T10:01:00Z"));
  // per_c's card was recorded by the operator: the operator collects that account itself.
  ASSERT_TRUE(db_->Write([&](store::Transaction& tx) -> core::Result<void> {
    return PaymentMethodTable::Upsert(tx, {.billing_account_id = SoloBillingAccountId("per_c"),
                                           .provider = "manual",
                                           .brand = "visa",
                                           .last4 = "4242",
                                           .exp_month = 12,
                                           .exp_year = 2099});
  }));
  Invoices stripe(*db_, clock_, rng_, kSilentAfter, {}, "stripe");
  auto closed = stripe.CloseMonth("2026-11", "", "system");
  ASSERT_TRUE(closed) << closed.error().message;
  EXPECT_EQ(closed->invoices_created, 3);
  EXPECT_EQ(closed->invoices_queued, 2);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM invoice_pushes WHERE provider = 'stripe' AND "
                  "pushed_at IS NULL AND attempts = 0"),
            2);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM invoice_pushes p JOIN invoices i ON i.id = p.invoice_id "
                  "WHERE i.billing_account_id = 'solo_per_c'"),
            0);
  // Due at once, with their lines, oldest first; another provider's queue is empty.
  auto due = db_->Read([&](store::Transaction& tx) {
    return InvoiceTable::PendingPushes(tx, "stripe", "", clock_.NowUnix(), 10);
  });
  ASSERT_TRUE(due) << due.error().message;
  ASSERT_EQ(due->size(), 2u);
  for (const InvoicePushRow& p : *due) {
    EXPECT_EQ(p.invoice.lines.size(), 1u);
    EXPECT_EQ(p.invoice.month, "2026-11");
    const InvoiceToPush push = ToPush(p.invoice);
    ASSERT_EQ(push.lines.size(), 1u);
    EXPECT_EQ(push.lines[0].id, p.invoice.id + "-" + p.invoice.lines[0].session_id);
    EXPECT_EQ(push.total_minor, p.invoice.total_minor);
  }
  auto limited = db_->Read([&](store::Transaction& tx) {
    return InvoiceTable::PendingPushes(tx, "stripe", "", clock_.NowUnix(), 1);
  });
  ASSERT_TRUE(limited);
  ASSERT_EQ(limited->size(), 1u);
  EXPECT_EQ(limited->front().invoice.lines.size(), 1u);
  auto other = db_->Read([&](store::Transaction& tx) {
    return InvoiceTable::PendingPushes(tx, "other", "", clock_.NowUnix(), 10);
  });
  ASSERT_TRUE(other);
  EXPECT_TRUE(other->empty());
  // Closing again queues nothing more.
  auto again = stripe.CloseMonth("2026-11", "", "system");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->invoices_queued, 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM invoice_pushes"), 2);
}

TEST_F(InvoicesTest, TheManualProvidersCloseQueuesNothing) {
  AddSession("bil_a1", "per_a", At("2026-11-10T10:00:00Z"), At("2026-11-10T11:00:00Z"));
  auto closed = invoices_->CloseMonth("2026-11", "", "system");
  ASSERT_TRUE(closed) << closed.error().message;
  EXPECT_EQ(closed->invoices_created, 1);
  EXPECT_EQ(closed->invoices_queued, 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM invoice_pushes"), 0);
}

TEST(InvoicePusherTest, RetriesBackOffFromAMinuteToSixHours) {
  EXPECT_EQ(PushRetryDelaySeconds(1), 60);
  EXPECT_EQ(PushRetryDelaySeconds(2), 120);
  EXPECT_EQ(PushRetryDelaySeconds(3), 240);
  EXPECT_EQ(PushRetryDelaySeconds(9), 15360);
  EXPECT_EQ(PushRetryDelaySeconds(10), 6 * 3600);
  EXPECT_EQ(PushRetryDelaySeconds(1000), 6 * 3600);
  EXPECT_EQ(PushRetryDelaySeconds(0), 60);
}

}  // namespace
}  // namespace gpuwerk::billing
