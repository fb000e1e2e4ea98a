// The stripe provider over real HTTP against the Stripe stand-in (tests/support/
// stripe_stand_in.py): card setup through a Checkout Session that the stand-in "pays", its
// webhook putting the card on file so that a launch goes through; each event applied once even
// when delivered twice and concurrently; bad, stale and future signatures refused with nothing
// changed; a rolled secret's two v1 values accepted; a customer deleted on Stripe's side
// replaced; a failed invoice payment holding launches (402 payment_failed, a mail) until paid; an
// older event never undoing a newer one; and no request of ours breaking Stripe's OpenAPI
// description.
#include <gtest/gtest.h>

#include "tests/integration/queue_fixture.h"
#include "tests/support/stripe_stand_in.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

constexpr const char* kKey = "sk_test_gpuwerk_stripe_provider";
constexpr const char* kSecret = "whsec_gpuwerk_current";
constexpr const char* kForm = "application/x-www-form-urlencoded";

class StripeProviderTest : public QueueFixture {
 protected:
  void SetUp() override {
    if (auto why = StripeStandIn::Unavailable()) GTEST_SKIP() << *why;
    std::string error;
    ASSERT_TRUE(stand_in_.Start(kKey, "", kSecret, &error)) << error;
    hooks_ = std::make_unique<HttpClient>(stand_in_.base_url());
    api_ = std::make_unique<HttpClient>(stand_in_.base_url());
    api_->SetBearer(kKey);
    QueueFixture::SetUp();
    if (HasFatalFailure()) return;
    auto set = hooks_->PostJson(
        "/_test/webhook",
        {{"url", app_->base_url() + "/api/v1/billing/webhooks/stripe"}, {"secret", kSecret}});
    ASSERT_EQ(set.status, 200) << set.body;
  }
  void Customize(app::ServerConfig& c) override {
    c.payment_provider = "stripe";
    c.stripe_api_base = stand_in_.base_url();
    c.stripe_secret_key = kKey;
    c.stripe_webhook_secrets = kSecret;
  }

  int64_t Count(const std::string& sql) {
    auto n = app_->database().Read([&](store::Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(sql));
      return row->Int(0);
    });
    return n ? *n : -1;
  }
  json Objects(const std::string& kind) {
    return hooks_->Get("/_test/objects/" + kind).Json()["data"];
  }

  /// Delivers event `id` with `options` (the stand-in's deliver hook), signed at our clock's
  /// time unless options say otherwise; the deliveries.
  json Deliver(const std::string& id, json options = json::object()) {
    if (!options.contains("timestamp")) options["timestamp"] = clock_.NowUnix();
    auto r = hooks_->PostJson("/_test/events/" + id + "/deliver", options);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json()["deliveries"];
  }
  /// Starts a card setup as `p` and has the stand-in complete it (undelivered); the id of the
  /// checkout.session.completed event.
  std::string PaidCheckout(Person& p) {
    auto setup = p.browser->Post("/api/v1/billing/card-setup", "", "application/json");
    EXPECT_EQ(setup.status, 201) << setup.body;
    const std::string url = setup.Json().value("url", "");
    EXPECT_TRUE(url.starts_with(stand_in_.base_url())) << url;
    const std::string session = url.substr(url.rfind('/') + 1);
    auto done = hooks_->PostJson(
        "/_test/checkout/sessions/" + session + "/complete",
        {{"card", {{"brand", "visa"}, {"last4", "4242"}, {"exp_month", 12}, {"exp_year", 2030}}},
         {"deliver", false}});
    EXPECT_EQ(done.status, 200) << done.body;
    return done.Json()["events"].back().get<std::string>();
  }
  /// An open invoice of `customer` on the stand-in, made straight through its API.
  std::string OpenInvoice(const std::string& customer) {
    auto item =
        api_->Post("/v1/invoiceitems",
                   "customer=" + customer + "&amount=1234&currency=eur&description=gpu", kForm);
    EXPECT_EQ(item.status, 200) << item.body;
    auto invoice = api_->Post(
        "/v1/invoices", "customer=" + customer + "&pending_invoice_items_behavior=include", kForm);
    EXPECT_EQ(invoice.status, 200) << invoice.body;
    const std::string id = invoice.Json().value("id", "");
    auto final = api_->Post("/v1/invoices/" + id + "/finalize", "", kForm);
    EXPECT_EQ(final.status, 200) << final.body;
    return id;
  }
  std::string InvoiceEvent(const std::string& invoice, const std::string& what) {
    auto r = hooks_->PostJson("/_test/invoices/" + invoice + "/" + what, {{"deliver", false}});
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json()["events"].back().get<std::string>();
  }
  void ExpectNoViolations() {
    const json requests = hooks_->Get("/_test/requests").Json()["data"];
    ASSERT_FALSE(requests.empty());
    for (const auto& request : requests) {
      const std::string path = request.value("path", "");
      if (request["stripe_version"].is_null() &&
          (path.starts_with("/v1/invoice") || request["method"] == "DELETE")) {
        continue;  // the test's own requests: its invoices, a customer deleted on Stripe's side
      }
      EXPECT_TRUE(request["violations"].empty()) << request.dump();
      EXPECT_EQ(request["stripe_version"], "2023-08-16") << request.dump();
    }
  }

  StripeStandIn stand_in_;
  std::unique_ptr<HttpClient> hooks_;
  std::unique_ptr<HttpClient> api_;
};

