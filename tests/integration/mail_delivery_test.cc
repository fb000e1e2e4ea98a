// Mail from the whole server through a real SMTP server (aiosmtpd): the magic-link mail arrives
// and its link signs in; with the SMTP server down, the mail waits in the outbox and goes out
// when the server is back.
#include <gtest/gtest.h>

#include "tests/integration/server_fixture.h"
#include "tests/integration/smtp_fixture.h"

namespace gpuwerk::testing {
namespace {

using MailDeliveryTest = WithSmtpSink<ServerTest>;

TEST_F(MailDeliveryTest, MagicLinkMailArrivesOverSmtpAndItsLinkWorks) {
  auto b = Browser();
  SignUp(*b, "alice@example.test");
  b->ClearCookies();
  ASSERT_EQ(b->PostJson("/api/v1/auth/magic-link", {{"email", "alice@example.test"}}).status, 202);
  auto mails = Received("alice@example.test", 1);
  ASSERT_EQ(mails.size(), 1u);
  EXPECT_EQ(mails[0].subject, "Your gpuwerk sign-in link");
  auto links = mails[0].Links();
  ASSERT_EQ(links.size(), 1u) << mails[0].text_body;
  ASSERT_EQ(links[0].rfind(app_->base_url() + "/auth/magic-link?token=", 0), 0u) << links[0];
  // Follow the link as the person would: open the page, press the button.
  const std::string path = links[0].substr(app_->base_url().size());
  EXPECT_EQ(b->Get(path).status, 200);
  auto press = b->Post("/auth/magic-link", "token=" + mails[0].TokenFromLink("/auth/magic-link"),
                       "application/x-www-form-urlencoded", {"Origin: " + app_->base_url()});
  EXPECT_EQ(press.status, 303);
  EXPECT_EQ(b->Get("/api/v1/me").Json()["email"], "alice@example.test");
}

TEST_F(MailDeliveryTest, MailWaitsWhileSmtpIsDownAndIsDeliveredWhenItIsBack) {
  const int port = sink_.port();
  auto b = Browser();
  SignUp(*b, "alice@example.test");  // while the SMTP server is up: the address-proof mail
  sink_.Stop();
  ASSERT_EQ(b->PostJson("/api/v1/auth/password-reset", {{"email", "alice@example.test"}}).status,
            202);
  auto attempt = app_->DeliverMailNow();
  ASSERT_TRUE(attempt);
  EXPECT_EQ(*attempt, 0) << "nothing can be sent while the SMTP server is down";
  EXPECT_TRUE(MailsTo(inbox(), "alice@example.test").empty());

  std::string error;
  ASSERT_TRUE(sink_.Start(port, inbox(), {}, &error)) << error;
  clock_.Advance(std::chrono::minutes(2));  // past the retry back-off
  auto mails = Received("alice@example.test", 1);
  ASSERT_EQ(mails.size(), 1u);
  const std::string token = mails[0].TokenFromLink("/auth/reset-password");
  ASSERT_FALSE(token.empty());
  EXPECT_EQ(b->PostJson("/api/v1/auth/password-reset/consume",
                        {{"token", token}, {"password", "a new password"}})
                .status,
            200);
}

}  // namespace
}  // namespace gpuwerk::testing
