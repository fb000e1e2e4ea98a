// The stripe provider over real HTTP against the Stripe stand-in (tests/support/
// stripe_stand_in.py): card setup through a Checkout Session that the stand-in "pays", its
// webhook putting the card on file so that a launch goes through; each event applied once even
// when delivered twice and concurrently; bad, stale and future signatures refused with nothing
// changed; a rolled secret's two v1 values accepted; a customer deleted on Stripe's side
// replaced; a failed invoice payment holding launches (402 payment_failed, a mail) until paid; an
// older event never undoing a newer one; a card removed here detached at Stripe, and one
// detached at Stripe forgotten here, running instances running on; the month close pushing each
// closed invoice (one account's error never holding up another's, a failed push retried by the next
// background pass, a lost answer resent with the same body); a request whose answer was lost and
// that is retried only after Stripe forgot its idempotency key (invoice item, invoice, finalize)
// looked up at Stripe first and not made a second time, sent only when Stripe has nothing, and
// within the window resent as it is; and no request of ours breaking Stripe's OpenAPI
// description.
#include "billing/stripe_provider.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "billing/stripe_client.h"
#include "core/time_format.h"
#include "tests/integration/queue_fixture.h"
#include "tests/integration/smtp_fixture.h"
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
  /// Starts a card setup as `p`; the Checkout Session's id.
  std::string StartCardSetup(Person& p) {
    auto setup = p.browser->Post("/api/v1/billing/card-setup", "", "application/json");
    EXPECT_EQ(setup.status, 201) << setup.body;
    const std::string url = setup.Json().value("url", "");
    return url.substr(url.rfind('/') + 1);
  }
  /// Has the stand-in complete Checkout Session `session` with a visa ending `last4`
  /// (undelivered); the id of the checkout.session.completed event.
  std::string CompleteCardSetup(const std::string& session, const std::string& last4) {
    auto done = hooks_->PostJson(
        "/_test/checkout/sessions/" + session + "/complete",
        {{"card", {{"brand", "visa"}, {"last4", last4}, {"exp_month", 12}, {"exp_year", 2030}}},
         {"deliver", false}});
    EXPECT_EQ(done.status, 200) << done.body;
    return done.Json()["events"].back().get<std::string>();
  }
  /// The `pm_…` on file here for the account of `p` ("" when none), and the default card of
  /// its live customer at Stripe ("" when none).
  std::pair<std::string, std::string> CardHereAndAtStripe(const std::string& email) {
    std::string here;
    auto read = app_->database().Read([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_ASSIGN_OR_RETURN(
          auto row,
          tx.QueryOne("SELECT m.provider_ref FROM payment_methods m JOIN stripe_customers "
                      "c ON c.billing_account_id = m.billing_account_id AND "
                      "c.deleted_at IS NULL JOIN persons p ON m.billing_account_id = "
                      "'solo_' || p.id WHERE p.email = ?",
                      {email}));
      if (row) here = row->Text(0);
      return {};
    });
    EXPECT_TRUE(read) << read.error().message;
    const json customer = CustomerOf(email);
    std::string there;
    if (customer.is_object() &&
        customer["invoice_settings"]["default_payment_method"].is_string()) {
      there = customer["invoice_settings"]["default_payment_method"];
    }
    return {here, there};
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
  /// Moves the server's clock to `rfc3339` (forward only).
  void SetNow(const char* rfc3339) {
    clock_.Advance(std::chrono::seconds(core::ParseRfc3339(rfc3339).value() - clock_.NowUnix()));
  }
  /// An agent's report of instance `id`'s node-0 container, running since `started_at`.
  static json Container(const std::string& id, const std::string& started_at) {
    return json::array({{{"instance_id", id},
                         {"node_index", 0},
                         {"container_id", "c-" + id},
                         {"state", "running"},
                         {"exit_code", 0},
                         {"started_at", started_at},
                         {"finished_at", "0001-01-01T00:00:00Z"},
                         {"ssh_port", 40123},
                         {"ssh_ready", true},
                         {"restart_generation", 0},
                         {"error", ""}}});
  }
  /// Launches `name` for `p`, has its host report the container running for `seconds` (a sync
  /// at most every 10 minutes: the same run, so the whole time is billed), then deletes it; the
  /// instance's id.
  std::string RunInstance(Person& p, const std::string& name, int64_t seconds) {
    auto made = Create(p, name);
    EXPECT_EQ(made.status, 201) << made.body;
    const std::string id = made.Json().value("id", "");
    std::string host;
    for (const auto& [h, token] : tokens_) {
      if (InstanceOn(h) == id) host = h;
    }
    EXPECT_FALSE(host.empty()) << "no host holds " << id;
    const std::string started = core::FormatRfc3339(clock_.NowUnix());
    EXPECT_EQ(Sync(host, Container(id, started)).status, 200);
    for (int64_t left = seconds; left > 0;) {
      const int64_t step = std::min<int64_t>(left, 600);
      clock_.Advance(std::chrono::seconds(step));
      left -= step;
      EXPECT_EQ(Sync(host, Container(id, started)).status, 200);
    }
    EXPECT_EQ(p.browser->Delete("/api/v1/instances/" + id).status, 204);
    EXPECT_EQ(Sync(host).status, 200);
    return id;
  }
  /// Launches `name` for `p` and has its host report the container running; the instance's id.
  std::string StartRunning(Person& p, const std::string& name) {
    auto made = Create(p, name);
    EXPECT_EQ(made.status, 201) << made.body;
    const std::string id = made.Json().value("id", "");
    for (const auto& [h, token] : tokens_) {
      if (InstanceOn(h) == id) {
        EXPECT_EQ(Sync(h, Container(id, core::FormatRfc3339(clock_.NowUnix()))).status, 200);
      }
    }
    return id;
  }
  /// Without a payment method: instance `id` keeps running and its billing session billing, while
  /// a new launch and a restart answer 402 payment_method_required.
  void ExpectKeepsRunningButNoNewLaunch(Person& p, const std::string& id) {
    const json shown = p.browser->Get("/api/v1/instances/" + id).Json();
    EXPECT_EQ(shown["status"], "running") << shown.dump();
    const json usage = p.browser->Get("/api/v1/usage/sessions").Json();
    ASSERT_EQ(usage["items"].size(), 1u) << usage.dump();
    EXPECT_EQ(usage["items"][0]["active"], true);
    ExpectProblem(Create(p, "another"), 402, "payment_method_required");
    ExpectProblem(p.browser->Post("/api/v1/instances/" + id + "/restart", "", "application/json"),
                  402, "payment_method_required");
  }
  /// The stand-in's customer whose email is `email` (null when none).
  json CustomerOf(const std::string& email) {
    for (const auto& c : Objects("customers")) {
      if (c["email"] == email && !c.value("deleted", false)) return c;
    }
    return nullptr;
  }
  /// The stand-in's invoices whose metadata names our invoice `invoice_id`.
  std::vector<json> StripeInvoicesOf(const std::string& invoice_id) {
    std::vector<json> out;
    for (const auto& i : Objects("invoices")) {
      if (i["metadata"].value("gpuwerk_invoice", "") == invoice_id) out.push_back(i);
    }
    return out;
  }
  /// Our invoices of `month`, as the operator's CSV does not say them: straight from the store.
  json OurInvoices(const std::string& month) {
    json out = json::array();
    auto read = app_->database().Read([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_ASSIGN_OR_RETURN(auto rows,
                               tx.Query("SELECT id, billing_account_id, total_minor FROM invoices "
                                        "WHERE month = ? ORDER BY billing_account_id",
                                        {month}));
      for (const auto& r : rows) {
        out.push_back({{"id", r.Text("id")},
                       {"billing_account_id", r.Text("billing_account_id")},
                       {"total_minor", r.Int("total_minor")}});
      }
      return {};
    });
    EXPECT_TRUE(read) << read.error().message;
    return out;
  }
  void AddFault(const json& fault) {
    auto r = hooks_->PostJson("/_test/faults", fault);
    ASSERT_EQ(r.status, 200) << r.body;
  }
  /// The requests of ours the stand-in received for `method` `path`, oldest first; only those
  /// under `key` when it is not empty.
  std::vector<json> Requests(const std::string& method, const std::string& path,
                             const std::string& key = "") {
    std::vector<json> out;
    const json requests = hooks_->Get("/_test/requests").Json()["data"];
    for (const auto& r : requests) {
      if (r["method"] != method || r["path"] != path) continue;
      if (!key.empty() && r["idempotency_key"] != key) continue;
      out.push_back(r);
    }
    return out;
  }
  /// How many of the stand-in's invoice items carry our line `line_id` in metadata[gpuwerk_line].
  size_t ItemsOfLine(const std::string& line_id) {
    size_t n = 0;
    for (const auto& i : Objects("invoiceitems")) {
      if (i["metadata"].value("gpuwerk_line", "") == line_id) ++n;
    }
    return n;
  }
  /// A new person `email` with a card through Checkout (so a Stripe customer), and our invoice
  /// `id` of two lines (1200 + 34 eur) of theirs to push.
  billing::InvoiceToPush InvoiceOfNewCustomer(const std::string& email, const std::string& id) {
    Person p = NewPerson(email, Card::kNone);
    EXPECT_EQ(Deliver(PaidCheckout(p))[0]["status"], 200);
    const json customer = CustomerOf(email);
    EXPECT_TRUE(customer.is_object()) << "no Stripe customer for " << email;
    return {.id = id,
            .billing_account_id =
                customer.is_object() ? customer["metadata"].value("billing_account_id", "") : "",
            .month = "2026-11",
            .currency = "eur",
            .lines = {{.id = id + "_line_1", .description = "gpu", .amount_minor = 1200},
                      {.id = id + "_line_2", .description = "gpu", .amount_minor = 34}},
            .total_minor = 1234};
  }
  /// A day later, and Stripe forgot every idempotency key (Stripe keeps them 24 h).
  void ADayLaterStripeForgotTheKeys() {
    ASSERT_EQ(hooks_->PostJson("/_test/idempotency/expire", json::object()).status, 200);
    clock_.Advance(std::chrono::hours(24));
  }
  /// Exactly one invoice on the stand-in for our `invoice`, finalized (`open`), with one item
  /// per line and nothing else; that invoice.
  json ExpectOneInvoiceWithOneItemPerLine(const billing::InvoiceToPush& invoice) {
    const std::vector<json> on_stripe = StripeInvoicesOf(invoice.id);
    EXPECT_EQ(on_stripe.size(), 1u);
    if (on_stripe.size() != 1) return nullptr;
    EXPECT_EQ(on_stripe[0]["status"], "open");
    EXPECT_EQ(on_stripe[0]["amount_due"], invoice.total_minor);
    EXPECT_EQ(on_stripe[0]["lines"]["data"].size(), invoice.lines.size());
    for (const auto& line : invoice.lines) EXPECT_EQ(ItemsOfLine(line.id), 1u) << line.id;
    return on_stripe[0];
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

TEST_F(StripeProviderTest, AStaleCardSetupEventLeavesStripesDefaultCardOnTheNewerCard) {
  Person pia = NewPerson("pia@example.test", Card::kNone);
  const std::string a = StartCardSetup(pia);
  const std::string b = StartCardSetup(pia);
  const std::string event_a = CompleteCardSetup(a, "1111");
  // Stripe's `created` has whole seconds: B is completed in a later second than A.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const std::string event_b = CompleteCardSetup(b, "2222");
  json d = Deliver(event_b);
  EXPECT_NE(d[0]["body"].get<std::string>().find("applied"), std::string::npos) << d.dump();
  d = Deliver(event_a);
  EXPECT_NE(d[0]["body"].get<std::string>().find("stale"), std::string::npos) << d.dump();
  EXPECT_EQ(pia.browser->Get("/api/v1/billing").Json()["payment_method"]["last4"], "2222");
  const auto [here, there] = CardHereAndAtStripe(pia.email);
  EXPECT_TRUE(here.starts_with("pm_")) << here;
  EXPECT_EQ(here, there);
  ExpectNoViolations();
}

TEST_F(StripeProviderTest, ConcurrentCardSetupEventsEndWithTheSameCardHereAndAtStripe) {
  Person quin = NewPerson("quin@example.test", Card::kNone);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::string> sessions;
    for (int i = 0; i < 4; ++i) sessions.push_back(StartCardSetup(quin));
    std::vector<std::string> events;
    for (int i = 0; i < 4; ++i) {
      events.push_back(
          CompleteCardSetup(sessions[i], "30" + std::to_string(round) + std::to_string(i)));
    }
    std::vector<std::thread> threads;
    const int64_t now = clock_.NowUnix();
    for (const std::string& event : events) {
      threads.emplace_back([&, event] {
        HttpClient hooks(stand_in_.base_url());
        auto r = hooks.PostJson("/_test/events/" + event + "/deliver", {{"timestamp", now}});
        EXPECT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(r.Json()["deliveries"][0]["status"], 200) << r.body;
      });
    }
    for (auto& t : threads) t.join();
    const auto [here, there] = CardHereAndAtStripe(quin.email);
    EXPECT_TRUE(here.starts_with("pm_")) << "round " << round;
    EXPECT_EQ(here, there) << "round " << round;
  }
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

TEST_F(StripeProviderTest, APaymentHoldShowsInMeAndBillingUntilTheInvoiceIsPaid) {
  Person cleo = NewPerson("cleo@example.test", Card::kNone);
  ASSERT_EQ(Deliver(PaidCheckout(cleo))[0]["status"], 200);
  EXPECT_TRUE(cleo.browser->Get("/api/v1/me").Json()["billing"]["payment_hold"].is_null());
  EXPECT_TRUE(cleo.browser->Get("/api/v1/billing").Json()["payment_hold"].is_null());
  const std::string invoice = OpenInvoice(Objects("customers")[0]["id"]);
  ASSERT_EQ(Deliver(InvoiceEvent(invoice, "payment_failed"))[0]["status"], 200);
  const json me = cleo.browser->Get("/api/v1/me").Json()["billing"];
  EXPECT_EQ(me["payment_method_on_file"], true);
  EXPECT_EQ(me["payment_hold"]["invoice_id"], invoice) << me.dump();
  EXPECT_EQ(me["payment_hold"]["reason"], "payment_failed");
  EXPECT_TRUE(me["payment_hold"]["since"].is_string());
  EXPECT_EQ(cleo.browser->Get("/api/v1/billing").Json()["payment_hold"]["invoice_id"], invoice);
  ASSERT_EQ(Deliver(InvoiceEvent(invoice, "paid"))[0]["status"], 200);
  EXPECT_TRUE(cleo.browser->Get("/api/v1/me").Json()["billing"]["payment_hold"].is_null());
  EXPECT_TRUE(cleo.browser->Get("/api/v1/billing").Json()["payment_hold"].is_null());
}

TEST_F(StripeProviderTest, ANewCardPaysTheFailedInvoiceAndLiftsTheHoldADeclinedOneDoesNot) {
  AddHost("spark-a");
  Person finn = NewPerson("finn@example.test", Card::kNone);
  ASSERT_EQ(Deliver(PaidCheckout(finn))[0]["status"], 200);
  const std::string invoice = OpenInvoice(Objects("customers")[0]["id"]);
  ASSERT_EQ(Deliver(InvoiceEvent(invoice, "payment_failed"))[0]["status"], 200);
  const auto refused = Create(finn, "alpha");
  ExpectProblem(refused, 402, "payment_failed");
  const std::string detail = refused.Json().value("detail", "");
  EXPECT_NE(detail.find(invoice), std::string::npos) << detail;
  EXPECT_NE(detail.find("add a card"), std::string::npos) << detail;

  // A card Stripe declines: on file, but the invoice stays unpaid and the hold stays.
  json d = Deliver(CompleteCardSetup(StartCardSetup(finn), "0002"));
  EXPECT_NE(d[0]["body"].get<std::string>().find("applied"), std::string::npos) << d.dump();
  ExpectProblem(Create(finn, "alpha"), 402, "payment_failed");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // a later `created`
  // A good card: it pays the invoice at once, and launches go through.
  d = Deliver(CompleteCardSetup(StartCardSetup(finn), "5556"));
  EXPECT_NE(d[0]["body"].get<std::string>().find("applied"), std::string::npos) << d.dump();
  for (const auto& i : Objects("invoices")) {
    if (i["id"] == invoice) {
      EXPECT_EQ(i["status"], "paid") << i.dump();
    }
  }
  EXPECT_TRUE(finn.browser->Get("/api/v1/me").Json()["billing"]["payment_hold"].is_null());
  const auto created = Create(finn, "alpha");
  EXPECT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'billing.payment_hold_end'"),
            1);
  ExpectNoViolations();
}

TEST_F(StripeProviderTest,
       ATeamStartsWithoutACardGetsItsOwnStripeCustomerAndItsInvoicesAreCollected) {
  AddHost("spark-a");
  Person olga = NewPerson("olga@example.test", Card::kNone);
  ASSERT_EQ(Deliver(PaidCheckout(olga))[0]["status"], 200);
  const json solo_customer = CustomerOf(olga.email);
  ASSERT_TRUE(solo_customer.is_object());
  auto team = olga.browser->PostJson("/api/v1/team", {{"name", "Lab"}});
  ASSERT_EQ(team.status, 201) << team.body;
  const std::string team_id = team.Json().value("id", "");

  // Her card stays her own (shown as such); the team has none until its owner adds one.
  json billing = olga.browser->Get("/api/v1/billing").Json();
  EXPECT_EQ(billing["account"]["id"], team_id);
  EXPECT_TRUE(billing["payment_method"].is_null()) << billing.dump();
  EXPECT_EQ(billing["own_payment_method"]["last4"], "4242") << billing.dump();
  ExpectProblem(Create(olga, "alpha"), 402, "payment_method_required");

  // The owner adds the team's card: a Stripe customer of the team's own.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ASSERT_EQ(Deliver(CompleteCardSetup(StartCardSetup(olga), "4444"))[0]["status"], 200);
  json team_customer;
  for (const auto& c : Objects("customers")) {
    if (c["metadata"].value("billing_account_id", "") == team_id) team_customer = c;
  }
  ASSERT_TRUE(team_customer.is_object());
  EXPECT_NE(team_customer["id"], solo_customer["id"]);
  billing = olga.browser->Get("/api/v1/billing").Json();
  EXPECT_EQ(billing["payment_method"]["last4"], "4444") << billing.dump();
  EXPECT_EQ(billing["own_payment_method"]["last4"], "4242") << billing.dump();
  std::string team_pm;
  for (const auto& pm : Objects("payment_methods")) {
    if (pm["customer"] == team_customer["id"]) team_pm = pm["id"];
  }
  EXPECT_EQ(CustomerOf(olga.email)["id"], solo_customer["id"]);
  for (const auto& c : Objects("customers")) {
    if (c["id"] == team_customer["id"]) {
      EXPECT_EQ(c["invoice_settings"]["default_payment_method"], team_pm);
    }
  }
  EXPECT_EQ(Create(olga, "alpha").status, 201);

  // The team's invoice goes to the team's customer.
  billing::InvoiceToPush invoice{
      .id = "inv_team_1",
      .billing_account_id = team_id,
      .month = "2026-11",
      .currency = "eur",
      .lines = {{.id = "line_t1", .description = "gpu", .amount_minor = 990}},
      .total_minor = 990};
  auto pushed = app_->payment_methods().provider().PushInvoice(invoice);
  ASSERT_TRUE(pushed) << pushed.error().api_code << ": " << pushed.error().message;
  const std::vector<json> on_stripe = StripeInvoicesOf("inv_team_1");
  ASSERT_EQ(on_stripe.size(), 1u);
  EXPECT_EQ(on_stripe[0]["customer"], team_customer["id"]);
  ExpectNoViolations();
}

TEST_F(StripeProviderTest, ACardSetupPutsTheCurrentOwnersAddressOnTheTeamsStripeCustomer) {
  Person ruth = NewPerson("ruth@example.test", Card::kNone);
  Person sam = NewPerson("sam@example.test", Card::kNone);
  auto team = ruth.browser->PostJson("/api/v1/team", {{"name", "Ruths"}});
  ASSERT_EQ(team.status, 201) << team.body;
  const std::string team_id = team.Json().value("id", "");
  StartCardSetup(ruth);
  // sam joins through the mailed invitation and is made an owner; ruth leaves.
  ASSERT_EQ(ruth.browser->PostJson("/api/v1/team/invites", {{"email", sam.email}}).status, 201);
  std::string token;
  for (const auto& m : Mails(sam.email, 1)) {
    if (!m.TokenFromLink("/team/accept").empty()) token = m.TokenFromLink("/team/accept");
  }
  ASSERT_FALSE(token.empty());
  ASSERT_EQ(sam.browser->PostJson("/api/v1/team/invites/accept", {{"token", token}}).status, 200);
  const std::string sam_id = sam.browser->Get("/api/v1/me").Json().value("id", "");
  ASSERT_EQ(ruth.browser
                ->Send("PUT", "/api/v1/team/members/" + sam_id + "/role",
                       json{{"role", "owner"}}.dump(), {"Content-Type: application/json"})
                .status,
            200);
  ASSERT_EQ(ruth.browser->Send("POST", "/api/v1/team/leave", "", {}).status, 204);
  StartCardSetup(sam);
  json team_customer;
  for (const auto& c : Objects("customers")) {
    if (c["metadata"].value("billing_account_id", "") == team_id) team_customer = c;
  }
  ASSERT_TRUE(team_customer.is_object());
  EXPECT_EQ(team_customer["email"], sam.email);
  ExpectNoViolations();
}

TEST_F(StripeProviderTest, ACardSetupStartedAloneAndCompletedAfterMakingATeamStaysHersAndShows) {
  Person pam = NewPerson("pam@example.test", Card::kNone);
  const std::string session = StartCardSetup(pam);
  auto team = pam.browser->PostJson("/api/v1/team", {{"name", "Pams"}});
  ASSERT_EQ(team.status, 201) << team.body;
  const json d = Deliver(CompleteCardSetup(session, "4242"));
  EXPECT_NE(d[0]["body"].get<std::string>().find("applied"), std::string::npos) << d.dump();
  // It went to the account the setup was started for (her own), and she sees it there.
  const json billing = pam.browser->Get("/api/v1/billing").Json();
  EXPECT_EQ(billing["account"]["kind"], "team");
  EXPECT_TRUE(billing["payment_method"].is_null()) << billing.dump();
  EXPECT_EQ(billing["own_payment_method"]["last4"], "4242") << billing.dump();
  EXPECT_NE(billing["how_to_add"].get<std::string>().find("add-card"), std::string::npos);
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
  // The 503 says to try again, and when (Retry-After).
  AddFault({{"method", "POST"},
            {"path", "/v1/checkout/sessions"},
            {"action", "status"},
            {"status", 503},
            {"count", 1}});
  const auto busy = fay.browser->Post("/api/v1/billing/card-setup", "", "application/json");
  ExpectProblem(busy, 503, "provider_unavailable");
  EXPECT_NE(busy.Json().value("detail", "").find("try again"), std::string::npos) << busy.body;
  EXPECT_EQ(busy.Header("retry-after"), "30") << busy.body;
  // A refusal's Stripe code is passed on only when it looks like one of Stripe's codes.
  AddFault({{"method", "POST"},
            {"path", "/v1/checkout/sessions"},
            {"action", "status"},
            {"status", 400},
            {"error", {{"type", "invalid_request_error"}, {"code", "<b>Evil</b>\n"}}},
            {"count", 1}});
  const auto refused = fay.browser->Post("/api/v1/billing/card-setup", "", "application/json");
  ExpectProblem(refused, 409, "stripe_error");
  EXPECT_EQ(refused.body.find("Evil"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("invalid_request_error"), std::string::npos) << refused.body;
  // Stripe back: the same customer serves the next setup.
  EXPECT_EQ(fay.browser->Post("/api/v1/billing/card-setup", "", "application/json").status, 201);
  EXPECT_EQ(Objects("customers").size(), 1u);
}

TEST_F(StripeProviderTest, AMethodDetachedOnStripeIsForgottenAndRunningInstancesKeepRunning) {
  AddHost("spark-a");
  AddHost("spark-b");
  Person gus = NewPerson("gus@example.test", Card::kNone);
  ASSERT_EQ(Deliver(PaidCheckout(gus))[0]["status"], 200);
  const std::string id = StartRunning(gus, "alpha");
  const std::string pm = Objects("payment_methods")[0]["id"];
  auto detached =
      hooks_->PostJson("/_test/payment_methods/" + pm + "/detach", {{"deliver", false}});
  ASSERT_EQ(detached.status, 200) << detached.body;
  const json d = Deliver(detached.Json()["events"].back().get<std::string>());
  EXPECT_EQ(d[0]["status"], 200) << d.dump();
  EXPECT_NE(d[0]["body"].get<std::string>().find("applied"), std::string::npos) << d.dump();
  EXPECT_TRUE(gus.browser->Get("/api/v1/billing").Json()["payment_method"].is_null());
  ExpectKeepsRunningButNoNewLaunch(gus, id);
  // Removing it here afterwards: nothing on file any more.
  ExpectProblem(gus.browser->Delete("/api/v1/billing/payment-method"), 404, "not_found");
}

TEST_F(StripeProviderTest, RemovingTheCardDetachesItAtStripeAndForgetsItHere) {
  AddHost("spark-a");
  AddHost("spark-b");
  Person ida = NewPerson("ida@example.test", Card::kNone);
  ASSERT_EQ(Deliver(PaidCheckout(ida))[0]["status"], 200);
  const std::string id = StartRunning(ida, "alpha");
  const std::string pm = Objects("payment_methods")[0]["id"];
  ASSERT_EQ(Objects("customers")[0]["invoice_settings"]["default_payment_method"], pm);

  auto removed = ida.browser->Delete("/api/v1/billing/payment-method");
  ASSERT_EQ(removed.status, 200) << removed.body;
  EXPECT_EQ(removed.Json()["removed"]["last4"], "4242");
  EXPECT_TRUE(removed.Json()["payment_method"].is_null());
  EXPECT_NE(removed.Json()["message"].get<std::string>().find("Running instances keep running"),
            std::string::npos);
  // Detached at Stripe: no customer, and no longer the customer's default for invoices.
  EXPECT_TRUE(Objects("payment_methods")[0]["customer"].is_null());
  EXPECT_TRUE(Objects("customers")[0]["invoice_settings"]["default_payment_method"].is_null());
  EXPECT_TRUE(ida.browser->Get("/api/v1/billing").Json()["payment_method"].is_null());
  ExpectKeepsRunningButNoNewLaunch(ida, id);

  // Stripe's word of the detach arrives after: nothing more to do, nothing audited twice.
  std::string event;
  const json events = hooks_->Get("/_test/events").Json()["data"];
  for (const auto& e : events) {
    if (e["type"] == "payment_method.detached") event = e["id"];
  }
  ASSERT_FALSE(event.empty());
  const json d = Deliver(event);
  EXPECT_EQ(d[0]["status"], 200) << d.dump();
  EXPECT_NE(d[0]["body"].get<std::string>().find("ignored"), std::string::npos) << d.dump();
  EXPECT_EQ(
      Count("SELECT COUNT(*) FROM audit_events WHERE action = 'billing.payment_method_remove'"), 1);
  ExpectNoViolations();
}

TEST_F(StripeProviderTest, RemovingACardStripeDetachedAlreadyStillRemovesIt) {
  Person jo = NewPerson("jo@example.test", Card::kNone);
  ASSERT_EQ(Deliver(PaidCheckout(jo))[0]["status"], 200);
  const std::string pm = Objects("payment_methods")[0]["id"];
  // Stripe detached it, and its event is not here yet.
  ASSERT_EQ(
      hooks_->PostJson("/_test/payment_methods/" + pm + "/detach", {{"deliver", false}}).status,
      200);
  auto removed = jo.browser->Delete("/api/v1/billing/payment-method");
  ASSERT_EQ(removed.status, 200) << removed.body;
  EXPECT_TRUE(jo.browser->Get("/api/v1/billing").Json()["payment_method"].is_null());
  ExpectNoViolations();
}

TEST_F(StripeProviderTest, TheOperatorClearingAStripeCardDetachesItAtStripe) {
  Person kim = NewPerson("kim@example.test", Card::kNone);
  ASSERT_EQ(Deliver(PaidCheckout(kim))[0]["status"], 200);
  auto cleared = op_->Delete("/api/v1/admin/billing/kim@example.test/card");
  ASSERT_EQ(cleared.status, 200) << cleared.body;
  EXPECT_EQ(cleared.Json()["removed"]["last4"], "4242") << cleared.body;
  EXPECT_TRUE(Objects("payment_methods")[0]["customer"].is_null());
  EXPECT_TRUE(kim.browser->Get("/api/v1/billing").Json()["payment_method"].is_null());
  ExpectNoViolations();
}

TEST_F(StripeProviderTest, TheOperatorReplacingAStripeCardWithAManualOneDetachesItAtStripe) {
  Person lou = NewPerson("lou@example.test", Card::kNone);
  ASSERT_EQ(Deliver(PaidCheckout(lou))[0]["status"], 200);
  const json card = {{"brand", "visa"}, {"last4", "1881"}, {"exp_month", 12}, {"exp_year", 2099}};
  // Stripe unreachable: nothing changes, the Stripe card stays on file.
  AddFault({{"method", "POST"},
            {"path", "/v1/payment_methods/" +
                         Objects("payment_methods")[0]["id"].get<std::string>() + "/detach"},
            {"action", "status"},
            {"status", 500},
            {"count", 1}});
  ExpectProblem(op_->Send("PUT", "/api/v1/admin/billing/lou@example.test/card", card.dump(),
                          {"Content-Type: application/json"}),
                503, "provider_unavailable");
  EXPECT_EQ(lou.browser->Get("/api/v1/billing").Json()["payment_method"]["provider"], "stripe");
  auto set = op_->Send("PUT", "/api/v1/admin/billing/lou@example.test/card", card.dump(),
                       {"Content-Type: application/json"});
  ASSERT_EQ(set.status, 200) << set.body;
  EXPECT_TRUE(Objects("payment_methods")[0]["customer"].is_null());
  EXPECT_TRUE(Objects("customers")[0]["invoice_settings"]["default_payment_method"].is_null());
  const json method = lou.browser->Get("/api/v1/billing").Json()["payment_method"];
  EXPECT_EQ(method["provider"], "manual");
  EXPECT_EQ(method["last4"], "1881");
  ExpectNoViolations();
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

TEST_F(StripeProviderTest, TheMonthClosePushesEachInvoiceAndOneAccountsErrorHoldsUpNoOther) {
  // The fixture's clock starts at 2027-01-15T08:00:00Z: January is the month billed.
  AddHost("spark-a");
  AddHost("spark-b");
  Person ann = NewPerson("ann@example.test", Card::kNone);
  Person ben = NewPerson("ben@example.test", Card::kNone);
  ASSERT_EQ(Deliver(PaidCheckout(ann))[0]["status"], 200);
  ASSERT_EQ(Deliver(PaidCheckout(ben))[0]["status"], 200);
  RunInstance(ann, "alpha", 3660);  // 61 minutes at 65 an hour: 66
  RunInstance(ben, "bravo", 1800);  // 30 minutes: 33
  const std::string ann_customer = CustomerOf("ann@example.test").value("id", "");
  const std::string ben_customer = CustomerOf("ben@example.test").value("id", "");
  ASSERT_FALSE(ann_customer.empty() || ben_customer.empty());
  // Stripe refuses every invoice item of Ann's customer until the test says otherwise.
  AddFault({{"method", "POST"},
            {"path", "/v1/invoiceitems"},
            {"customer", ann_customer},
            {"action", "status"},
            {"status", 400},
            {"error",
             {{"type", "invalid_request_error"},
              {"code", "account_invalid"},
              {"message", "Injected: this customer cannot be invoiced."}}},
            {"count", -1}});

  // Inside the background close's hour of grace: only the operator closes January here.
  SetNow("2027-02-01T00:00:05Z");
  auto closed = op_->PostJson("/api/v1/admin/invoices/close", {{"month", "2027-01"}});
  ASSERT_EQ(closed.status, 200) << closed.body;
  const json answer = closed.Json();
  EXPECT_EQ(answer["invoices_created"], 2);
  const json push = answer["push"];
  ASSERT_TRUE(push.is_object()) << answer.dump();
  EXPECT_EQ(push["provider"], "stripe");
  // Ben's invoice went through (now, or by the background pass a moment before); Ann's did not.
  EXPECT_EQ(push["pushed"].size() + push["pushed_before"].get<size_t>(), 1u) << push.dump();
  ASSERT_EQ(push["failed"].size(), 1u) << push.dump();
  const json failed = push["failed"][0];
  EXPECT_TRUE(failed["billing_account"].get<std::string>().starts_with("solo_"));
  EXPECT_EQ(failed["code"], "stripe_error") << failed.dump();
  EXPECT_NE(failed["message"].get<std::string>().find("account_invalid"), std::string::npos);
  EXPECT_EQ(failed["next_attempt_at"], "2027-02-01T00:01:05Z");
  const json ours = OurInvoices("2027-01");
  ASSERT_EQ(ours.size(), 2u);
  std::map<int64_t, std::string> by_total;  // 66 → Ann's invoice, 33 → Ben's
  for (const auto& inv : ours) by_total[inv["total_minor"].get<int64_t>()] = inv["id"];
  ASSERT_EQ(by_total.count(66) + by_total.count(33), 2u) << ours.dump();
  EXPECT_EQ(failed["invoice"], by_total[66]);
  std::vector<json> ben_on_stripe = StripeInvoicesOf(by_total[33]);
  ASSERT_EQ(ben_on_stripe.size(), 1u);
  EXPECT_EQ(ben_on_stripe[0]["customer"], ben_customer);
  EXPECT_EQ(ben_on_stripe[0]["amount_due"], 33);
  EXPECT_EQ(ben_on_stripe[0]["currency"], "usd");
  EXPECT_EQ(ben_on_stripe[0]["status"], "open");  // finalized
  EXPECT_EQ(ben_on_stripe[0]["metadata"]["month"], "2027-01");
  ASSERT_EQ(ben_on_stripe[0]["lines"]["data"].size(), 1u);
  EXPECT_EQ(ben_on_stripe[0]["lines"]["data"][0]["description"],
            "bravo (spark-1x), 30 minutes, 2027-01");
  EXPECT_TRUE(StripeInvoicesOf(by_total[66]).empty());

  // Not due again before a minute has passed; the next background pass after it tries again,
  // and with Stripe fixed, Ann's invoice goes through too.
  auto early = app_->PushDueInvoicesNow();
  ASSERT_TRUE(early) << early.error().message;
  EXPECT_TRUE(early->results.empty());
  ASSERT_EQ(hooks_->Delete("/_test/faults").status, 200);
  clock_.Advance(std::chrono::seconds(61));
  auto retried = app_->PushDueInvoicesNow();
  ASSERT_TRUE(retried) << retried.error().message;
  std::vector<json> ann_on_stripe = StripeInvoicesOf(by_total[66]);
  ASSERT_EQ(ann_on_stripe.size(), 1u) << "not pushed by the next pass";
  EXPECT_EQ(ann_on_stripe[0]["customer"], ann_customer);
  EXPECT_EQ(ann_on_stripe[0]["amount_due"], 66);
  EXPECT_EQ(ann_on_stripe[0]["status"], "open");
  EXPECT_EQ(Objects("invoices").size(), 2u);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM invoice_pushes WHERE pushed_at IS NOT NULL"), 2);
  EXPECT_EQ(Count("SELECT attempts FROM invoice_pushes WHERE invoice_id = '" + by_total[66] + "'"),
            2);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'billing.invoice_push'"), 2);

  // Closing again pushes nothing twice.
  auto again = op_->PostJson("/api/v1/admin/invoices/close", {{"month", "2027-01"}});
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.Json()["push"]["pushed"].size(), 0u) << again.body;
  EXPECT_EQ(again.Json()["push"]["pushed_before"], 2);
  EXPECT_EQ(again.Json()["push"]["failed"].size(), 0u);
  EXPECT_EQ(Objects("invoices").size(), 2u);
  EXPECT_EQ(Objects("invoiceitems").size(), 2u);
  ExpectNoViolations();
}

TEST_F(StripeProviderTest, AClosePushWhoseAnswerWasLostIsResentWithTheSameBodyByTheNextPass) {
  AddHost("spark-a");
  Person cat = NewPerson("cat@example.test", Card::kNone);
  ASSERT_EQ(Deliver(PaidCheckout(cat))[0]["status"], 200);
  RunInstance(cat, "alpha", 600);
  // Stripe makes the invoice, but its answer never arrives.
  AddFault({{"method", "POST"}, {"path", "/v1/invoices"}, {"action", "drop"}, {"count", 1}});
  SetNow("2027-02-01T00:00:05Z");
  auto closed = op_->PostJson("/api/v1/admin/invoices/close", {{"month", "2027-01"}});
  ASSERT_EQ(closed.status, 200) << closed.body;
  const json push = closed.Json()["push"];
  ASSERT_EQ(push["failed"].size(), 1u) << push.dump();
  EXPECT_EQ(push["failed"][0]["code"], "provider_unavailable");
  clock_.Advance(std::chrono::seconds(61));
  auto retried = app_->PushDueInvoicesNow();
  ASSERT_TRUE(retried) << retried.error().message;
  ASSERT_EQ(retried->results.size(), 1u);
  EXPECT_TRUE(retried->results[0].pushed) << retried->results[0].error_message;

  const json invoices = Objects("invoices");
  ASSERT_EQ(invoices.size(), 1u);
  EXPECT_EQ(invoices[0]["id"], retried->results[0].provider_ref);
  EXPECT_EQ(invoices[0]["amount_due"], 11);  // 10 minutes at 65 an hour: 10.83
  EXPECT_EQ(invoices[0]["status"], "open");
  // The invoice was asked for twice, with the same key and the very same parameters: Stripe
  // replayed its first answer.
  std::vector<json> creates;
  const json requests = hooks_->Get("/_test/requests").Json()["data"];
  for (const auto& r : requests) {
    if (r["method"] == "POST" && r["path"] == "/v1/invoices") creates.push_back(r);
  }
  ASSERT_EQ(creates.size(), 2u);
  EXPECT_EQ(creates[0]["idempotency_key"], creates[1]["idempotency_key"]);
  EXPECT_EQ(creates[0]["params"], creates[1]["params"]);
  EXPECT_EQ(Objects("invoiceitems").size(), 1u);
  ExpectNoViolations();
}

// The stripe provider with the server's mail going to a real SMTP server (aiosmtpd).
class StripeSmtpTest : public WithSmtpSink<StripeProviderTest> {
 protected:
  void Customize(app::ServerConfig& c) override {
    StripeProviderTest::Customize(c);
    WithSmtpSink<StripeProviderTest>::Customize(c);
  }
  /// `owner` invites `p` to their team; `p` accepts with the mailed link's token.
  void JoinTeam(Person& owner, Person& p) {
    const size_t before = MailsTo(inbox(), p.email).size();
    auto invited = owner.browser->PostJson("/api/v1/team/invites", {{"email", p.email}});
    ASSERT_EQ(invited.status, 201) << invited.body;
    auto mails = Received(p.email, before + 1);
    ASSERT_EQ(mails.size(), before + 1);
    std::string token;
    for (const auto& m : mails) {
      if (!m.TokenFromLink("/team/accept").empty()) token = m.TokenFromLink("/team/accept");
    }
    ASSERT_FALSE(token.empty());
    auto accepted = p.browser->PostJson("/api/v1/team/invites/accept", {{"token", token}});
    ASSERT_EQ(accepted.status, 200) << accepted.body;
  }
  /// The payment-failed mails `to` has received (waiting up to 10 s for `count`).
  std::vector<ReceivedMail> PaymentFailedMails(const std::string& to, size_t count) {
    std::vector<ReceivedMail> out;
    for (int i = 0; i < 100; ++i) {
      out.clear();
      for (auto& m : Received(to, 0)) {
        if (m.subject == "gpuwerk: a payment failed") out.push_back(std::move(m));
      }
      if (out.size() >= count) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return out;
  }
};

TEST_F(StripeSmtpTest, ATeamsFailedPaymentMailsEveryOwnerAndHoldsEveryMembersLaunchesUntilPaid) {
  AddHost("spark-a");
  AddHost("spark-b");
  Person olga = NewPerson("olga@example.test", Card::kNone);
  Person max = NewPerson("max@example.test", Card::kNone);
  Person nina = NewPerson("nina@example.test", Card::kNone);
  auto team = olga.browser->PostJson("/api/v1/team", {{"name", "Lab"}});
  ASSERT_EQ(team.status, 201) << team.body;
  const std::string team_id = team.Json().value("id", "");
  ASSERT_TRUE(team_id.starts_with("team_")) << team.body;
  JoinTeam(olga, max);
  JoinTeam(olga, nina);
  ASSERT_FALSE(HasFatalFailure());
  const std::string nina_id = nina.browser->Get("/api/v1/me").Json().value("id", "");
  auto promoted =
      olga.browser->Send("PUT", "/api/v1/team/members/" + nina_id + "/role",
                         json{{"role", "owner"}}.dump(), {"Content-Type: application/json"});
  ASSERT_EQ(promoted.status, 200) << promoted.body;
  // The owner pays for the team through Checkout; the member launches on the team's card.
  ASSERT_EQ(Deliver(PaidCheckout(olga))[0]["status"], 200);
  const json customer = Objects("customers")[0];
  EXPECT_EQ(customer["metadata"]["billing_account_id"], team_id);
  const std::string alpha = StartRunning(max, "alpha");

  const std::string invoice = OpenInvoice(customer["id"]);
  ASSERT_EQ(Deliver(InvoiceEvent(invoice, "payment_failed"))[0]["status"], 200);
  // Every launch and restart billed to the team waits for the payment; the running instance
  // runs on.
  const auto max_refused = Create(max, "bravo");
  ExpectProblem(max_refused, 402, "payment_failed");
  // The member is told whom to ask (the owners, by address), not to add a card herself.
  const std::string max_detail = max_refused.Json().value("detail", "");
  EXPECT_NE(max_detail.find(olga.email), std::string::npos) << max_detail;
  EXPECT_NE(max_detail.find(nina.email), std::string::npos) << max_detail;
  EXPECT_EQ(max_detail.find("add a card ("), std::string::npos) << max_detail;
  ExpectProblem(
      max.browser->Post("/api/v1/instances/" + alpha + "/restart", "", "application/json"), 402,
      "payment_failed");
  ExpectProblem(Create(olga, "charlie"), 402, "payment_failed");
  EXPECT_EQ(max.browser->Get("/api/v1/instances/" + alpha).Json()["status"], "running");
  // Both owners are mailed, through SMTP, naming the team; the member is not.
  for (const std::string& owner : {olga.email, nina.email}) {
    const auto mails = PaymentFailedMails(owner, 1);
    ASSERT_EQ(mails.size(), 1u) << owner;
    EXPECT_NE(mails[0].text_body.find("team \"Lab\""), std::string::npos) << mails[0].text_body;
    EXPECT_NE(mails[0].text_body.find(invoice), std::string::npos) << mails[0].text_body;
    EXPECT_NE(mails[0].text_body.find("/billing"), std::string::npos) << mails[0].text_body;
  }
  EXPECT_TRUE(PaymentFailedMails(max.email, 0).empty());

  // Paid: the team's members launch again.
  ASSERT_EQ(Deliver(InvoiceEvent(invoice, "paid"))[0]["status"], 200);
  const auto created = Create(max, "bravo");
  EXPECT_EQ(created.status, 201) << created.body;
  ExpectNoViolations();
}

TEST_F(StripeProviderTest, AnInvoiceWhoseAnswerWasLostIsFoundAfterStripeForgotTheKeyNotMadeTwice) {
  const billing::InvoiceToPush invoice = InvoiceOfNewCustomer("ida@example.test", "inv_lc");
  const std::string customer = CustomerOf("ida@example.test").value("id", "");
  // The same provider as the server's, looking up two objects a page so that it has to page.
  billing::StripeClient client({.api_base = stand_in_.base_url(), .secret_key = kKey});
  billing::StripeProvider provider(app_->database(), clock_, client,
                                   {.public_url = app_->base_url(), .lookup_page_size = 2});
  // Stripe makes the invoice (with both items), but its answer never arrives.
  AddFault({{"method", "POST"}, {"path", "/v1/invoices"}, {"action", "drop"}, {"count", 1}});
  auto lost = provider.PushInvoice(invoice);
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().api_code, "provider_unavailable");
  // Newer invoices of the same customer: ours ends up on the third page of two.
  for (int i = 0; i < 4; ++i) OpenInvoice(customer);
  ADayLaterStripeForgotTheKeys();

  // A look-up that fails sends nothing.
  AddFault({{"method", "GET"},
            {"path", "/v1/invoices"},
            {"action", "status"},
            {"status", 503},
            {"count", 1}});
  auto unsure = provider.PushInvoice(invoice);
  ASSERT_FALSE(unsure);
  EXPECT_EQ(unsure.error().api_code, "provider_unavailable");
  EXPECT_EQ(Requests("POST", "/v1/invoices", "gpuwerk-invoice-inv_lc").size(), 1u);

  auto pushed = provider.PushInvoice(invoice);
  ASSERT_TRUE(pushed) << pushed.error().message;
  const json ours = ExpectOneInvoiceWithOneItemPerLine(invoice);
  ASSERT_TRUE(ours.is_object());
  EXPECT_EQ(ours["id"], pushed->provider_ref);
  // Found, not sent again; finalized with its own (fresh) request.
  EXPECT_EQ(Requests("POST", "/v1/invoices", "gpuwerk-invoice-inv_lc").size(), 1u);
  EXPECT_EQ(Objects("invoices").size(), 5u);
  const std::vector<json> lists = Requests("GET", "/v1/invoices");
  ASSERT_EQ(lists.size(), 4u);  // the failed one, then three pages
  size_t paged = 0;
  for (const auto& r : lists) {
    EXPECT_NE(
        std::find(r["params"].begin(), r["params"].end(), json::array({"customer", customer})),
        r["params"].end())
        << r.dump();
    for (const auto& kv : r["params"]) paged += kv[0] == "starting_after";
  }
  EXPECT_EQ(paged, 2u);
  EXPECT_EQ(Requests("POST", "/v1/invoices/" + pushed->provider_ref + "/finalize").size(), 1u);
  ExpectNoViolations();
}

/// A request of an invoice push whose answer is lost (Stripe did it), retried only after Stripe
/// forgot its idempotency key: the retry finds what it made instead of making it again.
class StripeLostAnswerTest;
struct LostAnswerCase {
  const char* name;        ///< the test's name: what was lost
  const char* email;       ///< a new customer's
  const char* invoice_id;  ///< our invoice's id
  json fault;              ///< the stand-in's fault that drops Stripe's answer once
  /// The case's own assertions after the retry pushed `pushed`.
  void (*expect)(StripeLostAnswerTest& test, const billing::PushedInvoice& pushed);
};

/// Names the case in gtest's output (instead of its bytes).
void PrintTo(const LostAnswerCase& c, std::ostream* os) { *os << c.name; }

class StripeLostAnswerTest : public StripeProviderTest,
                             public ::testing::WithParamInterface<LostAnswerCase> {
 public:
  /// An invoice item's answer lost: only that item was looked up; the invoice and its finalize
  /// were fresh requests, sent without a look-up.
  static void ExpectItemFound(StripeLostAnswerTest& t, const billing::PushedInvoice&) {
    EXPECT_EQ(t.Objects("invoices").size(), 1u);
    EXPECT_EQ(t.Objects("invoiceitems").size(), 2u);
    EXPECT_EQ(t.Requests("POST", "/v1/invoiceitems", "gpuwerk-invoiceitem-inv_li_line_1").size(),
              1u);
    EXPECT_EQ(t.Requests("GET", "/v1/invoiceitems").size(), 1u);
    EXPECT_TRUE(t.Requests("GET", "/v1/invoices").empty());
  }
  /// A finalize's answer lost: found finalized, not finalized twice (Stripe would refuse a second
  /// finalize of a non-draft invoice).
  static void ExpectFinalizeFound(StripeLostAnswerTest& t, const billing::PushedInvoice& pushed) {
    EXPECT_EQ(pushed.status, "open");
    const std::string path = "/v1/invoices/" + pushed.provider_ref;
    EXPECT_EQ(t.Requests("POST", path + "/finalize").size(), 1u);
    EXPECT_EQ(t.Requests("GET", path).size(), 1u);
    EXPECT_EQ(t.Requests("POST", "/v1/invoices").size(), 1u);
  }
};

TEST_P(StripeLostAnswerTest, IsFoundAfterStripeForgotTheKeyNotMadeTwice) {
  const LostAnswerCase& c = GetParam();
  const billing::InvoiceToPush invoice = InvoiceOfNewCustomer(c.email, c.invoice_id);
  auto& provider = app_->payment_methods().provider();
  // Stripe does it, but its answer never arrives.
  AddFault(c.fault);
  auto lost = provider.PushInvoice(invoice);
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().api_code, "provider_unavailable");
  ADayLaterStripeForgotTheKeys();

  auto pushed = provider.PushInvoice(invoice);
  ASSERT_TRUE(pushed) << pushed.error().message;
  const json ours = ExpectOneInvoiceWithOneItemPerLine(invoice);
  ASSERT_TRUE(ours.is_object());
  EXPECT_EQ(ours["id"], pushed->provider_ref);
  c.expect(*this, *pushed);
  ExpectNoViolations();
}

INSTANTIATE_TEST_SUITE_P(
    Requests, StripeLostAnswerTest,
    ::testing::Values(LostAnswerCase{.name = "AnInvoiceItem",
                                     .email = "jon@example.test",
                                     .invoice_id = "inv_li",
                                     .fault = {{"method", "POST"},
                                               {"path", "/v1/invoiceitems"},
                                               {"action", "drop"},
                                               {"count", 1}},
                                     .expect = &StripeLostAnswerTest::ExpectItemFound},
                      LostAnswerCase{.name = "AFinalize",
                                     .email = "kai@example.test",
                                     .invoice_id = "inv_lf",
                                     .fault = {{"method", "POST"},
                                               {"path", "/v1/invoices/[^/]+/finalize"},
                                               {"action", "drop"},
                                               {"count", 1}},
                                     .expect = &StripeLostAnswerTest::ExpectFinalizeFound}),
    [](const ::testing::TestParamInfo<LostAnswerCase>& info) { return info.param.name; });

TEST_F(StripeProviderTest, ARequestThatMadeNothingIsSentAfterTheLookUpFindsNothing) {
  const billing::InvoiceToPush invoice = InvoiceOfNewCustomer("lea@example.test", "inv_ln");
  auto& provider = app_->payment_methods().provider();
  // Stripe answers 500 before it makes the invoice (nothing stored under the key).
  AddFault({{"method", "POST"},
            {"path", "/v1/invoices"},
            {"action", "status"},
            {"status", 500},
            {"count", 1}});
  auto failed = provider.PushInvoice(invoice);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().api_code, "provider_unavailable");
  EXPECT_TRUE(Objects("invoices").empty());
  ADayLaterStripeForgotTheKeys();

  auto pushed = provider.PushInvoice(invoice);
  ASSERT_TRUE(pushed) << pushed.error().message;
  const json ours = ExpectOneInvoiceWithOneItemPerLine(invoice);
  ASSERT_TRUE(ours.is_object());
  EXPECT_EQ(ours["id"], pushed->provider_ref);
  // Looked up (nothing found), then sent with the same key and the very same parameters.
  EXPECT_EQ(Requests("GET", "/v1/invoices").size(), 1u);
  const std::vector<json> creates = Requests("POST", "/v1/invoices");
  ASSERT_EQ(creates.size(), 2u);
  EXPECT_EQ(creates[0]["idempotency_key"], "gpuwerk-invoice-inv_ln");
  EXPECT_EQ(creates[1]["idempotency_key"], creates[0]["idempotency_key"]);
  EXPECT_EQ(creates[1]["params"], creates[0]["params"]);
  ExpectNoViolations();
}