TEST_F(StripeProviderTest, C23_CardSetupPaidOnStripeLetsALaunchThroughAndEachEventAppliesOnce) {
  AddHost("spark-a");
  Person alice = NewPerson("alice@example.test", Card::kNone);
  ExpectProblem(Create(alice, "alpha"), 402, "payment_method_required");
  const std::string event = PaidCheckout(alice);

  // Refused signatures change nothing: another secret, a stale and a future timestamp.
  for (const json& bad :
       {json{{"secrets", {"whsec_someone_else"}}}, json{{"timestamp", clock_.NowUnix() - 600}},
        json{{"timestamp", clock_.NowUnix() + 360}}, json{{"tamper", true}}}) {
    const json d = Deliver(event, bad);
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0]["status"], 400) << bad.dump() << d.dump();
    EXPECT_NE(d[0]["body"].get<std::string>().find("invalid_signature"), std::string::npos);
  }
  EXPECT_TRUE(alice.browser->Get("/api/v1/billing").Json()["payment_method"].is_null());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM stripe_events"), 0);

  // A secret being rolled: the old one's v1 first, then ours.
  json d = Deliver(event, {{"secrets", {"whsec_gpuwerk_retired", kSecret}}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0]["status"], 200) << d.dump();
  EXPECT_NE(d[0]["body"].get<std::string>().find("applied"), std::string::npos) << d.dump();
  const json billing = alice.browser->Get("/api/v1/billing").Json();
  EXPECT_EQ(billing["provider"], "stripe");
  EXPECT_EQ(billing["payment_method"]["last4"], "4242") << billing.dump();
  EXPECT_EQ(billing["payment_method"]["description"], "visa ending 4242, expires 12/2030");
  const auto created = Create(alice, "alpha");
  EXPECT_LT(created.status, 300) << created.body;

  // The same event again, and three times at once: one effect.
  d = Deliver(event, {{"times", 3}, {"concurrent", true}});
  for (const auto& one : d) EXPECT_EQ(one["status"], 200) << d.dump();
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'billing.payment_method_add'"),
            1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM stripe_events"), 1);
  // The card is the customer's default for invoices.
  const json customers = Objects("customers");
  ASSERT_EQ(customers.size(), 1u);
  EXPECT_TRUE(customers[0]["invoice_settings"]["default_payment_method"].is_string());
  ExpectNoViolations();
}

