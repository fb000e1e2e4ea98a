// Mail from the whole server through a real SMTP server (aiosmtpd): the magic-link mail arrives
// and its link signs in; with the SMTP server down, the mail waits in the outbox and goes out
// when the server is back.
#include <gtest/gtest.h>

#include "tests/integration/server_fixture.h"
#include "tests/support/smtp_sink.h"

namespace gpuwerk::testing {
namespace {

class MailDeliveryTest : public ServerTest {
 protected:
  void SetUp() override {
    if (auto why = SinkUnavailable()) GTEST_SKIP() << "no real SMTP server: " << *why;
    std::string error;
    ASSERT_TRUE(sink_.Start(0, inbox(), {}, &error)) << error;
    ServerTest::SetUp();
  }
  void Customize(app::ServerConfig& c) override {
    c.mail = "smtp";
    c.smtp_url = "smtp://127.0.0.1:" + std::to_string(sink_.port());
    c.smtp_from = "gpuwerk <noreply@gpuwerk.test>";
  }
  std::filesystem::path inbox() const { return dir_.path() / "inbox"; }

  /// Waits up to 10 s for `count` mails to `to` in the SMTP server's inbox.
  std::vector<ReceivedMail> Received(const std::string& to, size_t count) {
    std::vector<ReceivedMail> mails;
    for (int i = 0; i < 200; ++i) {
      (void)app_->DeliverMailNow();
      mails = MailsTo(inbox(), to);
      if (mails.size() >= count) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return mails;
  }

  SmtpSink sink_;
};

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
  sink_.Stop();
  auto b = Browser();
  SignUp(*b, "alice@example.test");
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
