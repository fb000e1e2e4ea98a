// Integration test: SmtpMailer and the Outbox against a real SMTP server (aiosmtpd, started from
// tests/support/smtp_sink.py), with messages checked by an independent MIME parser (Python's
// email package).
#include "mail/smtp_mailer.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/random.h"
#include "mail/outbox.h"
#include "mail/outbox_mail_table.h"
#include "store/sqlite_database.h"
#include "tests/support/smtp_sink.h"
#include "tests/support/temp_database.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::mail {
namespace {

namespace fs = std::filesystem;
using testing::kPython;
using testing::SinkUnavailable;
using testing::SmtpSink;
using testing::SourceDir;

/// Parses a stored message with Python's email package (policy.default) and returns what it
/// found: subject, from, to, date (Unix seconds), message_id, content_type, text, html, defects.
constexpr const char* kParseScript = R"py(
import email, email.policy, json, sys
from email.utils import parsedate_to_datetime
with open(sys.argv[1], "rb") as f:
    msg = email.message_from_binary_file(f, policy=email.policy.default)
text = msg.get_body(("plain",))
html = msg.get_body(("html",))
print(json.dumps({
    "subject": str(msg["subject"]), "from": str(msg["from"]), "to": str(msg["to"]),
    "date": int(parsedate_to_datetime(msg["date"]).timestamp()),
    "message_id": str(msg["message-id"]), "content_type": msg.get_content_type(),
    "text": text.get_content() if text is not None else None,
    "html": html.get_content() if html is not None else None,
    "defects": [type(d).__name__ for part in msg.walk() for d in part.defects],
}))
)py";

nlohmann::json ParseWithPython(const fs::path& script, const fs::path& eml) {
  const std::string command = std::string(kPython) + " " + script.string() + " " + eml.string();
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return nullptr;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  ::pclose(pipe);
  return nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
}

std::string WithoutCr(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), '\r'), s.end());
  return s;
}

std::vector<fs::path> Messages(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::exists(dir)) return files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".eml") && !name.starts_with(".")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class SmtpMailerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = SinkUnavailable()) GTEST_SKIP() << "no real SMTP server: " << *why;
    fs::create_directories(dir_ / "inbox");
    std::ofstream(dir_ / "parse.py") << kParseScript;
  }
  void TearDown() override { sink_.Stop(); }
  void StartSink(int port = 0, const std::vector<std::string>& extra = {}) {
    std::string error;
    ASSERT_TRUE(sink_.Start(port, dir_ / "inbox", extra, &error)) << error;
  }
  SmtpMailerOptions Options() const {
    return SmtpMailerOptions{.url = "smtp://127.0.0.1:" + std::to_string(sink_.port()),
                             .from = "gpuwerk <noreply@gpuwerk.test>",
                             .timeout_seconds = 10};
  }

  testing::TempDir temp_;
  const fs::path& dir_ = temp_.path();
  SmtpSink sink_;
};

TEST_F(SmtpMailerTest, DeliversAMultipartMailThatAMimeParserReadsBack) {
  StartSink();
  const SmtpMailerOptions options = Options();
  ASSERT_TRUE(ValidateSmtpMailerOptions(options));
  SmtpMailer mailer(options);
  const Mail mail{.to = "ada@example.com",
                  .subject = "Dein Zugang — Grüße von gpuwerk ✓",
                  .text_body =
                      "Hallo Ada,\n\nmelde dich an: https://gpuwerk.test/auth/magic?t=x\n"
                      ".a line starting with a dot\n",
                  .html_body =
                      "<p>Hallo Ada,</p>\n<p><a href=\"https://gpuwerk.test/\">Anmelden"
                      "</a> — schön!</p>\n"};
  const auto before = std::chrono::system_clock::now();
  auto sent = mailer.Send(mail);
  ASSERT_TRUE(sent) << sent.error().message;

  const std::vector<fs::path> messages = Messages(dir_ / "inbox");
  ASSERT_EQ(messages.size(), 1u);
  const nlohmann::json parsed = ParseWithPython(dir_ / "parse.py", messages[0]);
  ASSERT_TRUE(parsed.is_object()) << "python could not parse " << messages[0];
  EXPECT_EQ(parsed["defects"], nlohmann::json::array());
  EXPECT_EQ(parsed["subject"], mail.subject);
  EXPECT_EQ(parsed["from"], "gpuwerk <noreply@gpuwerk.test>");
  EXPECT_EQ(parsed["to"], "ada@example.com");
  EXPECT_EQ(parsed["content_type"], "multipart/alternative");
  EXPECT_EQ(WithoutCr(parsed["text"].get<std::string>()), mail.text_body);
  EXPECT_EQ(WithoutCr(parsed["html"].get<std::string>()), mail.html_body);
  EXPECT_TRUE(parsed["message_id"].get<std::string>().ends_with("@gpuwerk.test>"))
      << parsed["message_id"];
  const int64_t date = parsed["date"].get<int64_t>();
  const int64_t before_unix =
      std::chrono::duration_cast<std::chrono::seconds>(before.time_since_epoch()).count();
  EXPECT_GE(date, before_unix - 1);
  EXPECT_LE(date, before_unix + 60);

  std::ifstream envelope_file(messages[0].string().substr(0, messages[0].string().size() - 4) +
                              ".envelope.json");
  const nlohmann::json envelope = nlohmann::json::parse(envelope_file, nullptr, false);
  EXPECT_EQ(envelope["mail_from"], "noreply@gpuwerk.test");
  EXPECT_EQ(envelope["rcpt_tos"], nlohmann::json::array({"ada@example.com"}));
}