TEST_F(StripeProviderTest, ARetryWithinStripesKeyWindowResendsTheSameBodyUnderTheSameKey) {
  const billing::InvoiceToPush invoice = InvoiceOfNewCustomer("max@example.test", "inv_lw");
  auto& provider = app_->payment_methods().provider();
  AddFault({{"method", "POST"}, {"path", "/v1/invoices"}, {"action", "drop"}, {"count", 1}});
  ASSERT_FALSE(provider.PushInvoice(invoice));
  // Just inside the margin: Stripe still has the key, so the request is resent as it is.
  clock_.Advance(billing::kStripeKeySafeAge - std::chrono::seconds(1));

  auto pushed = provider.PushInvoice(invoice);
  ASSERT_TRUE(pushed) << pushed.error().message;
  const json ours = ExpectOneInvoiceWithOneItemPerLine(invoice);
  ASSERT_TRUE(ours.is_object());
  EXPECT_EQ(ours["id"], pushed->provider_ref);
  EXPECT_TRUE(Requests("GET", "/v1/invoices").empty());
  const std::vector<json> creates = Requests("POST", "/v1/invoices");
  ASSERT_EQ(creates.size(), 2u);
  EXPECT_EQ(creates[0]["idempotency_key"], "gpuwerk-invoice-inv_lw");
  EXPECT_EQ(creates[1]["idempotency_key"], creates[0]["idempotency_key"]);
  EXPECT_EQ(creates[1]["params"], creates[0]["params"]);
  EXPECT_EQ(Objects("invoices").size(), 1u);
  ExpectNoViolations();
}

