// A team's usage by person on a real store (docs/teams.md "Usage by member"): the rows add up to
// the team's invoice (closed month) and running total (open month), a removed member is still
// there, members and people in no team are refused. Times are chosen, never read.
#include "teams/team_usage.h"

#include <gtest/gtest.h>

#include "auth/person_table.h"
#include "billing/billing_session_table.h"
#include "core/logging.h"
#include "core/time_format.h"
#include "teams/team_billing.h"
#include "teams/team_member_table.h"
#include "teams/team_service.h"
#include "tests/support/temp_database.h"

namespace gpuwerk::teams {
namespace {

constexpr int64_t kSilentAfter = 30;

int64_t At(const char* rfc3339) { return core::ParseRfc3339(rfc3339).value(); }

class TeamUsageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::InitCrypto();
    ASSERT_TRUE(db_.Open());
    outbox_ = std::make_unique<mail::Outbox>(*db_, clock_, rng_);
    teams_ = std::make_unique<TeamService>(*db_, clock_, rng_, *outbox_, TeamOptions{});
    invoices_ =
        std::make_unique<billing::Invoices>(*db_, clock_, rng_, kSilentAfter, TeamBillingAccountOf);
  }
  void TearDown() override {
    invoices_.reset();
    teams_.reset();
    outbox_.reset();
    db_.reset();
  }
  auth::Principal Person(const std::string& id, const std::string& email) {
    auth::PersonRow row;
    row.person.id = id;
    row.person.email = email;
    row.person.created_at = clock_.NowUnix();
    row.person.email_proven_at = clock_.NowUnix();
    row.email_norm = email;
    EXPECT_TRUE(
        db_->Write([&](store::Transaction& tx) { return auth::PersonTable::Insert(tx, row); }));
    return {.person_id = id, .email = email, .email_proven = true};
  }
  void Join(const std::string& team_id, const std::string& person) {
    ASSERT_TRUE(db_->Write([&](store::Transaction& tx) {
      return TeamMemberTable::Insert(tx, {.id = "tmm_" + person,
                                          .team_id = team_id,
                                          .person_id = person,
                                          .role = Role::kMember,
                                          .joined_at = clock_.NowUnix()});
    }));
  }
  void Session(const std::string& id, const std::string& person, const std::string& account,
               int64_t start, int64_t end, int64_t price = 65) {
    ASSERT_TRUE(db_->Write([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_TRY(billing::BillingSessionTable::Insert(tx, {.id = id,
                                                            .instance_id = "ins_" + id,
                                                            .person_id = person,
                                                            .billing_account_id = account,
                                                            .instance_name = "box",
                                                            .gpu_type = "spark-1x",
                                                            .price_minor_per_hour = price,
                                                            .currency = "usd",
                                                            .started_at = start,
                                                            .evidence_at = end}));
      return billing::BillingSessionTable::End(tx, id, end);
    }));
  }
  void SetNow(int64_t t) { clock_.Advance(std::chrono::seconds(t - clock_.NowUnix())); }
  static int64_t SumOf(const TeamUsage& u) {
    int64_t sum = 0;
    for (const PersonUsage& p : u.people) sum += p.amount_minor;
    return sum;
  }

  core::FakeClock clock_{At("2026-11-01T08:00:00Z")};
  core::SodiumRng rng_;
  testing::TempDatabase db_;
  std::unique_ptr<mail::Outbox> outbox_;
  std::unique_ptr<TeamService> teams_;
  std::unique_ptr<billing::Invoices> invoices_;
  auth::Caller caller_{.address = "192.0.2.1"};
};

