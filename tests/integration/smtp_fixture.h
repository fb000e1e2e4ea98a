#pragma once

// A real SMTP server (aiosmtpd, tests/support/smtp_sink.h) in front of an in-process control
// plane: the server's mail goes out over SMTP to it, and the test reads what arrived.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "app/server_config.h"
#include "tests/support/mail_reader.h"
#include "tests/support/smtp_sink.h"

namespace gpuwerk::testing {

/// `Base` (ServerTest or a fixture derived from it) with its mail sent by SMTP to a real SMTP
/// server on a free port, started before the control plane; skips when no SMTP server can run
/// here (SinkUnavailable).
template <class Base>
class WithSmtpSink : public Base {
 protected:
  void SetUp() override {
    if (auto why = SinkUnavailable()) GTEST_SKIP() << "no real SMTP server: " << *why;
    std::string error;
    ASSERT_TRUE(sink_.Start(0, inbox(), {}, &error)) << error;
    Base::SetUp();
  }
  void Customize(app::ServerConfig& c) override {
    c.mail = "smtp";
    c.smtp_url = "smtp://127.0.0.1:" + std::to_string(sink_.port());
    c.smtp_from = "gpuwerk <noreply@gpuwerk.test>";
  }
  /// Where the SMTP server writes what it receives.
  std::filesystem::path inbox() const { return this->dir_.path() / "inbox"; }
  std::filesystem::path MailDir() const override { return inbox(); }

  /// Waits up to 10 s for `count` mails to `to` in the SMTP server's inbox (nudging the outbox
  /// worker), and returns them all.
  std::vector<ReceivedMail> Received(const std::string& to, size_t count) {
    std::vector<ReceivedMail> mails;
    for (int i = 0; i < 200; ++i) {
      (void)this->app_->DeliverMailNow();
      mails = MailsTo(inbox(), to);
      if (mails.size() >= count) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return mails;
  }

  SmtpSink sink_;
};

}  // namespace gpuwerk::testing