// Card setups (docs/billing.md "Card setups"): a setup is applied only for the person who began
// it while they still manage the account, only while its card is attached to the account's
// live customer, and never over a change made here after it began; a card it does not put on
// file, or one it replaces, is detached at Stripe.
class StripeCardSetupTest : public StripeProviderTest {
 protected:
  /// `member` joins `owner`'s team through the mailed invitation; their person id.
  std::string Join(Person& owner, Person& member) {
    const size_t before = MailsTo(config_.data_dir / "mail", member.email).size();
    EXPECT_EQ(owner.browser->PostJson("/api/v1/team/invites", {{"email", member.email}}).status,
              201);
    std::string token;
    for (const auto& m : Mails(member.email, before + 1)) {
      if (!m.TokenFromLink("/team/accept").empty()) token = m.TokenFromLink("/team/accept");
    }
    EXPECT_FALSE(token.empty());
    EXPECT_EQ(member.browser->PostJson("/api/v1/team/invites/accept", {{"token", token}}).status,
              200);
    return member.browser->Get("/api/v1/me").Json().value("id", "");
  }
  HttpResult SetRole(Person& owner, const std::string& person_id, const std::string& role) {
    return owner.browser->Send("PUT", "/api/v1/team/members/" + person_id + "/role",
                               json{{"role", role}}.dump(), {"Content-Type: application/json"});
  }
  /// The stand-in's payment method whose card ends `last4` (null when none).
  json StripeCard(const std::string& last4) {
    for (const auto& pm : Objects("payment_methods")) {
      if (pm["card"]["last4"] == last4) return pm;
    }
    return nullptr;
  }
  static std::string Result(const json& deliveries) {
    if (!deliveries.is_array() || deliveries.empty()) return "";
    const json body = json::parse(deliveries[0].value("body", ""), nullptr, false);
    return body.is_object() ? body.value("result", body.value("code", "")) : "";
  }
};