TEST_F(SmtpMailerTest, RefusedRecipientIsRejectedForGood) {
  StartSink(0, {"--reject-rcpt", "gone@example.com"});
  SmtpMailer mailer(Options());
  auto sent = mailer.Send(Mail{.to = "gone@example.com", .subject = "s", .text_body = "t"});
  ASSERT_FALSE(sent);
  EXPECT_EQ(sent.error().code, core::ErrorCode::kInvalidArgument);
  EXPECT_EQ(sent.error().api_code, "mail_rejected") << sent.error().message;
  EXPECT_NE(sent.error().message.find("550"), std::string::npos) << sent.error().message;
  EXPECT_TRUE(Messages(dir_ / "inbox").empty());
}

TEST_F(SmtpMailerTest, RefusedMessageIsRejectedForGood) {
  StartSink(0, {"--reject-data"});
  SmtpMailer mailer(Options());
  auto sent = mailer.Send(Mail{.to = "ada@example.com", .subject = "s", .text_body = "t"});
  ASSERT_FALSE(sent);
  EXPECT_EQ(sent.error().api_code, "mail_rejected") << sent.error().message;
  EXPECT_NE(sent.error().message.find("554 5.6.0"), std::string::npos) << sent.error().message;
}

TEST_F(SmtpMailerTest, TemporaryRefusalIsUnavailable) {
  StartSink(0, {"--defer-rcpt", "busy@example.com"});
  SmtpMailer mailer(Options());
  auto sent = mailer.Send(Mail{.to = "busy@example.com", .subject = "s", .text_body = "t"});
  ASSERT_FALSE(sent);
  EXPECT_EQ(sent.error().code, core::ErrorCode::kUnavailable);
  EXPECT_EQ(sent.error().api_code, "mail_unavailable") << sent.error().message;
  EXPECT_NE(sent.error().message.find("450"), std::string::npos) << sent.error().message;
}

TEST_F(SmtpMailerTest, RequiredStartTlsThatIsNotOfferedIsUnavailable) {
  StartSink();
  SmtpMailerOptions options = Options();
  options.starttls = StartTls::kRequired;
  options.username = "ada";
  options.password = "hunter2-secret";
  SmtpMailer mailer(options);
  auto sent = mailer.Send(Mail{.to = "ada@example.com", .subject = "s", .text_body = "t"});
  ASSERT_FALSE(sent);
  EXPECT_EQ(sent.error().code, core::ErrorCode::kUnavailable);
  EXPECT_EQ(sent.error().api_code, "mail_unavailable");
  EXPECT_EQ(sent.error().message.find("hunter2"), std::string::npos) << sent.error().message;
  EXPECT_TRUE(Messages(dir_ / "inbox").empty());
}

TEST_F(SmtpMailerTest, InvalidMailIsRefusedBeforeConnecting) {
  SmtpMailer mailer(SmtpMailerOptions{.url = "smtp://127.0.0.1:1", .from = "a@gpuwerk.test"});
  auto sent =
      mailer.Send(Mail{.to = "a@b.test\r\nBcc: c@d.test", .subject = "s", .text_body = "t"});
  ASSERT_FALSE(sent);
  EXPECT_EQ(sent.error().api_code, "invalid_mail");
}

TEST_F(SmtpMailerTest, ValidatesOptions) {
  SmtpMailerOptions options{.url = "smtps://mail.example.com:465", .from = "a@gpuwerk.test"};
  EXPECT_TRUE(ValidateSmtpMailerOptions(options));
  for (const char* url : {"http://mail.example.com", "smtp://", "smtp://user:pw@mail.example.com",
                          "smtp://mail.example.com /x", "mail.example.com:25"}) {
    options.url = url;
    auto r = ValidateSmtpMailerOptions(options);
    ASSERT_FALSE(r) << url;
    EXPECT_EQ(r.error().api_code, "invalid_mail_config");
    EXPECT_EQ(r.error().message.find("pw"), std::string::npos);
  }
  options.url = "smtp://127.0.0.1:2525";
  options.from = "not an address";
  EXPECT_EQ(ValidateSmtpMailerOptions(options).error().api_code, "invalid_mail_from");
  options.from = "a@gpuwerk.test";
  options.password = "pw";
  EXPECT_EQ(ValidateSmtpMailerOptions(options).error().api_code, "invalid_mail_config");
}