TEST_F(TeamUsageTest, RowsAddUpToTheInvoiceAndTheRunningTotalWithRemovedMembers) {
  auto ada = Person("per_ada", "ada@example.test");
  auto bob = Person("per_bob", "bob@example.test");
  auto cy = Person("per_cy", "cy@example.test");
  auto created = teams_->Create(ada, "lab", caller_);
  ASSERT_TRUE(created) << created.error().message;
  const std::string team = created->team.id;
  Join(team, "per_bob");
  Join(team, "per_cy");
  // November: prices chosen so that each line rounds (65 × 7 / 60 = 7.58, …).
  Session("bil_a1", "per_ada", team, At("2026-11-02T10:00:00Z"), At("2026-11-02T10:07:00Z"));
  Session("bil_a2", "per_ada", team, At("2026-11-03T10:00:00Z"), At("2026-11-03T10:07:00Z"));
  Session("bil_b1", "per_bob", team, At("2026-11-04T10:00:00Z"), At("2026-11-04T11:01:01Z"), 90);
  Session("bil_c1", "per_cy", team, At("2026-11-05T10:00:00Z"), At("2026-11-05T10:13:00Z"));
  // bob's solo session is not the team's.
  Session("bil_bs", "per_bob", "solo_per_bob", At("2026-11-06T10:00:00Z"),
          At("2026-11-06T12:00:00Z"));
  SetNow(At("2026-11-10T00:00:00Z"));
  ASSERT_TRUE(teams_->RemoveMember(ada, "per_cy", caller_));

  // Open month (the current one): the rows add up to the owner's running total.
  auto running = TeamUsageOf(*db_, clock_, *invoices_, ada, "");
  ASSERT_TRUE(running) << running.error().message;
  EXPECT_EQ(running->month, "2026-11");
  EXPECT_FALSE(running->closed);
  ASSERT_EQ(running->people.size(), 3u);
  EXPECT_EQ(running->people[0].label, "ada@example.test");
  EXPECT_EQ(running->people[0].minutes, 14);
  EXPECT_EQ(running->people[0].amount_minor,
            2 * billing::LineAmountMinor(65, 7));  // rounded per line, as the invoice
  EXPECT_TRUE(running->people[0].member);
  EXPECT_EQ(running->people[1].label, "bob@example.test");
  EXPECT_EQ(running->people[1].minutes, 62);
  EXPECT_EQ(running->people[2].label, "cy@example.test");
  EXPECT_FALSE(running->people[2].member);  // removed, still counted
  ASSERT_EQ(running->totals.size(), 1u);
  EXPECT_EQ(running->totals[0].amount_minor, SumOf(*running));
  auto owner_running = invoices_->CurrentMonthOf("per_ada");
  ASSERT_TRUE(owner_running);
  EXPECT_EQ(owner_running->totals, running->totals);

  // Closed month: the rows add up to the stored invoice.
  SetNow(At("2026-12-01T02:00:00Z"));
  ASSERT_TRUE(invoices_->CloseMonth("2026-11", "", "system"));
  auto closed = TeamUsageOf(*db_, clock_, *invoices_, ada, "2026-11");
  ASSERT_TRUE(closed) << closed.error().message;
  EXPECT_TRUE(closed->closed);
  auto invoices = invoices_->ForPerson("per_ada");
  ASSERT_TRUE(invoices);
  ASSERT_EQ(invoices->size(), 1u);
  EXPECT_EQ(SumOf(*closed), (*invoices)[0].total_minor);
  EXPECT_EQ(closed->totals[0].amount_minor, (*invoices)[0].total_minor);
  EXPECT_EQ(closed->people.size(), 3u);
  // December, open and empty.
  auto december = TeamUsageOf(*db_, clock_, *invoices_, ada, "");
  ASSERT_TRUE(december);
  EXPECT_EQ(december->month, "2026-12");
  EXPECT_TRUE(december->people.empty());
  EXPECT_TRUE(december->totals.empty());

  // A member and the removed member are refused; a bad month is invalid_month.
  auto as_member = TeamUsageOf(*db_, clock_, *invoices_, bob, "");
  ASSERT_FALSE(as_member);
  EXPECT_EQ(as_member.error().api_code, "owner_only");
  auto as_removed = TeamUsageOf(*db_, clock_, *invoices_, cy, "");
  ASSERT_FALSE(as_removed);
  EXPECT_EQ(as_removed.error().api_code, "no_team");
  auto bad = TeamUsageOf(*db_, clock_, *invoices_, ada, "2026-13");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().api_code, "invalid_month");
}

}  // namespace
}  // namespace gpuwerk::teams