TEST_F(StripeCardSetupTest, ARemovedOrDemotedOwnersLateCardSetupIsRefusedAndDetached) {
  Person bob = NewPerson("bob@example.test", Card::kNone);
  Person dave = NewPerson("dave@example.test", Card::kNone);
  Person erin = NewPerson("erin@example.test", Card::kNone);
  ASSERT_EQ(bob.browser->PostJson("/api/v1/team", {{"name", "Bobs"}}).status, 201);
  ASSERT_EQ(Deliver(CompleteCardSetup(StartCardSetup(bob), "4242"))[0]["status"], 200);
  const std::string dave_id = Join(bob, dave);
  const std::string erin_id = Join(bob, erin);
  ASSERT_EQ(SetRole(bob, dave_id, "owner").status, 200);
  ASSERT_EQ(SetRole(bob, erin_id, "owner").status, 200);
  const std::string dave_session = StartCardSetup(dave);
  const std::string erin_session = StartCardSetup(erin);
  // Dave is removed, erin made a member again; then their Checkouts complete.
  ASSERT_EQ(bob.browser->Delete("/api/v1/team/members/" + dave_id).status, 204);
  ASSERT_EQ(SetRole(bob, erin_id, "member").status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // a later `created`
  EXPECT_EQ(Result(Deliver(CompleteCardSetup(dave_session, "0002"))), "refused");
  EXPECT_EQ(Result(Deliver(CompleteCardSetup(erin_session, "8888"))), "refused");

  // The team's card is still bob's; theirs are detached at Stripe, and Stripe's default for
  // the team is bob's card.
  const json billing = bob.browser->Get("/api/v1/billing").Json();
  EXPECT_EQ(billing["payment_method"]["last4"], "4242") << billing.dump();
  EXPECT_TRUE(StripeCard("0002")["customer"].is_null());
  EXPECT_TRUE(StripeCard("8888")["customer"].is_null());
  const json team_customer = StripeCard("4242")["customer"];
  for (const auto& c : Objects("customers")) {
    if (c["id"] == team_customer) {
      EXPECT_EQ(c["invoice_settings"]["default_payment_method"], StripeCard("4242")["id"]);
    }
  }
  EXPECT_TRUE(dave.browser->Get("/api/v1/billing").Json()["payment_method"].is_null());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'billing.card_setup_refused'"),
            2);
  ExpectNoViolations();
}

