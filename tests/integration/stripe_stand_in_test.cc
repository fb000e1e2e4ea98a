// The Stripe stand-in (tests/support/stripe_stand_in.py) answers as Stripe's published OpenAPI
// description and documentation say, so that tests of the stripe provider against it do not
// share our own misreadings: unknown parameters refused, idempotency keys as Stripe checks
// them, deleted customers, Checkout in setup mode completed by the test, invoices with pending
// items, lists of invoice items and invoices paged as Stripe pages them, and webhooks signed so
// that our own verifier (billing/stripe_signature.h) accepts them.
#include "tests/support/stripe_stand_in.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "billing/stripe_signature.h"
#include "tests/support/http_client.h"

namespace gpuwerk::testing {
namespace {

constexpr const char* kKey = "sk_test_stand_in_key";
constexpr const char* kSecret = "whsec_stand_in_secret";
constexpr const char* kForm = "application/x-www-form-urlencoded";

class StripeStandInTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = StripeStandIn::Unavailable()) GTEST_SKIP() << *why;
    std::string error;
    ASSERT_TRUE(stand_in_.Start(kKey, "", kSecret, &error)) << error;
    api_ = std::make_unique<HttpClient>(stand_in_.base_url());
    api_->SetBearer(kKey);
    hooks_ = std::make_unique<HttpClient>(stand_in_.base_url());
  }

  HttpResult Post(const std::string& path, const std::string& form,
                  std::vector<std::string> headers = {}) {
    return api_->Post(path, form, kForm, std::move(headers));
  }

  std::string NewCustomer() {
    const HttpResult r = Post("/v1/customers", "email=ada%40example.com&metadata[gw]=solo_1");
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json().value("id", "");
  }

  StripeStandIn stand_in_;
  std::unique_ptr<HttpClient> api_;
  std::unique_ptr<HttpClient> hooks_;
};

TEST_F(StripeStandInTest, AnswersWithStripesErrorShapeForUnknownParametersAndBadKeys) {
  HttpResult r = Post("/v1/customers", "email=a%40b.c&colour=red");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["error"]["type"], "invalid_request_error");
  EXPECT_EQ(r.Json()["error"]["code"], "parameter_unknown");
  EXPECT_EQ(r.Json()["error"]["param"], "colour");
  r = Post("/v1/checkout/sessions", "mode=setup&payment_method_types[0]=card");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["error"]["code"], "parameter_missing");  // success_url, as the spec says
  r = Post("/v1/checkout/sessions",
           "mode=sideways&success_url=https%3A%2F%2Fx&payment_method_types[0]=card");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["error"]["param"], "mode");
  // The requests log says which requests broke the description.
  const auto log = hooks_->Get("/_test/requests").Json()["data"];
  ASSERT_EQ(log.size(), 3u);
  EXPECT_FALSE(log[0]["violations"].empty());

  HttpClient wrong(stand_in_.base_url());
  wrong.SetBearer("sk_test_wrong");
  r = wrong.Post("/v1/customers", "", kForm);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.Json()["error"]["type"], "invalid_request_error");
  r = api_->Get("/v1/customers/cus_nope");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.Json()["error"]["code"], "resource_missing");
  r = api_->Get("/v1/customers/x", {"Stripe-Version: 2020-08-27"});
  EXPECT_EQ(r.status, 400) << "the stand-in speaks only " << StripeStandIn::kApiVersion;
}

