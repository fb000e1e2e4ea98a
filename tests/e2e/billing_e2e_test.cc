// Billing end to end: the real `gpuwerk server`, a real `gpuwerk agent` on the test's podman
// service and the real CLI.
// - The launch gate under the manual provider: without a payment method a launch answers
//   402 and nothing is created (no instance, no container); a queue entry of a person without
//   one is passed over (mailed once) while the host is free, and is launched (its container
//   running) as soon as the operator records a card with `gpuwerk admin billing set-card`.
// - Money under the stripe provider, against the Stripe stand-in (tests/support/
//   stripe_stand_in.py): a person signs up, is refused (402), adds a card through Checkout (the
//   stand-in "pays" it and sends the signed webhook), launches, deletes; a team's owner pays and
//   a member launches, and the owner sees the member's minutes. The server is then restarted a
//   month ahead (the test-only `test_clock_offset_seconds`) and the operator closes the month:
//   each invoice line agrees with its usage row to the minor unit, and each invoice is on the
//   stand-in.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/support/e2e_engine.h"
#include "tests/support/e2e_platform.h"
#include "tests/support/engine_probe.h"
#include "tests/support/eventually.h"
#include "tests/support/host_waits.h"
#include "tests/support/http_client.h"
#include "tests/support/mail_reader.h"
#include "tests/support/matchers.h"
#include "tests/support/run_command.h"
#include "tests/support/ssh_keygen.h"
#include "tests/support/stripe_stand_in.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::testing {
namespace {

const auto* const kEngine = RegisterEngineEnvironment("gpuwerk-billing-engine");

using nlohmann::json;
using std::chrono::seconds;

class BillingE2eTest : public E2eTest<> {
 protected:
  /// `gpuwerk ARGS` with a login file of `who`'s own.
  CommandResult Cli(const std::string& who, const std::string& args,
                    const std::string& input = "") {
    return RunCommand(dir_.path(),
                      "env -u GPUWERK_URL -u GPUWERK_TOKEN GPUWERK_CONFIG_DIR='" +
                          (dir_.path() / ("cli-" + who)).string() + "' " + GpuwerkBinary() + " " +
                          args,
                      input);
  }
  /// The containers the engine runs for the test's host.
  json HostContainers(const E2eHost& host) {
    return engine_->ContainersWithLabel(kHostLabel, host.id);
  }
  /// A new SSH key of `who`, named "laptop"; its id.
  std::string AddKey(HttpClient& who, const std::string& name) {
    GeneratedKey key = GenerateKey(dir_.path(), name);
    EXPECT_FALSE(key.public_line.empty()) << "ssh-keygen failed";
    auto r =
        who.PostJson("/api/v1/ssh-keys", {{"name", "laptop"}, {"public_key", key.public_line}});
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json().value("id", "");
  }
  HttpResult Launch(HttpClient& who, const std::string& name, const std::string& key_id) {
    return who.PostJson("/api/v1/instances",
                        {{"name", name}, {"ssh_key_id", key_id}, {"gpu_type", "spark-1x"}});
  }
  /// Launches `name`, waits until it runs (its container up on the engine), then deletes it and
  /// waits until it is gone; false (with a test failure) when a step did not happen.
  bool LaunchRunDelete(HttpClient& who, const std::string& name, const std::string& key_id) {
    auto made = Launch(who, name, key_id);
    EXPECT_EQ(made.status, 201) << made.body;
    const std::string id = made.Json().value("id", "");
    if (id.empty()) return false;
    json shown;
    const bool running = Eventually(
        [&] {
          shown = who.Get("/api/v1/instances/" + id).Json();
          return shown.is_object() && shown["status"] == "running";
        },
        seconds(120));
    EXPECT_TRUE(running) << shown.dump();
    EXPECT_EQ(who.Delete("/api/v1/instances/" + id).status, 204);
    const bool gone =
        Eventually([&] { return who.Get("/api/v1/instances/" + id).status == 404; }, seconds(60));
    EXPECT_TRUE(gone) << "instance " << id << " never went";
    return running && gone;
  }
  /// `who` adds a card through Stripe Checkout: the API answers the Checkout URL, the stand-in
  /// "pays" it and delivers its events, signed, to the server.
  void PayCheckout(HttpClient& who, HttpClient& stripe) {
    auto setup = who.Post("/api/v1/billing/card-setup", "", "application/json");
    ASSERT_EQ(setup.status, 201) << setup.body;
    const std::string url = setup.Json().value("url", "");
    ASSERT_NE(url.rfind("/c/pay/"), std::string::npos) << url;
    auto paid = stripe.PostJson(
        "/_test/checkout/sessions/" + url.substr(url.rfind('/') + 1) + "/complete",
        {{"card", {{"brand", "visa"}, {"last4", "4242"}, {"exp_month", 12}, {"exp_year", 2030}}},
         {"deliver", true}});
    ASSERT_EQ(paid.status, 200) << paid.body;
    const json deliveries = paid.Json()["deliveries"];
    ASSERT_EQ(deliveries.size(), 3u) << paid.body;
    for (const auto& d : deliveries) ASSERT_EQ(d["status"], 200) << paid.body;
    const json billing = who.Get("/api/v1/billing").Json();
    ASSERT_EQ(billing["payment_method"]["last4"], "4242") << billing.dump();
    EXPECT_EQ(billing["payment_method"]["provider"], "stripe");
  }
};

/// "YYYY-MM" of Unix second `t` (UTC).
std::string MonthOf(int64_t t) {
  const std::chrono::sys_days day =
      std::chrono::floor<std::chrono::days>(std::chrono::sys_seconds(std::chrono::seconds(t)));
  const std::chrono::year_month_day ymd(day);
  char label[16];
  std::snprintf(label, sizeof label, "%04d-%02u", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()));
  return label;
}

