// The dashboard in a real browser (issue "The dashboard", docs/dashboard.md "Tests"): the real
// `gpuwerk server` serving the embedded dashboard, a real `gpuwerk agent` on the suite's podman
// service, a real `gpuwerk relay` that the SSH command shown goes through, a real SMTP server (the
// sink) for the mails, the Stripe stand-in for cards through Checkout, and Debian's Chromium driven
// by playwright-core from the browser tests in web/e2e (run with `node --test` from the build's
// copy of web/, where `npm ci` put playwright-core and axe-core). One platform start for every
// browser test: they tell one person's story in order (sign up, card, key, launch, ssh, queue,
// restart, delete, usage, billing, a team with a second person, sign out). Screenshots at 375 and
// 1280 px go to <build>/test-artifacts/dashboard/.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "tests/support/e2e_engine.h"
#include "tests/support/e2e_platform.h"
#include "tests/support/e2e_relay.h"
#include "tests/support/host_waits.h"
#include "tests/support/http_client.h"
#include "tests/support/net.h"
#include "tests/support/run_command.h"
#include "tests/support/smtp_sink.h"
#include "tests/support/stripe_stand_in.h"

namespace gpuwerk::testing {
namespace {

const auto* const kEngine = RegisterEngineEnvironment("gpuwerk-dashboard-engine");

std::string Quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

constexpr const char* kStripeKey = "sk_test_gpuwerk_dashboard";
constexpr const char* kWebhookSecret = "whsec_gpuwerk_dashboard";

class DashboardE2eTest : public E2eTest<> {};

TEST_F(DashboardE2eTest, BrowserTestsPassAgainstTheRealPlatform) {
  const std::filesystem::path web = std::filesystem::path(GPUWERK_TEST_BINARY_DIR) / "web";
  const std::filesystem::path tests = web / "e2e" / "dashboard.e2e.mjs";
  ASSERT_TRUE(std::filesystem::exists(tests))
      << tests << " is missing: the dashboard is built with -DGPUWERK_WEB=ON";
  ASSERT_TRUE(std::filesystem::exists("/usr/bin/chromium"))
      << "Debian's chromium is missing: scripts/setup.sh test installs it";

  // Mail goes out over SMTP to a real SMTP server (tests/support/smtp_sink.py), whose folder the
  // browser tests read (sign-up proofs, magic links, resets, team invitations).
  if (auto why = SinkUnavailable()) FAIL() << *why;
  const std::filesystem::path mail = dir_.path() / "smtp-sink";
  std::filesystem::create_directories(mail);
  SmtpSink sink;
  std::string sink_error;
  ASSERT_TRUE(sink.Start(0, mail, {}, &sink_error)) << sink_error;
  // Cards through Stripe Checkout against the Stripe stand-in (tests/support/stripe_stand_in.py),
  // whose signed webhooks reach the server; the operator still records a card by hand for the
  // first person (labelled manual).
  if (auto why = StripeStandIn::Unavailable()) FAIL() << *why;
  StripeStandIn stripe;
  std::string stripe_error;
  ASSERT_TRUE(stripe.Start(kStripeKey, "", kWebhookSecret, &stripe_error)) << stripe_error;
  // SSH goes through a real `gpuwerk relay`, as in production: the server shows
  // `ssh -p PORT <hostname>@<hostname>.relay.test`, and the browser tests run that command with
  // ssh's HostName option set to 127.0.0.1 (there is no DNS server here for the wildcard name).
  // The relay's port is picked first, since the server names it and the relay needs the server.
  int relay_port = FreePort();
  platform_.StartServer({{"GPUWERK_SSH_DOMAIN", "relay.test"},
                         {"GPUWERK_SSH_PORT", std::to_string(relay_port)},
                         {"GPUWERK_MAIL", "smtp"},
                         {"GPUWERK_SMTP_URL", "smtp://127.0.0.1:" + std::to_string(sink.port())},
                         {"GPUWERK_PAYMENT_PROVIDER", "stripe"},
                         {"GPUWERK_STRIPE_API_BASE", stripe.base_url()},
                         {"GPUWERK_STRIPE_SECRET_KEY", kStripeKey},
                         {"GPUWERK_STRIPE_WEBHOOK_SECRETS", kWebhookSecret}});
  ASSERT_FALSE(HasFatalFailure());
  HttpClient hooks(stripe.base_url());
  ASSERT_EQ(
      hooks
          .PostJson("/_test/webhook", {{"url", platform_.url() + "/api/v1/billing/webhooks/stripe"},
                                       {"secret", kWebhookSecret}})
          .status,
      200);
  auto op = platform_.Operator();
  ChildProcess relay;
  std::string relay_ca;
  StartE2eRelay(*op, "dashboard-e2e", platform_.url(), dir_.path(), relay, &relay_ca, &relay_port);
  ASSERT_FALSE(HasFatalFailure());
  E2eHost& host = platform_.AddHost(*op, "spark-web");
  ASSERT_FALSE(host.id.empty() || host.token.empty());
  platform_.StartAgent(host, {"--relay-ca", relay_ca});
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(WaitHostsReady(*op, 1)) << "the agent never synced with a working engine";

  const std::filesystem::path artifacts =
      std::filesystem::path(GPUWERK_TEST_BINARY_DIR) / "test-artifacts" / "dashboard";
  std::filesystem::remove_all(artifacts);
  std::filesystem::create_directories(artifacts);
  const std::filesystem::path work = dir_.path() / "browser";
  std::filesystem::create_directories(work);

  const std::string command =
      "DASHBOARD_URL=" + Quoted(platform_.url()) + " DASHBOARD_MAIL_DIR=" + Quoted(mail.string()) +
      " DASHBOARD_STRIPE_URL=" + Quoted(stripe.base_url()) +
      " DASHBOARD_ARTIFACTS=" + Quoted(artifacts.string()) +
      " DASHBOARD_WORK_DIR=" + Quoted(work.string()) + " GPUWERK_BIN=" + Quoted(GpuwerkBinary()) +
      " DASHBOARD_SSH_HOST=127.0.0.1 DASHBOARD_OPERATOR_EMAIL=" + Quoted(kOperatorEmail) +
      " DASHBOARD_OPERATOR_PASSWORD=" + Quoted(kOperatorPassword) +
      " node --test --test-reporter=spec " + Quoted(tests.string());
  CommandResult r = RunCommand(work, command);
  std::cout << "---- browser tests (web/e2e/dashboard.e2e.mjs)\n"
            << r.out << r.err << "---- screenshots: " << artifacts.string() << "\n";
  EXPECT_EQ(r.exit_code, 0) << "the browser tests failed; see their report above";
  StopCleanly(relay, "relay");
  if (HasFailure()) std::cout << "---- relay log\n" << Tail(dir_.path() / "relay.log");
}

}  // namespace
}  // namespace gpuwerk::testing
