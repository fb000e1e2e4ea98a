// The queue's launch mail through a real SMTP server (aiosmtpd) started by the test: it names
// the instance and the command to reach it, and that instance reports the ssh command once the
// (fake) agent says its sshd is ready.
#include <gtest/gtest.h>

#include "tests/integration/queue_fixture.h"
#include "tests/integration/smtp_fixture.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

using QueueSmtpTest = WithSmtpSink<QueueFixture>;

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