TEST_F(StripeStandInTest, IdempotencyKeysAreCheckedAsStripeDoes) {
  const std::string body = "email=ada%40example.com&metadata[gw]=solo_1";
  const HttpResult first = Post("/v1/customers", body, {"Idempotency-Key: k-1"});
  ASSERT_EQ(first.status, 200) << first.body;
  // Same key, same body: the stored answer again, no second customer.
  const HttpResult again = Post("/v1/customers", body, {"Idempotency-Key: k-1"});
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.Header("idempotent-replayed"), "true");
  EXPECT_EQ(again.Json()["id"], first.Json()["id"]);
  // Same key, another body, or another endpoint: idempotency_error.
  HttpResult r = Post("/v1/customers", "email=bob%40example.com", {"Idempotency-Key: k-1"});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["error"]["type"], "idempotency_error");
  r = Post("/v1/invoiceitems",
           "customer=" + first.Json()["id"].get<std::string>() + "&amount=5&currency=usd",
           {"Idempotency-Key: k-1"});
  EXPECT_EQ(r.Json()["error"]["type"], "idempotency_error");
  // A validation error is not stored: the key stays usable.
  r = Post("/v1/invoiceitems", "amount=5&currency=usd", {"Idempotency-Key: k-2"});
  EXPECT_EQ(r.Json()["error"]["code"], "parameter_missing");
  r = Post("/v1/invoiceitems",
           "customer=" + first.Json()["id"].get<std::string>() + "&amount=5&currency=usd",
           {"Idempotency-Key: k-2"});
  EXPECT_EQ(r.status, 200) << r.body;
  // After Stripe forgets keys (24 h), the same request makes a new object.
  ASSERT_EQ(hooks_->Post("/_test/idempotency/expire", "{}", "application/json").status, 200);
  const HttpResult later = Post("/v1/customers", body, {"Idempotency-Key: k-1"});
  EXPECT_NE(later.Json()["id"], first.Json()["id"]);
  EXPECT_EQ(hooks_->Get("/_test/objects/customers").Json()["data"].size(), 2u);
}

TEST_F(StripeStandInTest, ADeletedCustomerReadsAsDeletedAndIsMissingEverywhereElse) {
  const std::string cus = NewCustomer();
  ASSERT_EQ(api_->Delete("/v1/customers/" + cus).status, 200);
  HttpResult r = api_->Get("/v1/customers/" + cus);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Json(), (nlohmann::json{{"id", cus}, {"object", "customer"}, {"deleted", true}}));
  r = Post(
      "/v1/checkout/sessions",
      "mode=setup&customer=" + cus + "&success_url=https%3A%2F%2Fx&payment_method_types[0]=card");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["error"]["code"], "resource_missing");
  EXPECT_EQ(r.Json()["error"]["param"], "customer");
}