TEST_F(StripeCardSetupTest, ACardDetachedBeforeItsCheckoutEventArrivesIsNotPutOnFile) {
  AddHost("spark-a");
  Person alice = NewPerson("alice@example.test", Card::kNone);
  const std::string event = CompleteCardSetup(StartCardSetup(alice), "4242");
  const std::string pm = StripeCard("4242")["id"];
  // The detach is delivered first: nothing on file yet, so nothing to forget.
  auto detached =
      hooks_->PostJson("/_test/payment_methods/" + pm + "/detach", {{"deliver", false}});
  ASSERT_EQ(detached.status, 200) << detached.body;
  EXPECT_EQ(Result(Deliver(detached.Json()["events"].back().get<std::string>())), "ignored");
  // The older checkout event: its card is attached to nobody, so it is not put on file.
  EXPECT_EQ(Result(Deliver(event)), "stale");
  EXPECT_TRUE(alice.browser->Get("/api/v1/billing").Json()["payment_method"].is_null());
  EXPECT_EQ(alice.browser->Get("/api/v1/me").Json()["billing"]["payment_method_on_file"], false);
  ExpectProblem(Create(alice, "alpha"), 402, "payment_method_required");
}

TEST_F(StripeCardSetupTest, ALateCardSetupNeverOverridesTheOperatorsNewerCard) {
  Person dave = NewPerson("dave@example.test", Card::kNone);
  const std::string event = CompleteCardSetup(StartCardSetup(dave), "3000");
  auto set = op_->Send(
      "PUT", "/api/v1/admin/billing/dave@example.test/card",
      json{{"brand", "amex"}, {"last4", "1005"}, {"exp_month", 5}, {"exp_year", 2031}}.dump(),
      {"Content-Type: application/json"});
  ASSERT_EQ(set.status, 200) << set.body;
  EXPECT_EQ(Result(Deliver(event)), "stale");
  const json method = dave.browser->Get("/api/v1/billing").Json()["payment_method"];
  EXPECT_EQ(method["provider"], "manual") << method.dump();
  EXPECT_EQ(method["last4"], "1005");
  EXPECT_TRUE(StripeCard("3000")["customer"].is_null());  // not left attached at Stripe
  ExpectNoViolations();
}

