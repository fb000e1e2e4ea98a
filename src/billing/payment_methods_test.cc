// billing: payment methods, the launch gate, the manual provider (R-14, docs/billing.md).
#include "billing/payment_methods.h"

#include <gtest/gtest.h>

#include "billing/card_setup_table.h"
#include "billing/manual_provider.h"
#include "core/logging.h"
#include "tests/support/temp_database.h"

namespace gpuwerk::billing {
namespace {

// 2026-12-02T00:00:00Z
constexpr int64_t kNow = 1796169600;

class PaymentMethodsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::InitCrypto();
    ASSERT_TRUE(db_.Open());
    AddPerson("per_a", "Ann@Example.test");
    AddPerson("per_b", "bob@example.test");
    methods_ = std::make_unique<PaymentMethods>(*db_, clock_, rng_, manual_, ResolveAccount{},
                                                [this] { ++card_added_; });
  }
  void TearDown() override {
    methods_.reset();
    db_.reset();
  }
  void AddPerson(const std::string& id, const std::string& email) {
    ASSERT_TRUE(db_->Write([&](store::Transaction& tx) -> core::Result<void> {
      std::string norm = email;
      for (char& c : norm) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      GPUWERK_TRY(
          tx.Exec("INSERT INTO persons (id, email, email_norm, created_at) VALUES (?, ?, ?, 0)",
                  {id, email, norm}));
      return {};
    }));
  }
  bool Has(const std::string& person) {
    auto has =
        db_->Read([&](store::Transaction& tx) { return methods_->HasPaymentMethod(tx, person); });
    EXPECT_TRUE(has) << has.error().message;
    return has && *has;
  }
  core::Result<void> Gate(const std::string& person, std::string_view action = "launch") {
    return db_->Read(
        [&](store::Transaction& tx) { return methods_->RequireForLaunch(tx, person, action); });
  }
  int64_t AuditCount(const std::string& action) {
    auto n = db_->Read([&](store::Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(
          auto row,
          tx.QueryOne("SELECT COUNT(*) AS n FROM audit_events WHERE action = ?", {action}));
      return row->Int("n");
    });
    return n ? *n : -1;
  }

  gpuwerk::testing::TempDatabase db_;
  core::FakeClock clock_{kNow};
  core::SodiumRng rng_;
  ManualProvider manual_;
  int card_added_ = 0;
  std::unique_ptr<PaymentMethods> methods_;
};

TEST_F(PaymentMethodsTest, SoloAccountIdIsDerivedFromThePerson) {
  EXPECT_EQ(SoloBillingAccountId("per_a"), "solo_per_a");
  auto account = db_->Read([](store::Transaction& tx) { return SoloAccountOf(tx, "per_a"); });
  ASSERT_TRUE(account);
  EXPECT_EQ(account->id, "solo_per_a");
  EXPECT_EQ(account->kind, AccountKind::kSolo);
  EXPECT_EQ(account->name, "Ann@Example.test");
  EXPECT_TRUE(account->may_manage);
  auto none = db_->Read([](store::Transaction& tx) { return SoloAccountOf(tx, "per_x"); });
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().api_code, "not_found");
}

TEST_F(PaymentMethodsTest, NoMethodMeansLaunchAndRestartAre402WithWhatToDo) {
  EXPECT_FALSE(Has("per_a"));
  auto refused = Gate("per_a");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, core::ErrorCode::kPaymentRequired);
  EXPECT_EQ(refused.error().api_code, "payment_method_required");
  EXPECT_NE(refused.error().message.find("Launching"), std::string::npos);
  // What to do, said once and to the person: no operator command, no placeholder (a new user's
  // trial found "set-card YOUR_EMAIL" and the queue sentence twice).
  EXPECT_NE(refused.error().message.find("ask your operator to record a card"), std::string::npos);
  EXPECT_EQ(refused.error().message.find("set-card"), std::string::npos);
  EXPECT_EQ(refused.error().message.find("queue"), std::string::npos);
  EXPECT_EQ(refused.error().details["provider"], "manual");
  auto restart = Gate("per_a", "restart");
  ASSERT_FALSE(restart);
  EXPECT_NE(restart.error().message.find("Restarting"), std::string::npos);
}