TEST_F(StripeStandInTest, CheckoutInSetupModePaidByTheTestThenAnInvoiceWithItsPendingItems) {
  const std::string cus = NewCustomer();
  HttpResult r = Post("/v1/checkout/sessions", "mode=setup&customer=" + cus +
                                                   "&success_url=https%3A%2F%2Fx%2Fok"
                                                   "&cancel_url=https%3A%2F%2Fx%2Fno"
                                                   "&payment_method_types[0]=card"
                                                   "&client_reference_id=solo_1");
  ASSERT_EQ(r.status, 200) << r.body;
  const nlohmann::json session = r.Json();
  EXPECT_EQ(session["object"], "checkout.session");
  EXPECT_EQ(session["mode"], "setup");
  EXPECT_EQ(session["status"], "open");
  EXPECT_TRUE(session["url"].get<std::string>().starts_with(stand_in_.base_url()));
  const std::string seti = session["setup_intent"];
  r = hooks_->PostJson(
      "/_test/checkout/sessions/" + session["id"].get<std::string>() + "/complete",
      {{"card", {{"brand", "visa"}, {"last4", "1881"}, {"exp_month", 7}, {"exp_year", 2031}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["events"].size(), 3u);
  r = api_->Get("/v1/setup_intents/" + seti);
  EXPECT_EQ(r.Json()["status"], "succeeded");
  const std::string pm = r.Json()["payment_method"];
  r = api_->Get("/v1/payment_methods/" + pm);
  EXPECT_EQ(r.Json()["card"]["last4"], "1881");
  EXPECT_EQ(r.Json()["customer"], cus);
  // Setup mode does not make it the default: the customer still has none.
  EXPECT_TRUE(api_->Get("/v1/customers/" + cus)
                  .Json()["invoice_settings"]["default_payment_method"]
                  .is_null());
  r = Post("/v1/customers/" + cus, "invoice_settings[default_payment_method]=" + pm);
  EXPECT_EQ(r.Json()["invoice_settings"]["default_payment_method"], pm);
  r = Post("/v1/customers/" + cus, "invoice_settings[default_payment_method]=pm_other");
  EXPECT_EQ(r.Json()["error"]["param"], "invoice_settings[default_payment_method]");

  ASSERT_EQ(Post("/v1/invoiceitems", "customer=" + cus + "&amount=65&currency=usd").status, 200);
  ASSERT_EQ(Post("/v1/invoiceitems", "customer=" + cus + "&amount=150&currency=usd").status, 200);
  r = Post("/v1/invoices", "customer=" + cus + "&pending_invoice_items_behavior=include");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["status"], "draft");
  EXPECT_EQ(r.Json()["total"], 215);
  EXPECT_EQ(r.Json()["lines"]["data"].size(), 2u);
  const std::string in = r.Json()["id"];
  // Without include, Stripe (since 2022-08-01) leaves pending items out: nothing left anyway.
  r = Post("/v1/invoices", "customer=" + cus);
  EXPECT_EQ(r.Json()["total"], 0);
  r = Post("/v1/invoices/" + in + "/finalize", "");
  EXPECT_EQ(r.Json()["status"], "open");
  r = Post("/v1/invoices/" + in + "/pay", "");
  EXPECT_EQ(r.Json()["status"], "paid");
  EXPECT_EQ(r.Json()["amount_paid"], 215);
}

TEST_F(StripeStandInTest, DetachingAPaymentMethodLeavesItWithoutCustomerAndRecordsTheEvent) {
  const std::string cus = NewCustomer();
  HttpResult r = Post("/v1/checkout/sessions", "mode=setup&customer=" + cus +
                                                   "&success_url=https%3A%2F%2Fx%2Fok"
                                                   "&payment_method_types[0]=card");
  ASSERT_EQ(r.status, 200) << r.body;
  r = hooks_->PostJson(
      "/_test/checkout/sessions/" + r.Json()["id"].get<std::string>() + "/complete",
      {{"card", {{"brand", "visa"}, {"last4", "4242"}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string pm = hooks_->Get("/_test/objects/payment_methods").Json()["data"][0]["id"];
  ASSERT_EQ(Post("/v1/customers/" + cus, "invoice_settings[default_payment_method]=" + pm).status,
            200);

  r = Post("/v1/payment_methods/" + pm + "/detach", "");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["object"], "payment_method");
  EXPECT_EQ(r.Json()["id"], pm);
  EXPECT_TRUE(r.Json()["customer"].is_null());
  EXPECT_TRUE(api_->Get("/v1/customers/" + cus)
                  .Json()["invoice_settings"]["default_payment_method"]
                  .is_null());
  const nlohmann::json events = hooks_->Get("/_test/events").Json()["data"];
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["type"], "payment_method.detached");
  EXPECT_EQ(events.back()["data"]["previous_attributes"]["customer"], cus);
  // Not attached any more: Stripe's 400, without a code; unknown: resource_missing.
  r = Post("/v1/payment_methods/" + pm + "/detach", "");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["error"]["type"], "invalid_request_error");
  EXPECT_FALSE(r.Json()["error"].contains("code")) << r.body;
  r = Post("/v1/payment_methods/pm_nope/detach", "");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.Json()["error"]["code"], "resource_missing");
  // Its one parameter is expand[]; anything else is refused as Stripe does.
  r = Post("/v1/payment_methods/" + pm + "/detach", "customer=" + cus);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["error"]["code"], "parameter_unknown");
}

// A one-shot HTTP receiver: accepts connections on a loopback port and keeps each request's
// Stripe-Signature header and body; answers 200.
class Receiver {
 public:
  Receiver() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    ::listen(fd_, 8);
    thread_ = std::thread([this] { Serve(); });
  }
  ~Receiver() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  std::vector<std::pair<std::string, std::string>> received() {
    std::lock_guard lock(mu_);
    return received_;
  }

 private:
  void Serve() {
    for (;;) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string data;
      char buf[4096];
      size_t need = std::string::npos;
      while (need == std::string::npos || data.size() < need) {
        const ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        data.append(buf, static_cast<size_t>(n));
        const size_t end = data.find("\r\n\r\n");
        if (end != std::string::npos && need == std::string::npos) {
          const size_t cl = data.find("Content-Length: ");
          need = end + 4 + std::stoul(data.substr(cl + 16));
        }
      }
      const size_t end = data.find("\r\n\r\n");
      const size_t sig = data.find("Stripe-Signature: ");
      std::string header = data.substr(sig + 18, data.find("\r\n", sig) - sig - 18);
      {
        std::lock_guard lock(mu_);
        received_.emplace_back(header, data.substr(end + 4));
      }
      const std::string answer =
          "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      (void)!::write(c, answer.data(), answer.size());
      ::close(c);
    }
  }
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::pair<std::string, std::string>> received_;
};