TEST_F(StripeCardSetupTest, ALateCardSetupOfADeletedCustomerIsNotPutOnFile) {
  Person hal = NewPerson("hal@example.test", Card::kNone);
  const std::string event = CompleteCardSetup(StartCardSetup(hal), "4242");
  const std::string customer = CustomerOf(hal.email)["id"];
  ASSERT_EQ(api_->Delete("/v1/customers/" + customer).status, 200);
  std::string deleted;
  const json events = hooks_->Get("/_test/events").Json()["data"];
  for (const auto& e : events) {
    if (e["type"] == "customer.deleted") deleted = e["id"];
  }
  ASSERT_FALSE(deleted.empty());
  EXPECT_EQ(Result(Deliver(deleted)), "applied");
  EXPECT_EQ(Result(Deliver(event)), "stale");
  EXPECT_TRUE(hal.browser->Get("/api/v1/billing").Json()["payment_method"].is_null());
}

TEST_F(StripeCardSetupTest, AnOwnFailedPaymentHoldsLaunchesInATeamAndRefusesMakingOne) {
  AddHost("spark-a");
  AddHost("spark-b");
  Person carol = NewPerson("carol@example.test", Card::kNone);
  Person tess = NewPerson("tess@example.test");  // a team with a card (recorded)
  ASSERT_EQ(Deliver(PaidCheckout(carol))[0]["status"], 200);
  const std::string invoice = OpenInvoice(CustomerOf(carol.email)["id"]);
  ASSERT_EQ(Deliver(InvoiceEvent(invoice, "payment_failed"))[0]["status"], 200);
  ExpectProblem(Create(carol, "c2"), 402, "payment_failed");

  // Making a team is refused, and nothing is made.
  const auto made = carol.browser->PostJson("/api/v1/team", {{"name", "C-team"}});
  ExpectProblem(made, 402, "payment_failed");
  EXPECT_NE(made.Json().value("detail", "").find(invoice), std::string::npos) << made.body;
  ExpectProblem(carol.browser->Get("/api/v1/team"), 404, "no_team");

  // In someone else's team with a card: still refused, and shown.
  ASSERT_EQ(tess.browser->PostJson("/api/v1/team", {{"name", "Tess"}}).status, 201);
  ASSERT_EQ(
      op_->Send("PUT", "/api/v1/admin/billing/teams/Tess/card",
                json{{"brand", "visa"}, {"last4", "4242"}, {"exp_month", 12}, {"exp_year", 2099}}
                    .dump(),
                {"Content-Type: application/json"})
          .status,
      200);
  Join(tess, carol);
  ExpectProblem(Create(carol, "c2"), 402, "payment_failed");
  EXPECT_EQ(carol.browser->Get("/api/v1/me").Json()["billing"]["payment_hold"]["invoice_id"],
            invoice);
  EXPECT_EQ(carol.browser->Get("/api/v1/billing").Json()["own_payment_hold"]["invoice_id"],
            invoice);
  EXPECT_EQ(Create(tess, "t1").status, 201);  // the team's other members launch

  // Paid: she launches, billed to the team.
  ASSERT_EQ(Deliver(InvoiceEvent(invoice, "paid"))[0]["status"], 200);
  EXPECT_EQ(Create(carol, "c2").status, 201);
}

