// The teams side of billing on a real store (docs/teams.md "Billing"): who pays for a person, and
// what a new team takes over from its creator (open billing sessions, never a card).
#include "teams/team_billing.h"

#include <gtest/gtest.h>

#include "auth/person_table.h"
#include "billing/billing_account_id.h"
#include "billing/billing_session_table.h"
#include "billing/payment_method_table.h"
#include "core/logging.h"
#include "teams/team_service.h"
#include "tests/support/temp_database.h"

namespace gpuwerk::teams {
namespace {

class TeamBillingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::InitCrypto();
    ASSERT_TRUE(db_.Open());
    outbox_ = std::make_unique<mail::Outbox>(*db_, clock_, rng_);
    TeamOptions options;
    options.hooks.team_created = [this](store::Transaction& tx, const std::string& team_id,
                                        const std::string& owner) -> core::Result<void> {
      GPUWERK_TRY(MoveSoloBillingToTeam(tx, clock_, rng_, team_id, owner));
      return {};
    };
    teams_ = std::make_unique<TeamService>(*db_, clock_, rng_, *outbox_, options);
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
  void OpenSession(const std::string& id, const std::string& person, bool ended = false) {
    ASSERT_TRUE(db_->Write([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_TRY(billing::BillingSessionTable::Insert(
          tx, {.id = id,
               .instance_id = "ins_" + id,
               .person_id = person,
               .billing_account_id = billing::SoloBillingAccountId(person),
               .instance_name = "box",
               .gpu_type = "spark-1x",
               .price_minor_per_hour = 65,
               .currency = "usd",
               .started_at = clock_.NowUnix()}));
      if (ended) GPUWERK_TRY(billing::BillingSessionTable::End(tx, id, clock_.NowUnix()));
      return {};
    }));
  }
  std::string AccountOfSession(const std::string& id) {
    auto s = db_->Read(
        [&](store::Transaction& tx) { return billing::BillingSessionTable::Find(tx, id); });
    return s && *s ? (*s)->billing_account_id : "";
  }
  billing::BillingAccount Resolve(const std::string& person) {
    auto a = db_->Read([&](store::Transaction& tx) { return TeamBillingAccountOf(tx, person); });
    EXPECT_TRUE(a) << a.error().message;
    return a ? *a : billing::BillingAccount{};
  }