TEST_F(PaymentMethodsTest, OperatorSetsAndClearsACardByEmailAudited) {
  auto set = methods_->SetCard(
      "per_op", "  ann@EXAMPLE.test ",
      {.brand = "visa", .last4 = "4242", .exp_month = 12, .exp_year = 2030}, "10.0.0.1");
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_EQ(set->billing_account_id, "solo_per_a");
  EXPECT_EQ(set->provider, "manual");
  EXPECT_EQ(card_added_, 1);
  EXPECT_TRUE(Has("per_a"));
  EXPECT_FALSE(Has("per_b"));
  EXPECT_TRUE(Gate("per_a"));
  EXPECT_EQ(AuditCount("billing.set_card"), 1);

  auto state = methods_->State("per_a");
  ASSERT_TRUE(state);
  ASSERT_TRUE(state->method);
  EXPECT_EQ(state->provider, "manual");
  EXPECT_EQ(state->method_description,
            "visa ending 4242, expires 12/2030 (manual: recorded by the operator)");

  // Replacing keeps one row and its first created_at.
  clock_.Advance(std::chrono::seconds(60));
  auto replaced = methods_->SetCard(
      "per_op", "ann@example.test",
      {.brand = "mastercard", .last4 = "4444", .exp_month = 1, .exp_year = 2031}, "10.0.0.1");
  ASSERT_TRUE(replaced);
  EXPECT_EQ(replaced->created_at, kNow);
  EXPECT_EQ(replaced->updated_at, kNow + 60);
  EXPECT_EQ(replaced->brand, "mastercard");

  auto cleared = methods_->ClearCard("per_op", "ann@example.test", "10.0.0.1");
  ASSERT_TRUE(cleared);
  ASSERT_TRUE(*cleared);
  EXPECT_EQ((*cleared)->last4, "4444");
  EXPECT_FALSE(Has("per_a"));
  EXPECT_EQ(AuditCount("billing.clear_card"), 1);
  // Clearing again changes nothing and records nothing.
  auto again = methods_->ClearCard("per_op", "ann@example.test", "10.0.0.1");
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again);
  EXPECT_EQ(AuditCount("billing.clear_card"), 1);
}

TEST_F(PaymentMethodsTest, BadCardsAreRefusedAndNothingIsStored) {
  struct Case {
    CardFacts card;
    std::string code;
  };
  const std::vector<Case> cases = {
      {{.brand = "", .last4 = "4242", .exp_month = 12, .exp_year = 2030}, "invalid_brand"},
      {{.brand = "Visa", .last4 = "4242", .exp_month = 12, .exp_year = 2030}, "invalid_brand"},
      {{.brand = "visa<b>", .last4 = "4242", .exp_month = 12, .exp_year = 2030}, "invalid_brand"},
      {{.brand = std::string(25, 'v'), .last4 = "4242", .exp_month = 12, .exp_year = 2030},
       "invalid_brand"},
      {{.brand = "visa", .last4 = "424", .exp_month = 12, .exp_year = 2030}, "invalid_last4"},
      {{.brand = "visa", .last4 = "42a2", .exp_month = 12, .exp_year = 2030}, "invalid_last4"},
      {{.brand = "visa", .last4 = "42424", .exp_month = 12, .exp_year = 2030}, "invalid_last4"},
      {{.brand = "visa", .last4 = "4242", .exp_month = 0, .exp_year = 2030}, "invalid_exp_month"},
      {{.brand = "visa", .last4 = "4242", .exp_month = 13, .exp_year = 2030}, "invalid_exp_month"},
      {{.brand = "visa", .last4 = "4242", .exp_month = 12, .exp_year = 30}, "invalid_exp_year"},
      {{.brand = "visa", .last4 = "4242", .exp_month = 11, .exp_year = 2026}, "card_expired"},
  };
  for (const auto& c : cases) {
    auto set = methods_->SetCard("per_op", "ann@example.test", c.card, "10.0.0.1");
    ASSERT_FALSE(set) << c.code;
    EXPECT_EQ(set.error().api_code, c.code);
    EXPECT_EQ(set.error().code, core::ErrorCode::kInvalidArgument) << c.code;
  }
  // This month's expiry is still good (through its last day).
  EXPECT_TRUE(
      ValidateCard({.brand = "visa", .last4 = "4242", .exp_month = 12, .exp_year = 2026}, kNow));
  auto nobody = methods_->SetCard(
      "per_op", "nobody@example.test",
      {.brand = "visa", .last4 = "4242", .exp_month = 12, .exp_year = 2030}, "10.0.0.1");
  ASSERT_FALSE(nobody);
  EXPECT_EQ(nobody.error().api_code, "not_found");
  auto bad_email = methods_->SetCard(
      "per_op", "not an email",
      {.brand = "visa", .last4 = "4242", .exp_month = 12, .exp_year = 2030}, "10.0.0.1");
  ASSERT_FALSE(bad_email);
  EXPECT_EQ(bad_email.error().api_code, "invalid_email");
  EXPECT_FALSE(Has("per_a"));
  EXPECT_EQ(AuditCount("billing.set_card"), 0);
  EXPECT_EQ(card_added_, 0);
}

