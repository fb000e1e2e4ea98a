#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>

#include "app/server_app.h"
#include "core/clock.h"
#include "core/logging.h"
#include "core/random.h"
#include "tests/support/billing_card.h"
#include "tests/support/http_client.h"
#include "tests/support/mail_reader.h"
#include "tests/support/matchers.h"
#include "tests/support/sign_up.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::testing {

/// Starts a whole control plane in-process on 127.0.0.1:<free port> with its own data dir, a
/// FakeClock the test moves, the local Maildir outbox, and the cheapest password hash.
class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::InitCrypto();
    config_.data_dir = dir_.path() / "data";
    config_.listen = "127.0.0.1:0";
    config_.password_hash_cost = "test-only-minimum";
    config_.read_timeout_seconds = 5;
    Customize(config_);
    auto app = app::ServerApp::Start(config_, clock_, rng_);
    ASSERT_TRUE(app) << app.error().message;
    app_ = std::move(*app);
  }
  void TearDown() override {
    if (app_) app_->Stop();
    app_.reset();
  }
  /// Subclasses change the config before start.
  virtual void Customize(app::ServerConfig&) {}

  std::unique_ptr<HttpClient> Browser() { return std::make_unique<HttpClient>(app_->base_url()); }

  /// Waits (up to 10 s) until at least `count` mails to `to` are delivered, and returns them all.
  /// The background outbox worker may be sending them already, so this also nudges delivery.
  std::vector<ReceivedMail> Mails(const std::string& to, size_t count) {
    std::vector<ReceivedMail> mails;
    for (int i = 0; i < 200; ++i) {
      auto n = app_->DeliverMailNow();
      EXPECT_TRUE(n) << (n ? "" : n.error().message);
      mails = MailsTo(config_.data_dir / "mail", to);
      if (mails.size() >= count) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return mails;
  }

  /// The tokens of the mailed links to `to` whose URL contains `path` (e.g.
  /// "/auth/reset-password"), oldest first, waiting up to 10 s until there are at least `count`.
  std::vector<std::string> LinkTokens(const std::string& to, const std::string& path,
                                      size_t count) {
    std::vector<std::string> tokens;
    for (int i = 0; i < 200; ++i) {
      (void)app_->DeliverMailNow();
      tokens.clear();
      for (const auto& m : MailsTo(config_.data_dir / "mail", to)) {
        std::string token = m.TokenFromLink(path);
        if (!token.empty()) tokens.push_back(std::move(token));
      }
      if (tokens.size() >= count) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return tokens;
  }
  /// The token of a mailed link to `to` with `path` that is not in `seen`, waiting up to 10 s; ""
  /// when none came. For "the newer link" when two mails are in flight at once: the outbox
  /// delivers from the background worker and from DeliverMailNow alike, so the order in which
  /// mails land is not the order they were sent in (LinkTokens' order holds only for mails that
  /// were waited for one after another).
  std::string NewLinkToken(const std::string& to, const std::string& path,
                           const std::vector<std::string>& seen) {
    for (int i = 0; i < 200; ++i) {
      (void)app_->DeliverMailNow();
      for (const auto& m : MailsTo(config_.data_dir / "mail", to)) {
        std::string token = m.TokenFromLink(path);
        if (!token.empty() && std::find(seen.begin(), seen.end(), token) == seen.end()) {
          return token;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "";
  }
  /// The token of the `n`th (1-based) mailed link to `to` with `path`; "" when it did not come.
  std::string LinkToken(const std::string& to, const std::string& path, size_t n = 1) {
    auto tokens = LinkTokens(to, path, n);
    return tokens.size() >= n ? tokens[n - 1] : "";
  }

  /// Signs up `email` in `browser` and proves the address with the mailed link (setting
  /// `password`), so that `browser` is signed in to a proven account; with Card::kRecorded (the
  /// default) the operator's manual card is recorded for it, so that it can launch.
  void SignUp(HttpClient& browser, const std::string& email,
              const std::string& password = "correct horse battery", Card card = Card::kRecorded) {
    ASSERT_TRUE(SignUpAndProve(browser, MailDir(), email, password,
                               [this] { (void)app_->DeliverMailNow(); }));
    if (card == Card::kRecorded) RecordTestCard(email);
  }
  /// Records the tests' card (TestCardJson) for `email` as the operator would (audited
  /// billing.set_card; drains the queues).
  void RecordTestCard(const std::string& email) {
    auto set = app_->payment_methods().SetCard(
        "", email, {.brand = "visa", .last4 = "4242", .exp_month = 12, .exp_year = 2099}, "test");
    ASSERT_TRUE(set) << set.error().message;
  }
  /// A browser signed in as operator `email` (made an operator first, password "operator
  /// password 1"). Failures are gtest failures: callers check HasFatalFailure() after it.
  std::unique_ptr<HttpClient> SignedInOperator(const std::string& email = "op@example.test") {
    EXPECT_TRUE(app_->EnsureOperator(email, "operator password 1"));
    auto op = Browser();
    auto login =
        op->PostJson("/api/v1/auth/login", {{"email", email}, {"password", "operator password 1"}});
    if (login.status != 200) ADD_FAILURE() << "operator sign-in: " << login.status << login.body;
    return op;
  }
  /// Where the server's mail lands: its local Maildir outbox (an SMTP fixture's inbox instead).
  virtual std::filesystem::path MailDir() const { return config_.data_dir / "mail"; }

  TempDir dir_;
  core::FakeClock clock_;
  core::SodiumRng rng_;
  app::ServerConfig config_;
  std::unique_ptr<app::ServerApp> app_;
};

/// Expects `r` to be an RFC 9457 problem with this status and code.
inline void ExpectProblem(const HttpResult& r, long status, const std::string& code) {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.Header("content-type"), "application/problem+json") << r.body;
  EXPECT_THAT(r, HasApiCode(code)) << r.body;
  auto j = r.Json();
  EXPECT_TRUE(j.is_object() && j.contains("title") && j.contains("status") && j.contains("detail"))
      << r.body;
}

}  // namespace gpuwerk::testing
