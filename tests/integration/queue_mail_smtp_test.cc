// The queue's launch mail through a real SMTP server (aiosmtpd) started by the test: it names
// the instance and the command to reach it, and that instance reports the ssh command once the
// (fake) agent says its sshd is ready.
#include <gtest/gtest.h>

#include "tests/integration/queue_fixture.h"
#include "tests/support/smtp_sink.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

class QueueSmtpTest : public QueueFixture {
 protected:
  void SetUp() override {
    if (auto why = SinkUnavailable()) GTEST_SKIP() << "no real SMTP server: " << *why;
    std::string error;
    ASSERT_TRUE(sink_.Start(0, inbox(), {}, &error)) << error;
    QueueFixture::SetUp();
  }
  void Customize(app::ServerConfig& c) override {
    c.mail = "smtp";
    c.smtp_url = "smtp://127.0.0.1:" + std::to_string(sink_.port());
    c.smtp_from = "gpuwerk <noreply@gpuwerk.test>";
  }
  std::filesystem::path inbox() const { return dir_.path() / "inbox"; }
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

TEST_F(QueueSmtpTest, LaunchMailArrivesOverSmtp) {
  Person alice = NewPerson("alice@example.test");
  ASSERT_EQ(Join(alice, "trainer").status, 201);
  AddHost("spark-a");  // capacity: the entry is launched
  const std::string id = InstanceOn("spark-a");
  ASSERT_FALSE(id.empty());
  const json in = alice.browser->Get("/api/v1/instances/" + id).Json();
  auto mails = Received("alice@example.test", 1);
  ASSERT_EQ(mails.size(), 1u);
  EXPECT_EQ(mails[0].subject, "Your gpuwerk instance trainer is starting");
  EXPECT_NE(mails[0].text_body.find("gpuwerk ssh trainer"), std::string::npos)
      << mails[0].text_body;
  EXPECT_NE(mails[0].text_body.find(in["hostname"].get<std::string>()), std::string::npos);
  // Once the agent reports the container's sshd ready, the instance shows the command that
  // `gpuwerk ssh trainer` runs.
  ASSERT_EQ(Sync("spark-a", json::array({{{"instance_id", id},
                                          {"node_index", 0},
                                          {"container_id", "c0"},
                                          {"state", "running"},
                                          {"ssh_port", 40001},
                                          {"ssh_ready", true},
                                          {"restart_generation", 0}}}))
                .status,
            200);
  const json running = alice.browser->Get("/api/v1/instances/trainer").Json();
  EXPECT_EQ(running["status"], "running");
  EXPECT_EQ(running["ssh_command"], "ssh -p 40001 root@127.0.0.1");
}

}  // namespace
}  // namespace gpuwerk::testing