TEST_F(PaymentMethodsTest, ManualProviderSendsPeopleToTheOperator) {
  auto setup = methods_->BeginCardSetup("per_a");
  ASSERT_FALSE(setup);
  EXPECT_EQ(setup.error().api_code, "manual_provider");
  EXPECT_EQ(setup.error().code, core::ErrorCode::kFailedPrecondition);
  auto pushed = manual_.PushInvoice({});
  ASSERT_FALSE(pushed);
  EXPECT_EQ(pushed.error().api_code, "not_applicable");
}

TEST_F(PaymentMethodsTest, APersonRemovesTheirOwnMethodOnly) {
  auto none = methods_->Remove("per_a", "10.0.0.2");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().api_code, "not_found");
  ASSERT_TRUE(methods_->SetCard(
      "", "ann@example.test", {.brand = "visa", .last4 = "4242", .exp_month = 12, .exp_year = 2030},
      "system"));
  ASSERT_TRUE(methods_->SetCard(
      "", "bob@example.test", {.brand = "amex", .last4 = "0005", .exp_month = 12, .exp_year = 2030},
      "system"));
  auto removed = methods_->Remove("per_a", "10.0.0.2");
  ASSERT_TRUE(removed) << removed.error().message;
  EXPECT_EQ(removed->last4, "4242");
  EXPECT_FALSE(Has("per_a"));
  EXPECT_TRUE(Has("per_b"));
  EXPECT_EQ(AuditCount("billing.payment_method_remove"), 1);
}

TEST_F(PaymentMethodsTest, AResolverDecidesWhichAccountPays) {
  // What the teams module installs: here per_b pays through "team_1", which per_b does not
  // manage.
  methods_ = std::make_unique<PaymentMethods>(
      *db_, clock_, rng_, manual_, [](store::Transaction& tx, const std::string& person) {
        if (person != "per_b") return SoloAccountOf(tx, person);
        return core::Result<BillingAccount>(BillingAccount{
            .id = "team_1", .kind = AccountKind::kTeam, .name = "Lab", .may_manage = false});
      });
  auto refused = Gate("per_b");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("team's owner"), std::string::npos);
  auto setup = methods_->BeginCardSetup("per_b");
  ASSERT_FALSE(setup);
  EXPECT_EQ(setup.error().api_code, "billing_managed_by_team");
  ASSERT_TRUE(db_->Write([](store::Transaction& tx) {
    return PaymentMethodTable::Upsert(tx, {.billing_account_id = "team_1",
                                           .provider = "manual",
                                           .brand = "visa",
                                           .last4 = "1111",
                                           .exp_month = 1,
                                           .exp_year = 2030});
  }));
  EXPECT_TRUE(Gate("per_b"));
  EXPECT_FALSE(Has("per_a"));
  auto removed = methods_->Remove("per_b", "10.0.0.2");
  ASSERT_FALSE(removed);
  EXPECT_EQ(removed.error().api_code, "billing_managed_by_team");
  // The operator cannot reach the team's card through a member's address either.
  auto set = methods_->SetCard("per_op", "bob@example.test",
                               {.brand = "visa", .last4 = "9999", .exp_month = 1, .exp_year = 2031},
                               "10.0.0.1");
  ASSERT_FALSE(set);
  EXPECT_EQ(set.error().api_code, "billing_managed_by_team");
  auto cleared = methods_->ClearCard("per_op", "bob@example.test", "10.0.0.1");
  ASSERT_FALSE(cleared);
  EXPECT_EQ(cleared.error().api_code, "billing_managed_by_team");
  auto card =
      db_->Read([](store::Transaction& tx) { return PaymentMethodTable::Find(tx, "team_1"); });
  ASSERT_TRUE(card && *card);
  EXPECT_EQ((*card)->last4, "1111");
  EXPECT_EQ(AuditCount("billing.set_card"), 0);
}

