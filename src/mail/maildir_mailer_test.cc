#include "mail/maildir_mailer.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

namespace gpuwerk::mail {
namespace {

namespace fs = std::filesystem;

TEST(FindLinksTest, FindsHttpAndHttpsLinksWithoutTrailingPunctuation) {
  EXPECT_EQ(
      FindLinks("Sign in: https://gw.example/auth/magic?token=abc_-1.\n"
                "Or (http://127.0.0.1:8080/x#y), or <https://gw.example/z>; "
                "again https://gw.example/auth/magic?token=abc_-1 and \"https://q.example/\""),
      (std::vector<std::string>{"https://gw.example/auth/magic?token=abc_-1",
                                "http://127.0.0.1:8080/x#y", "https://gw.example/z",
                                "https://q.example/"}));
  EXPECT_TRUE(FindLinks("no links here, not even ftp://x.example or https:// alone").empty());
}

class MaildirMailerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gpuwerk-maildir-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    previous_logger_ = spdlog::default_logger();
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log_);
    auto logger = std::make_shared<spdlog::logger>("test", sink);
    logger->set_pattern("%v");
    spdlog::set_default_logger(logger);
  }
  void TearDown() override {
    spdlog::set_default_logger(previous_logger_);
    fs::remove_all(dir_);
  }
  std::vector<fs::path> Files(const std::string& sub) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir_ / "mail" / sub)) {
      files.push_back(entry.path());
    }
    return files;
  }

  fs::path dir_;
  std::ostringstream log_;
  std::shared_ptr<spdlog::logger> previous_logger_;
};

TEST_F(MaildirMailerTest, StoresEachMailInNewAndLogsItsLinks) {
  MaildirMailer mailer(dir_ / "mail", "gpuwerk <noreply@gpuwerk.local>");
  const Mail mail{.to = "ada@example.com",
                  .subject = "Sign in to gpuwerk",
                  .text_body = "Follow https://127.0.0.1:8080/auth/magic?token=t0k3n.\n",
                  .html_body = "<a href=\"https://127.0.0.1:8080/auth/magic?token=t0k3n\">in</a>"};
  ASSERT_TRUE(mailer.Send(mail));
  ASSERT_TRUE(mailer.Send(mail));

  EXPECT_TRUE(Files("tmp").empty());
  EXPECT_TRUE(Files("cur").empty());
  const std::vector<fs::path> files = Files("new");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_NE(files[0].filename(), files[1].filename());
  for (const fs::path& file : files) {
    // <seconds>.M<micros>P<pid>Q<n>R<random>.<host>, no ':' (reserved for the info suffix).
    const std::string name = file.filename().string();
    EXPECT_NE(name.find(".M"), std::string::npos) << name;
    EXPECT_NE(name.find("P" + std::to_string(::getpid()) + "Q"), std::string::npos) << name;
    EXPECT_EQ(name.find(':'), std::string::npos) << name;
    struct stat st {};
    ASSERT_EQ(::stat(file.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);

    std::ifstream in(file, std::ios::binary);
    const std::string content((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(content.find('\r'), std::string::npos) << "Maildir files use LF line endings";
    EXPECT_NE(content.find("\nSubject: Sign in to gpuwerk\n"), std::string::npos);
    EXPECT_NE(content.find("\nTo: ada@example.com\n"), std::string::npos);
  }
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "mail" / "new").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  const std::string log = log_.str();
  EXPECT_NE(log.find("mail to=ada@example.com subject=Sign in to gpuwerk file=" +
                     (dir_ / "mail" / "new").string() + "/"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("mail link: https://127.0.0.1:8080/auth/magic?token=t0k3n\n"),
            std::string::npos)
      << log;
}

TEST_F(MaildirMailerTest, RefusesAnInvalidMailAndStoresNothing) {
  MaildirMailer mailer(dir_ / "mail", "noreply@gpuwerk.local");
  auto r = mailer.Send(
      Mail{.to = "ada@example.com\r\nBcc: x@example.com", .subject = "s", .text_body = "t"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().api_code, "invalid_mail");
  EXPECT_FALSE(fs::exists(dir_ / "mail"));
}

TEST_F(MaildirMailerTest, UnwritableDirectoryIsUnavailable) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "file") << "not a directory";
  MaildirMailer mailer(dir_ / "file" / "mail", "noreply@gpuwerk.local");
  auto r = mailer.Send(Mail{.to = "ada@example.com", .subject = "s", .text_body = "t"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, core::ErrorCode::kUnavailable);
  EXPECT_EQ(r.error().api_code, "mail_unavailable");
}

}  // namespace
}  // namespace gpuwerk::mail