TEST_F(StripeCardSetupTest, CardSetupsAreLimitedPerPersonWithRetryAfter) {
  Person dora = NewPerson("dora@example.test", Card::kNone);
  for (int i = 0; i < billing::kCardSetupsPerPerson.limit; ++i) {
    ASSERT_EQ(dora.browser->Post("/api/v1/billing/card-setup", "", "application/json").status, 201)
        << i;
  }
  const size_t sessions = Objects("checkout_sessions").size();
  const auto limited = dora.browser->Post("/api/v1/billing/card-setup", "", "application/json");
  ExpectProblem(limited, 429, "rate_limited");
  EXPECT_FALSE(limited.Header("retry-after").empty()) << limited.body;
  EXPECT_EQ(Objects("checkout_sessions").size(), sessions);  // nothing asked of Stripe
  clock_.Advance(std::chrono::hours(1) + std::chrono::seconds(1));
  EXPECT_EQ(dora.browser->Post("/api/v1/billing/card-setup", "", "application/json").status, 201);
}

TEST_F(StripeCardSetupTest, ACardReplacedThroughCheckoutOrDroppedAsStaleIsDetachedAtStripe) {
  Person bea = NewPerson("bea@example.test", Card::kNone);
  ASSERT_EQ(Result(Deliver(CompleteCardSetup(StartCardSetup(bea), "1111"))), "applied");
  // Replaced by a newer Checkout: the old card is detached.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ASSERT_EQ(Result(Deliver(CompleteCardSetup(StartCardSetup(bea), "2222"))), "applied");
  EXPECT_TRUE(StripeCard("1111")["customer"].is_null());
  EXPECT_FALSE(StripeCard("2222")["customer"].is_null());
  // Two more; the newer delivered first, the older then stale and detached.
  const std::string a = StartCardSetup(bea);
  const std::string b = StartCardSetup(bea);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const std::string event_a = CompleteCardSetup(a, "3333");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const std::string event_b = CompleteCardSetup(b, "4444");
  EXPECT_EQ(Result(Deliver(event_b)), "applied");
  EXPECT_EQ(Result(Deliver(event_a)), "stale");
  EXPECT_EQ(bea.browser->Get("/api/v1/billing").Json()["payment_method"]["last4"], "4444");
  EXPECT_TRUE(StripeCard("2222")["customer"].is_null());
  EXPECT_TRUE(StripeCard("3333")["customer"].is_null());
  EXPECT_FALSE(StripeCard("4444")["customer"].is_null());
  const auto [here, there] = CardHereAndAtStripe(bea.email);
  EXPECT_EQ(here, StripeCard("4444")["id"]);
  EXPECT_EQ(here, there);
  ExpectNoViolations();
}