/// A provider that takes cards from people: each setup a page "cs_<n>".
class PagesProvider final : public PaymentProvider {
 public:
  std::string_view name() const override { return "pages"; }
  bool CollectsInvoices() const override { return false; }
  std::string HowToAddPaymentMethod(bool) const override { return "Add a card."; }
  core::Result<CardSetup> BeginCardSetup(const CardSetupRequest&) override {
    return CardSetup{.url = "https://pay.example/", .provider_ref = "cs_" + std::to_string(++n_)};
  }
  std::string Describe(const PaymentMethod& m) const override { return m.last4; }
  core::Result<void> Detach(const BillingAccount&, const PaymentMethod&) override { return {}; }
  core::Result<PushedInvoice> PushInvoice(const InvoiceToPush&) override {
    return core::Fail(core::ErrorCode::kFailedPrecondition, "not_applicable", "no");
  }

 private:
  int n_ = 0;
};

TEST_F(PaymentMethodsTest, ACardSetupIsRecordedForItsPersonAndAChangeHereVoidsIt) {
  PagesProvider pages;
  // per_b pays through "team_1" and manages it; per_a does not.
  bool b_owns = true;
  methods_ = std::make_unique<PaymentMethods>(
      *db_, clock_, rng_, pages, [&](store::Transaction& tx, const std::string& person) {
        if (person != "per_b") return SoloAccountOf(tx, person);
        return core::Result<BillingAccount>(BillingAccount{
            .id = "team_1", .kind = AccountKind::kTeam, .name = "Lab", .may_manage = b_owns});
      });
  ASSERT_TRUE(methods_->BeginCardSetup("per_b"));
  auto find = [&](const std::string& ref) {
    auto found = db_->Read([&](store::Transaction& tx) { return CardSetupTable::Find(tx, ref); });
    EXPECT_TRUE(found) << found.error().message;
    return found ? *found : std::nullopt;
  };
  auto may = [&](const std::string& person, const std::string& account) {
    auto m =
        db_->Read([&](store::Transaction& tx) { return methods_->MayManage(tx, person, account); });
    EXPECT_TRUE(m) << m.error().message;
    return m && *m;
  };
  const auto setup = find("cs_1");
  ASSERT_TRUE(setup);
  EXPECT_EQ(setup->billing_account_id, "team_1");
  EXPECT_EQ(setup->person_id, "per_b");
  EXPECT_EQ(setup->state, "open");
  EXPECT_TRUE(may("per_b", "team_1"));
  EXPECT_TRUE(may("per_b", "solo_per_b"));  // their own account, always
  EXPECT_FALSE(may("per_a", "team_1"));
  EXPECT_FALSE(may("per_gone", "solo_per_a"));
  b_owns = false;  // demoted
  EXPECT_FALSE(may("per_b", "team_1"));
  // The operator records the team's card: the open setup is void.
  b_owns = true;
  ASSERT_TRUE(methods_->SetCardOf(
      "per_op",
      [](store::Transaction&) -> core::Result<PaymentMethods::CardHolder> {
        return PaymentMethods::CardHolder{
            .person_id = "",
            .account = {.id = "team_1", .kind = AccountKind::kTeam, .name = "Lab"}};
      },
      {.brand = "visa", .last4 = "4242", .exp_month = 12, .exp_year = 2030}, "10.0.0.1"));
  EXPECT_EQ(find("cs_1")->state, "void");
  EXPECT_FALSE(find("cs_unknown"));
}

TEST_F(PaymentMethodsTest, CardSetupsAreLimitedPerPerson) {
  PagesProvider pages;
  methods_ = std::make_unique<PaymentMethods>(*db_, clock_, rng_, pages);
  for (int i = 0; i < kCardSetupsPerPerson.limit; ++i)
    ASSERT_TRUE(methods_->BeginCardSetup("per_a"));
  auto limited = methods_->BeginCardSetup("per_a");
  ASSERT_FALSE(limited);
  EXPECT_EQ(limited.error().api_code, "rate_limited");
  EXPECT_TRUE(limited.error().details.contains("retry_after_seconds"));
  EXPECT_TRUE(methods_->BeginCardSetup("per_b"));  // another person, another account
}

}  // namespace
}  // namespace gpuwerk::billing