  core::FakeClock clock_;
  core::SodiumRng rng_;
  testing::TempDatabase db_;
  std::unique_ptr<mail::Outbox> outbox_;
  std::unique_ptr<TeamService> teams_;
  auth::Caller caller_{.address = "192.0.2.1"};
};

TEST_F(TeamBillingTest, CreatingATeamMovesOpenSessionsOnceButNeverTheCreatorsCard) {
  auto ada = Person("per_ada", "ada@example.test");
  ASSERT_TRUE(db_->Write([&](store::Transaction& tx) {
    return billing::PaymentMethodTable::Upsert(tx, {.billing_account_id = "solo_per_ada",
                                                    .provider = "manual",
                                                    .brand = "visa",
                                                    .last4 = "4242",
                                                    .exp_month = 12,
                                                    .exp_year = 2030,
                                                    .created_at = clock_.NowUnix(),
                                                    .updated_at = clock_.NowUnix()});
  }));
  OpenSession("bil_open", "per_ada");
  OpenSession("bil_done", "per_ada", /*ended=*/true);
  auto solo = Resolve("per_ada");
  EXPECT_EQ(solo.id, "solo_per_ada");
  EXPECT_EQ(solo.kind, billing::AccountKind::kSolo);

  auto team = teams_->Create(ada, "Lab", caller_);
  ASSERT_TRUE(team) << team.error().message;
  const std::string team_id = team->team.id;
  EXPECT_EQ(AccountOfSession("bil_open"), team_id);
  EXPECT_EQ(AccountOfSession("bil_done"), "solo_per_ada");  // already ended: stays
  auto methods = db_->Read([&](store::Transaction& tx) -> core::Result<std::pair<bool, bool>> {
    GPUWERK_ASSIGN_OR_RETURN(bool solo_has,
                             billing::PaymentMethodTable::Exists(tx, "solo_per_ada"));
    GPUWERK_ASSIGN_OR_RETURN(bool team_has, billing::PaymentMethodTable::Exists(tx, team_id));
    return std::pair{solo_has, team_has};
  });
  ASSERT_TRUE(methods);
  // The card stays the creator's own: the team starts without one (its owner adds one).
  EXPECT_TRUE(methods->first);
  EXPECT_FALSE(methods->second);
  auto account = Resolve("per_ada");
  EXPECT_EQ(account.id, team_id);
  EXPECT_EQ(account.kind, billing::AccountKind::kTeam);
  EXPECT_EQ(account.name, "Lab");
  EXPECT_TRUE(account.may_manage);
}

TEST_F(TeamBillingTest, AMemberIsBilledToTheTeamWithoutManagingItsCard) {
  auto ada = Person("per_ada", "ada@example.test");
  auto bob = Person("per_bob", "bob@example.test");
  auto team = teams_->Create(ada, "Lab", caller_);
  ASSERT_TRUE(team);
  ASSERT_TRUE(teams_->InviteByEmail(ada, "bob@example.test", caller_));
  std::string body = *db_->Read([&](store::Transaction& tx) -> core::Result<std::string> {
    GPUWERK_ASSIGN_OR_RETURN(auto row,
                             tx.QueryOne("SELECT text_body FROM outbox_mails WHERE to_address = ?",
                                         {std::string("bob@example.test")}));
    return row ? row->Text("text_body") : std::string();
  });
  const std::string marker = "/team/accept?token=";
  auto at = body.find(marker);
  ASSERT_NE(at, std::string::npos);
  const std::string token =
      body.substr(at + marker.size(), body.find_first_of(" \r\n", at) - at - marker.size());
  ASSERT_TRUE(teams_->Accept(bob, token, caller_));
  auto account = Resolve("per_bob");
  EXPECT_EQ(account.id, team->team.id);
  EXPECT_FALSE(account.may_manage);
  ASSERT_TRUE(teams_->Leave(bob, caller_));
  EXPECT_EQ(Resolve("per_bob").id, "solo_per_bob");
}

TEST_F(TeamBillingTest, TheOperatorNamesATeamByItsIdOrExactName) {
  auto ada = Person("per_ada", "ada@example.test");
  auto made = teams_->Create(ada, "Lab One", caller_);
  ASSERT_TRUE(made) << made.error().message;
  auto holder = [&](std::string_view ref) {
    return db_->Read([&](store::Transaction& tx) { return TeamCardHolder(tx, ref); });
  };
  auto by_id = holder(made->team.id);
  ASSERT_TRUE(by_id) << by_id.error().message;
  EXPECT_EQ(by_id->account.id, made->team.id);
  EXPECT_EQ(by_id->account.kind, billing::AccountKind::kTeam);
  EXPECT_EQ(by_id->person_id, "");
  auto by_name = holder("Lab One");
  ASSERT_TRUE(by_name);
  EXPECT_EQ(by_name->account.id, made->team.id);
  for (std::string_view wrong : {"lab one", "Lab", "team_nope", ""}) {
    auto none = holder(wrong);
    ASSERT_FALSE(none) << wrong;
    EXPECT_EQ(none.error().api_code, "team_not_found");
  }
  // The name in another case: refused, and the message says the exact name to type.
  auto cased = holder("lab one");
  ASSERT_FALSE(cased);
  EXPECT_NE(cased.error().message.find("\"Lab One\""), std::string::npos) << cased.error().message;
  EXPECT_EQ(cased.error().details["did_you_mean"], "Lab One");
}

}  // namespace
}  // namespace gpuwerk::teams