TEST_F(StripeCardSetupTest, A503AfterTheCardWasRecordedSaysSoAndTheDeliveryAgainSetsTheDefault) {
  Person dave = NewPerson("dave@example.test", Card::kNone);
  const std::string event = CompleteCardSetup(StartCardSetup(dave), "7007");
  const std::string customer = CustomerOf(dave.email)["id"];
  AddFault({{"method", "POST"},
            {"path", "/v1/customers/" + customer},
            {"action", "status"},
            {"status", 500},
            {"count", 1}});
  json d = Deliver(event);
  ASSERT_EQ(d[0]["status"], 503) << d.dump();
  const std::string body = d[0]["body"];
  EXPECT_NE(body.find("recorded here"), std::string::npos) << body;
  EXPECT_EQ(body.find("othing was changed"), std::string::npos) << body;
  EXPECT_EQ(dave.browser->Get("/api/v1/billing").Json()["payment_method"]["last4"], "7007");
  EXPECT_TRUE(CustomerOf(dave.email)["invoice_settings"]["default_payment_method"].is_null());
  d = Deliver(event);
  EXPECT_EQ(Result(d), "duplicate") << d.dump();
  EXPECT_EQ(CustomerOf(dave.email)["invoice_settings"]["default_payment_method"],
            StripeCard("7007")["id"]);
}

TEST_F(StripeCardSetupTest, ATeamMemberRemovesTheirOwnCardWhichIsDetachedAtStripe) {
  Person olga = NewPerson("olga@example.test", Card::kNone);
  ASSERT_EQ(Deliver(PaidCheckout(olga))[0]["status"], 200);
  ASSERT_EQ(olga.browser->PostJson("/api/v1/team", {{"name", "Lab"}}).status, 201);
  // The team has no card: the team's route finds none; her own goes by its own route.
  ExpectProblem(olga.browser->Delete("/api/v1/billing/payment-method"), 404, "not_found");
  auto removed = olga.browser->Delete("/api/v1/billing/own-payment-method");
  ASSERT_EQ(removed.status, 200) << removed.body;
  EXPECT_EQ(removed.Json()["removed"]["last4"], "4242");
  EXPECT_TRUE(removed.Json()["own_payment_method"].is_null()) << removed.body;
  EXPECT_TRUE(StripeCard("4242")["customer"].is_null());
  ExpectProblem(olga.browser->Delete("/api/v1/billing/own-payment-method"), 404, "not_found");
  EXPECT_EQ(
      Count("SELECT COUNT(*) FROM audit_events WHERE action = 'billing.payment_method_remove'"), 1);
}

}  // namespace
}  // namespace gpuwerk::testing