/// The first second of the month `months` after the one holding Unix second `t` (UTC).
int64_t MonthStartAfter(int64_t t, int months) {
  const std::chrono::sys_days day =
      std::chrono::floor<std::chrono::days>(std::chrono::sys_seconds(std::chrono::seconds(t)));
  const std::chrono::year_month_day ymd(day);
  const std::chrono::year_month first =
      std::chrono::year_month(ymd.year(), ymd.month()) + std::chrono::months(months);
  return std::chrono::sys_seconds(std::chrono::sys_days(first / 1)).time_since_epoch().count();
}

TEST_F(BillingE2eTest, NoCardNoLaunchThenTheQueueEntryLaunchesOnceTheCardIsRecorded) {
  platform_.StartServer();
  ASSERT_FALSE(HasFatalFailure());
  auto op = platform_.Operator();
  E2eHost& host = platform_.AddHost(*op, "spark-bill");
  ASSERT_FALSE(host.id.empty() || host.token.empty());
  platform_.StartAgent(host);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(WaitHostsReady(*op, 1)) << "the agent never synced with a working engine";

  auto alice = platform_.SignUp("alice@example.test", {}, Card::kNone);
  GeneratedKey key = GenerateKey(dir_.path(), "alice");
  ASSERT_FALSE(key.public_line.empty()) << "ssh-keygen failed";
  auto k =
      alice->PostJson("/api/v1/ssh-keys", {{"name", "laptop"}, {"public_key", key.public_line}});
  ASSERT_EQ(k.status, 201) << k.body;
  const std::string key_id = k.Json()["id"];

  // No card: 402 with what to do, and nothing created, on the server or on the engine.
  auto refused = alice->PostJson(
      "/api/v1/instances", {{"name", "web"}, {"ssh_key_id", key_id}, {"gpu_type", "spark-1x"}});
  EXPECT_EQ(refused.status, 402) << refused.body;
  EXPECT_THAT(refused, HasApiCode("payment_method_required"));
  EXPECT_EQ(alice->Get("/api/v1/instances").Json()["total"], 0);
  EXPECT_EQ(alice->Get("/api/v1/queue-entries").Json()["total"], 0);
  EXPECT_EQ(HostContainers(host), json::array());
  // The CLI says the same, and where cards come from under the manual provider.
  auto login = Cli(
      "alice", "login --url " + platform_.url() + " --email alice@example.test --password-stdin",
      std::string(kPassword) + "\n");
  ASSERT_EQ(login.exit_code, 0) << login.err;
  auto add_card = Cli("alice", "billing add-card");
  EXPECT_EQ(add_card.exit_code, 1);
  EXPECT_NE(add_card.err.find("(manual_provider)"), std::string::npos) << add_card.err;

  // Joining the queue needs no card; the free host passes the entry over (one mail).
  auto joined = alice->PostJson(
      "/api/v1/queue-entries", {{"name", "web"}, {"ssh_key_id", key_id}, {"gpu_type", "spark-1x"}});
  ASSERT_EQ(joined.status, 201) << joined.body;
  EXPECT_EQ(joined.Json()["status"], "open");
  ASSERT_TRUE(Eventually(
      [&] {
        for (const auto& m : MailsTo(platform_.data() / "mail", "alice@example.test")) {
          if (m.subject.find("passed over") != std::string::npos) return true;
        }
        return false;
      },
      seconds(30)))
      << "no passed-over mail";
  json entry = alice->Get("/api/v1/queue-entries").Json()["items"][0];
  EXPECT_EQ(entry["position"], 1);
  EXPECT_EQ(HostContainers(host), json::array());

  // The operator records her card with the CLI: the entry launches at once, and runs.
  auto op_login = Cli(
      "op", "login --url " + platform_.url() + " --email " + kOperatorEmail + " --password-stdin",
      std::string(kOperatorPassword) + "\n");
  ASSERT_EQ(op_login.exit_code, 0) << op_login.err;
  auto set = Cli("op",
                 "admin billing set-card alice@example.test --brand visa --last4 4242 "
                 "--exp 12/2030");
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_NE(set.out.find("visa ending 4242"), std::string::npos) << set.out;
  json instances = alice->Get("/api/v1/instances").Json();
  ASSERT_EQ(instances["total"], 1) << instances.dump();
  EXPECT_EQ(instances["items"][0]["name"], "web");
  const std::string id = instances["items"][0]["id"];
  json shown;
  EXPECT_TRUE(Eventually(
      [&] {
        shown = alice->Get("/api/v1/instances/" + id).Json();
        return shown.is_object() && shown["status"] == "running";
      },
      seconds(120)))
      << shown.dump();
  EXPECT_EQ(HostContainers(host).size(), 1u);
  size_t passed_over = 0;
  for (const auto& m : MailsTo(platform_.data() / "mail", "alice@example.test")) {
    passed_over += m.subject.find("passed over") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(passed_over, 1u);
  auto state = Cli("alice", "billing --json");
  ASSERT_EQ(state.exit_code, 0) << state.err;
  EXPECT_EQ(json::parse(state.out, nullptr, false)["payment_method"]["last4"], "4242") << state.out;
  EXPECT_EQ(alice->Delete("/api/v1/instances/" + id).status, 204);
}

constexpr const char* kStripeKey = "sk_test_gpuwerk_e2e";
constexpr const char* kWebhookSecret = "whsec_gpuwerk_e2e";

TEST_F(BillingE2eTest, StripeCheckoutLaunchAndMonthCloseAgreeWithUsageAlsoThroughATeam) {
  if (auto why = StripeStandIn::Unavailable()) GTEST_SKIP() << *why;
  StripeStandIn stand_in;
  std::string error;
  ASSERT_TRUE(stand_in.Start(kStripeKey, "", kWebhookSecret, &error)) << error;
  const std::map<std::string, std::string> stripe = {
      {"GPUWERK_PAYMENT_PROVIDER", "stripe"},
      {"GPUWERK_STRIPE_API_BASE", stand_in.base_url()},
      {"GPUWERK_STRIPE_SECRET_KEY", kStripeKey},
      {"GPUWERK_STRIPE_WEBHOOK_SECRETS", kWebhookSecret}};
  platform_.StartServer(stripe);
  ASSERT_FALSE(HasFatalFailure());
  HttpClient hooks(stand_in.base_url());
  ASSERT_EQ(
      hooks
          .PostJson("/_test/webhook", {{"url", platform_.url() + "/api/v1/billing/webhooks/stripe"},
                                       {"secret", kWebhookSecret}})
          .status,
      200);
  auto op = platform_.Operator();
  E2eHost& host = platform_.AddHost(*op, "spark-stripe");
  ASSERT_FALSE(host.id.empty() || host.token.empty());
  platform_.StartAgent(host);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(WaitHostsReady(*op, 1)) << "the agent never synced with a working engine";

  // On her own: no card → 402 and nothing made; a card through Checkout; launch, run, delete.
  auto alice = platform_.SignUp("alice@example.test", {}, Card::kNone);
  const std::string alice_key = AddKey(*alice, "alice");
  auto refused = Launch(*alice, "web", alice_key);
  EXPECT_EQ(refused.status, 402) << refused.body;
  EXPECT_THAT(refused, HasApiCode("payment_method_required"));
  EXPECT_EQ(HostContainers(host), json::array());
  PayCheckout(*alice, hooks);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(LaunchRunDelete(*alice, "web", alice_key));

  // A team: its owner pays through Checkout, a member launches on the team's card.
  auto olga = platform_.SignUp("olga@example.test", {}, Card::kNone);
  auto max = platform_.SignUp("max@example.test", {}, Card::kNone);
  auto team = olga->PostJson("/api/v1/team", {{"name", "Lab"}});
  ASSERT_EQ(team.status, 201) << team.body;
  const std::string team_id = team.Json().value("id", "");
  ASSERT_EQ(olga->PostJson("/api/v1/team/invites", {{"email", "max@example.test"}}).status, 201);
  std::string token;
  ASSERT_TRUE(Eventually(
      [&] {
        for (const auto& m : MailsTo(platform_.data() / "mail", "max@example.test")) {
          if (!m.TokenFromLink("/team/accept").empty()) token = m.TokenFromLink("/team/accept");
        }
        return !token.empty();
      },
      seconds(30)))
      << "no invitation mail";
  auto accepted = max->PostJson("/api/v1/team/invites/accept", {{"token", token}});
  ASSERT_EQ(accepted.status, 200) << accepted.body;
  const std::string max_key = AddKey(*max, "max");
  auto max_refused = Launch(*max, "job", max_key);
  EXPECT_EQ(max_refused.status, 402) << max_refused.body;
  EXPECT_THAT(max_refused, HasApiCode("payment_method_required"));
  PayCheckout(*olga, hooks);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(max->Get("/api/v1/billing").Json()["payment_method"]["provider"], "stripe");
  ASSERT_TRUE(LaunchRunDelete(*max, "job", max_key));

  // The usage rows, and the team's usage by member as its owner sees it.
  const json alice_row = alice->Get("/api/v1/usage/sessions").Json()["items"][0];
  const json max_row = max->Get("/api/v1/usage/sessions").Json()["items"][0];
  for (const json& row : {alice_row, max_row}) {
    ASSERT_TRUE(row.is_object());
    EXPECT_EQ(row["active"], false) << row.dump();
    EXPECT_GE(row["minutes"].get<int64_t>(), 1) << row.dump();
    EXPECT_EQ(row["currency"], "usd");
  }
  const json running_usage = olga->Get("/api/v1/team/usage").Json();
  bool saw_max = false;
  for (const auto& p : running_usage["people"]) {
    if (p["label"] != "max@example.test") continue;
    saw_max = true;
    EXPECT_EQ(p["member"], true);
  }
  EXPECT_TRUE(saw_max) << running_usage.dump();
  auto not_owner = max->Get("/api/v1/team/usage");
  EXPECT_EQ(not_owner.status, 403) << not_owner.body;

  // The next month: the server restarts with its clock two hours into it, and the operator
  // closes every month the sessions had minutes in (two when a session ran across a month's
  // end while this test ran).
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::set<std::string> months = {MonthOf(now)};
  for (const json& row : {alice_row, max_row}) {
    months.insert(row["started_at"].get<std::string>().substr(0, 7));
  }
  const int64_t ahead = MonthStartAfter(now, 1) + 7200 - now;
  platform_.Stop();
  platform_.StartServer({{"GPUWERK_PAYMENT_PROVIDER", "stripe"},
                         {"GPUWERK_STRIPE_API_BASE", stand_in.base_url()},
                         {"GPUWERK_STRIPE_SECRET_KEY", kStripeKey},
                         {"GPUWERK_STRIPE_WEBHOOK_SECRETS", kWebhookSecret},
                         {"GPUWERK_TEST_CLOCK_OFFSET_SECONDS", std::to_string(ahead)}});
  ASSERT_FALSE(HasFatalFailure());
  auto op_login = Cli(
      "op", "login --url " + platform_.url() + " --email " + kOperatorEmail + " --password-stdin",
      std::string(kOperatorPassword) + "\n");
  ASSERT_EQ(op_login.exit_code, 0) << op_login.err;
  for (const std::string& m : months) {
    auto closed = Cli("op", "admin invoices close --month " + m);
    ASSERT_EQ(closed.exit_code, 0) << closed.err;
    EXPECT_NE(closed.out.find("Closed " + m), std::string::npos) << closed.out;
    EXPECT_NE(closed.out.find("Pushed to stripe now:"), std::string::npos) << closed.out;
    EXPECT_NE(closed.out.find("failed: 0."), std::string::npos) << closed.out;
  }

  // Each invoice line equals its usage row to the minor unit (summed over the months it has
  // lines in), and each invoice is on Stripe with the same total.
  const json stripe_invoices = hooks.Get("/_test/objects/invoices").Json()["data"];
  auto check = [&](HttpClient& who, const json& row, const std::string& account_kind) {
    const json invoices = who.Get("/api/v1/billing/invoices").Json()["items"];
    ASSERT_TRUE(invoices.is_array()) << invoices.dump();
    int64_t minutes = 0;
    int64_t amount = 0;
    for (const auto& inv : invoices) {
      for (const auto& l : inv["lines"]) {
        if (l["billing_session_id"] != row["billing_session_id"]) continue;
        minutes += l["minutes"].get<int64_t>();
        amount += l["amount_minor"].get<int64_t>();
      }
      EXPECT_TRUE(inv["billing_account_id"].get<std::string>().starts_with(account_kind))
          << inv.dump();
      int found = 0;
      for (const auto& s : stripe_invoices) {
        if (s["metadata"].value("gpuwerk_invoice", "") != inv["id"]) continue;
        ++found;
        EXPECT_EQ(s["amount_due"], inv["total_minor"]) << s.dump();
        EXPECT_EQ(s["status"], "open") << s.dump();  // finalized
        EXPECT_EQ(s["currency"], inv["currency"]);
      }
      EXPECT_EQ(found, 1) << "invoice " << inv["id"] << " on Stripe " << found << " times";
    }
    EXPECT_EQ(minutes, row["minutes"].get<int64_t>()) << row.dump();
    EXPECT_EQ(amount, row["amount_minor"].get<int64_t>()) << row.dump();
  };
  // Signed in again: a sign-in session does not outlive the month the clock jumped.
  auto alice_again = platform_.SignIn("alice@example.test", kPassword);
  check(*alice_again, alice_row, "solo_");
  auto olga_again = platform_.SignIn("olga@example.test", kPassword);
  check(*olga_again, max_row, "team_");
  // The owner's usage by member for the closed months: the member's minutes, as his row says.
  int64_t max_minutes = 0;
  for (const std::string& m : months) {
    const json usage = olga_again->Get("/api/v1/team/usage?month=" + m).Json();
    EXPECT_EQ(usage["closed"], true) << usage.dump();
    for (const auto& p : usage["people"]) {
      if (p["label"] == "max@example.test") max_minutes += p["minutes"].get<int64_t>();
    }
  }
  EXPECT_EQ(max_minutes, max_row["minutes"].get<int64_t>());
  EXPECT_EQ(stripe_invoices.size(), 2u) << stripe_invoices.dump();
}

}  // namespace
}  // namespace gpuwerk::testing