TEST_F(StripeProviderTest, ACustomerDeletedOnStripesSideIsReplacedAtTheNextCardSetup) {
  Person bob = NewPerson("bob@example.test", Card::kNone);
  auto first = bob.browser->Post("/api/v1/billing/card-setup", "", "application/json");
  ASSERT_EQ(first.status, 201) << first.body;
  json customers = Objects("customers");
  ASSERT_EQ(customers.size(), 1u);
  const std::string gone = customers[0]["id"];
  ASSERT_EQ(api_->Delete("/v1/customers/" + gone).status, 200);
  auto second = bob.browser->Post("/api/v1/billing/card-setup", "", "application/json");
  ASSERT_EQ(second.status, 201) << second.body;
  customers = Objects("customers");
  ASSERT_EQ(customers.size(), 2u);
  const json sessions = Objects("checkout_sessions");
  ASSERT_EQ(sessions.size(), 2u);
  EXPECT_NE(sessions[1]["customer"], gone);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM stripe_customers WHERE deleted_at IS NOT NULL"), 1);
  ExpectNoViolations();
}

TEST_F(StripeProviderTest, AFailedPaymentHoldsLaunchesAndMailsTheOwnerUntilTheInvoiceIsPaid) {
  AddHost("spark-a");
  Person carol = NewPerson("carol@example.test", Card::kNone);
  ASSERT_EQ(Deliver(PaidCheckout(carol))[0]["status"], 200);
  const std::string customer = Objects("customers")[0]["id"];
  const std::string invoice = OpenInvoice(customer);

  ASSERT_EQ(Deliver(InvoiceEvent(invoice, "payment_failed"))[0]["status"], 200);
  ExpectProblem(Create(carol, "alpha"), 402, "payment_failed");
  bool mailed = false;
  for (int i = 0; i < 200 && !mailed; ++i) {
    for (const auto& m : Mails("carol@example.test", 0)) {
      mailed |= m.subject.find("payment failed") != std::string::npos;
    }
    if (!mailed) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(mailed);

  ASSERT_EQ(Deliver(InvoiceEvent(invoice, "paid"))[0]["status"], 200);
  const auto created = Create(carol, "alpha");
  EXPECT_LT(created.status, 300) << created.body;
  ExpectNoViolations();
}

TEST_F(StripeProviderTest, C24_AnOlderEventNeverUndoesANewerOne) {
  AddHost("spark-a");
  Person dan = NewPerson("dan@example.test", Card::kNone);
  ASSERT_EQ(Deliver(PaidCheckout(dan))[0]["status"], 200);
  const std::string customer = Objects("customers")[0]["id"];
  const std::string invoice = OpenInvoice(customer);
  const std::string failed = InvoiceEvent(invoice, "payment_failed");
  const std::string paid = InvoiceEvent(invoice, "paid");
  ASSERT_EQ(Deliver(paid)[0]["status"], 200);
  const json late = Deliver(failed);
  ASSERT_EQ(late[0]["status"], 200) << late.dump();
  EXPECT_NE(late[0]["body"].get<std::string>().find("stale"), std::string::npos) << late.dump();
  EXPECT_EQ(Count("SELECT COUNT(*) FROM payment_holds"), 0);
  const auto created = Create(dan, "alpha");
  EXPECT_LT(created.status, 300) << created.body;
}

TEST_F(StripeProviderTest, UnknownTypesAndCustomersAreAnswered2xx) {
  Person erin = NewPerson("erin@example.test", Card::kNone);
  auto setup = erin.browser->Post("/api/v1/billing/card-setup", "", "application/json");
  ASSERT_EQ(setup.status, 201);
  // customer.created is not acted on.
  const json events = hooks_->Get("/_test/events").Json()["data"];
  ASSERT_FALSE(events.empty());
  const json d = Deliver(events[0]["id"]);
  EXPECT_EQ(d[0]["status"], 200) << d.dump();
  EXPECT_NE(d[0]["body"].get<std::string>().find("ignored"), std::string::npos) << d.dump();
}

TEST_F(StripeProviderTest, StripeUnreachableOrFailingIs503ProviderUnavailable) {
  Person fay = NewPerson("fay@example.test", Card::kNone);
  ASSERT_EQ(hooks_
                ->PostJson("/_test/faults", {{"method", "POST"},
                                             {"path", "/v1/checkout/sessions"},
                                             {"action", "status"},
                                             {"status", 500},
                                             {"count", 1}})
                .status,
            200);
  ExpectProblem(fay.browser->Post("/api/v1/billing/card-setup", "", "application/json"), 503,
                "provider_unavailable");
  ASSERT_EQ(hooks_
                ->PostJson("/_test/faults", {{"method", "POST"},
                                             {"path", "/v1/checkout/sessions"},
                                             {"action", "drop"},
                                             {"count", 1}})
                .status,
            200);
  ExpectProblem(fay.browser->Post("/api/v1/billing/card-setup", "", "application/json"), 503,
                "provider_unavailable");
  // Stripe back: the same customer serves the next setup.
  EXPECT_EQ(fay.browser->Post("/api/v1/billing/card-setup", "", "application/json").status, 201);
  EXPECT_EQ(Objects("customers").size(), 1u);
}

TEST_F(StripeProviderTest, AMethodDetachedOnStripeIsForgotten) {
  Person gus = NewPerson("gus@example.test", Card::kNone);
  ASSERT_EQ(Deliver(PaidCheckout(gus))[0]["status"], 200);
  const std::string pm = Objects("payment_methods")[0]["id"];
  auto detached =
      hooks_->PostJson("/_test/payment_methods/" + pm + "/detach", {{"deliver", false}});
  ASSERT_EQ(detached.status, 200) << detached.body;
  const json d = Deliver(detached.Json()["events"].back().get<std::string>());
  EXPECT_EQ(d[0]["status"], 200) << d.dump();
  EXPECT_TRUE(gus.browser->Get("/api/v1/billing").Json()["payment_method"].is_null());
}

TEST_F(StripeProviderTest, C25_AnInvoicePushRetriedAfterALostAnswerMakesOneInvoice) {
  Person hal = NewPerson("hal@example.test", Card::kNone);
  ASSERT_EQ(Deliver(PaidCheckout(hal))[0]["status"], 200);
  const std::string account = Objects("customers")[0]["metadata"]["billing_account_id"];
  billing::InvoiceToPush invoice{
      .id = "inv_test_1",
      .billing_account_id = account,
      .month = "2026-11",
      .currency = "eur",
      .lines = {{.id = "line_1", .description = "gpu", .amount_minor = 1200},
                {.id = "line_2", .description = "gpu", .amount_minor = 34}},
      .total_minor = 1234};
  // Stripe makes the invoice, but its answer never arrives.
  ASSERT_EQ(
      hooks_
          ->PostJson(
              "/_test/faults",
              {{"method", "POST"}, {"path", "/v1/invoices"}, {"action", "drop"}, {"count", 1}})
          .status,
      200);
  auto& provider = app_->payment_methods().provider();
  auto lost = provider.PushInvoice(invoice);
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().api_code, "provider_unavailable");
  auto pushed = provider.PushInvoice(invoice);
  ASSERT_TRUE(pushed) << pushed.error().message;
  EXPECT_EQ(pushed->status, "open");
  const json invoices = Objects("invoices");
  ASSERT_EQ(invoices.size(), 1u);
  EXPECT_EQ(invoices[0]["id"], pushed->provider_ref);
  EXPECT_EQ(invoices[0]["amount_due"], 1234);
  EXPECT_EQ(Objects("invoiceitems").size(), 2u);
  // Done once: never again, even after Stripe forgot every key.
  ASSERT_EQ(hooks_->PostJson("/_test/idempotency/expire", json::object()).status, 200);
  auto again = provider.PushInvoice(invoice);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->provider_ref, pushed->provider_ref);
  EXPECT_EQ(Objects("invoices").size(), 1u);
  EXPECT_EQ(Objects("invoiceitems").size(), 2u);
  ExpectNoViolations();
}

}  // namespace
}  // namespace gpuwerk::testing