TEST_F(StripeStandInTest, WebhooksAreSignedSoThatOurVerifierAcceptsThemAndOnlyWithTheRightSecret) {
  Receiver receiver;
  ASSERT_EQ(hooks_
                ->PostJson("/_test/webhook",
                           {{"url", "http://127.0.0.1:" + std::to_string(receiver.port()) + "/"}})
                .status,
            200);
  const std::string cus = NewCustomer();
  HttpResult r = Post("/v1/checkout/sessions", "mode=setup&customer=" + cus +
                                                   "&success_url=https%3A%2F%2Fx"
                                                   "&payment_method_types[0]=card");
  r = hooks_->PostJson(
      "/_test/checkout/sessions/" + r.Json()["id"].get<std::string>() + "/complete",
      {{"card", {{"brand", "visa"}, {"last4", "4242"}, {"exp_month", 1}, {"exp_year", 2030}}},
       {"deliver", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string completed = r.Json()["events"][2];
  // Redelivered: twice concurrently, then signed with two secrets (old first), then stale.
  r = hooks_->PostJson("/_test/events/" + completed + "/deliver",
                       {{"times", 2}, {"concurrent", true}});
  r = hooks_->PostJson("/_test/events/" + completed + "/deliver",
                       {{"secrets", {"whsec_old", kSecret}}});
  r = hooks_->PostJson("/_test/events/" + completed + "/deliver", {{"timestamp_offset", -400}});
  const auto got = receiver.received();
  ASSERT_EQ(got.size(), 7u);
  const std::vector<std::string> secrets = {kSecret};
  const int64_t now = ::time(nullptr);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_TRUE(billing::VerifyStripeSignature(got[i].first, got[i].second, secrets, now))
        << got[i].first;
  }
  EXPECT_EQ(nlohmann::json::parse(got[2].second)["type"], "checkout.session.completed");
  EXPECT_EQ(nlohmann::json::parse(got[2].second)["api_version"], StripeStandIn::kApiVersion);
  EXPECT_FALSE(billing::VerifyStripeSignature(got[6].first, got[6].second, secrets, now));
  EXPECT_FALSE(billing::VerifyStripeSignature(got[0].first, got[0].second,
                                              std::vector<std::string>{"whsec_other"}, now));
}

TEST_F(StripeStandInTest, ALostAnswerIsDroppedAfterTheRequestRanAndItsKeyReplaysIt) {
  const std::string cus = NewCustomer();
  ASSERT_EQ(hooks_
                ->PostJson("/_test/faults",
                           {{"method", "POST"}, {"path", "/v1/invoices"}, {"action", "drop"}})
                .status,
            200);
  const std::string body = "customer=" + cus + "&pending_invoice_items_behavior=include";
  // A fresh connection: libcurl silently resends a request whose reused connection died.
  HttpClient fresh(stand_in_.base_url());
  fresh.SetBearer(kKey);
  HttpResult r = fresh.Post("/v1/invoices", body, kForm, {"Idempotency-Key: inv-1"});
  EXPECT_EQ(r.status, -1) << "the connection closes without an answer";
  r = Post("/v1/invoices", body, {"Idempotency-Key: inv-1"});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("idempotent-replayed"), "true");
  EXPECT_EQ(hooks_->Get("/_test/objects/invoices").Json()["data"].size(), 1u);
}

TEST_F(StripeStandInTest, ListsArePagedNewestFirstAsStripeDoes) {
  const std::string ada = NewCustomer();
  const std::string bob = NewCustomer();
  std::vector<std::string> items;  // Ada's, oldest first
  for (int n = 0; n < 12; ++n) {
    const HttpResult r =
        Post("/v1/invoiceitems", "customer=" + ada + "&amount=" + std::to_string(n) +
                                     "&currency=eur&metadata[n]=" + std::to_string(n));
    ASSERT_EQ(r.status, 200) << r.body;
    items.push_back(r.Json().value("id", ""));
  }
  ASSERT_EQ(Post("/v1/invoiceitems", "customer=" + bob + "&amount=7&currency=eur").status, 200);
  auto ids = [](const HttpResult& r) {
    std::vector<std::string> out;
    const nlohmann::json list = r.Json();
    for (const auto& o : list["data"]) out.push_back(o.value("id", ""));
    return out;
  };

  // Stripe's list object, 10 by default, newest first.
  HttpResult r = api_->Get("/v1/invoiceitems?customer=" + ada);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["object"], "list");
  EXPECT_EQ(r.Json()["url"], "/v1/invoiceitems");
  EXPECT_EQ(r.Json()["has_more"], true);
  ASSERT_EQ(ids(r).size(), 10u);
  EXPECT_EQ(ids(r).front(), items[11]);
  // Paged with starting_after (older) and ending_before (newer).
  r = api_->Get("/v1/invoiceitems?customer=" + ada + "&limit=5&starting_after=" + items[3]);
  EXPECT_EQ(ids(r), (std::vector<std::string>{items[2], items[1], items[0]}));
  EXPECT_EQ(r.Json()["has_more"], false);
  r = api_->Get("/v1/invoiceitems?customer=" + ada + "&limit=2&ending_before=" + items[8]);
  EXPECT_EQ(ids(r), (std::vector<std::string>{items[10], items[9]}));
  EXPECT_EQ(r.Json()["has_more"], true);
  // Filtered by customer, invoice and pending.
  r = api_->Get("/v1/invoiceitems?customer=" + bob);
  ASSERT_EQ(ids(r).size(), 1u);
  r = Post(
      "/v1/invoices",
      "customer=" + bob + "&pending_invoice_items_behavior=include&metadata[gpuwerk_invoice]=i1");
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string invoice = r.Json().value("id", "");
  EXPECT_TRUE(ids(api_->Get("/v1/invoiceitems?customer=" + bob + "&pending=true")).empty());
  EXPECT_EQ(ids(api_->Get("/v1/invoiceitems?pending=false")).size(), 1u);
  EXPECT_EQ(ids(api_->Get("/v1/invoiceitems?invoice=" + invoice)).size(), 1u);
  EXPECT_EQ(ids(api_->Get("/v1/invoiceitems?limit=100")).size(), 13u);
  // Invoices likewise, with their metadata, filtered by status.
  r = api_->Get("/v1/invoices?customer=" + bob);
  EXPECT_EQ(r.Json()["url"], "/v1/invoices");
  ASSERT_EQ(ids(r), std::vector<std::string>{invoice});
  EXPECT_EQ(r.Json()["data"][0]["metadata"]["gpuwerk_invoice"], "i1");
  EXPECT_EQ(ids(api_->Get("/v1/invoices?status=draft")).size(), 1u);
  EXPECT_TRUE(ids(api_->Get("/v1/invoices?status=open")).empty());
  EXPECT_TRUE(ids(api_->Get("/v1/invoices?customer=" + ada)).empty());
  const auto clean = hooks_->Get("/_test/requests").Json()["data"];
  for (const auto& request : clean) EXPECT_TRUE(request["violations"].empty()) << request.dump();

  // Stripe's errors: a limit outside 1..100, both cursors, a cursor or customer it does not
  // know, a parameter the description does not list.
  r = api_->Get("/v1/invoiceitems?limit=101");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["error"]["param"], "limit");
  r = api_->Get("/v1/invoices?starting_after=" + invoice + "&ending_before=" + invoice);
  EXPECT_EQ(r.status, 400);
  r = api_->Get("/v1/invoiceitems?starting_after=ii_nope");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["error"]["code"], "resource_missing");
  r = api_->Get("/v1/invoices?customer=cus_nope");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["error"]["code"], "resource_missing");
  EXPECT_EQ(r.Json()["error"]["param"], "customer");
  r = api_->Get("/v1/invoices?colour=red");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["error"]["code"], "parameter_unknown");
}

}  // namespace
}  // namespace gpuwerk::testing