// A server that accepts the connection (the kernel does, from the listen backlog) but never
// greets: the send ends at the timeout as mail_unavailable. Needs no Python.
TEST(SmtpMailerTimeoutTest, SilentServerTimesOutAsUnavailable) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);

  SmtpMailer mailer(
      SmtpMailerOptions{.url = "smtp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)),
                        .from = "noreply@gpuwerk.test",
                        .timeout_seconds = 1});
  const auto start = std::chrono::steady_clock::now();
  auto sent = mailer.Send(Mail{.to = "ada@example.com", .subject = "s", .text_body = "t"});
  const auto took = std::chrono::steady_clock::now() - start;
  ::close(listener);
  ASSERT_FALSE(sent);
  EXPECT_EQ(sent.error().code, core::ErrorCode::kUnavailable);
  EXPECT_EQ(sent.error().api_code, "mail_unavailable");
  EXPECT_NE(sent.error().message.find("no answer within 1 s"), std::string::npos)
      << sent.error().message;
  EXPECT_LT(took, std::chrono::seconds(5));
}

// The outbox end to end: the server is down, the attempt fails and is scheduled with back-off;
// the server comes back on the same port; after the back-off the mail goes out.
TEST_F(SmtpMailerTest, OutboxRetriesUntilTheServerIsBack) {
  StartSink();
  const int port = sink_.port();
  sink_.Stop();

  testing::TempDatabase db;
  ASSERT_TRUE(db.Open());
  core::FakeClock clock;
  core::SodiumRng rng;
  Outbox outbox(*db, clock, rng);
  SmtpMailer mailer(Options());
  OutboxWorker worker(*db, mailer, clock);

  auto id = outbox.Enqueue(Mail{.to = "ada@example.com",
                                .subject = "Your sign-in link",
                                .text_body = "https://gpuwerk.test/auth/magic?t=abc\n",
                                .html_body = "<a href=\"https://gpuwerk.test/\">sign in</a>"});
  ASSERT_TRUE(id) << id.error().message;
  const auto stored = [&]() {
    return db->Read([&](store::Transaction& tx) -> core::Result<OutboxMail> {
      GPUWERK_ASSIGN_OR_RETURN(auto mail, OutboxMailTable::Find(tx, *id));
      if (!mail) return core::NotFound("mail");
      return *mail;
    });
  };

  auto sent = worker.DeliverDue();
  ASSERT_TRUE(sent) << sent.error().message;
  EXPECT_EQ(*sent, 0);
  auto row = stored();
  ASSERT_TRUE(row);
  EXPECT_EQ(row->attempts, 1);
  EXPECT_FALSE(row->sent_at);
  ASSERT_TRUE(row->last_error);
  EXPECT_TRUE(row->last_error->starts_with("mail_unavailable: ")) << *row->last_error;
  EXPECT_EQ(row->next_attempt_at, clock.NowUnix() + 5);
  EXPECT_EQ(worker.failed_attempts_total(), 1);

  StartSink(port);
  ASSERT_EQ(sink_.port(), port);
  sent = worker.DeliverDue();  // the back-off has not passed yet
  ASSERT_TRUE(sent);
  EXPECT_EQ(*sent, 0);
  EXPECT_TRUE(Messages(dir_ / "inbox").empty());

  clock.Advance(std::chrono::seconds(6));
  sent = worker.DeliverDue();
  ASSERT_TRUE(sent) << sent.error().message;
  EXPECT_EQ(*sent, 1);
  row = stored();
  ASSERT_TRUE(row);
  EXPECT_EQ(row->sent_at, clock.NowUnix());
  EXPECT_FALSE(row->last_error);

  const std::vector<fs::path> messages = Messages(dir_ / "inbox");
  ASSERT_EQ(messages.size(), 1u);
  const nlohmann::json parsed = ParseWithPython(dir_ / "parse.py", messages[0]);
  ASSERT_TRUE(parsed.is_object());
  EXPECT_EQ(parsed["subject"], "Your sign-in link");
  EXPECT_EQ(WithoutCr(parsed["text"].get<std::string>()),
            "https://gpuwerk.test/auth/magic?t=abc\n");
}

}  // namespace
}  // namespace gpuwerk::mail
