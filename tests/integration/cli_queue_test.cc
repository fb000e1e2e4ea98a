// `gpuwerk queue join|ls|leave` and `gpuwerk usage queue` as a person runs them against a real
// server: tables, --json, and the one-line errors and exit codes scripts rely on.
#include <gtest/gtest.h>

#include "tests/integration/server_fixture.h"
#include "tests/support/run_command.h"
#include "tests/support/ssh_keygen.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

class CliQueueTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    if (HasFatalFailure()) return;
    auto b = Browser();
    SignUp(*b, "alice@example.test", "alice password 1", Card::kNone);  // no host: nothing launches
    auto login =
        Gpuwerk("login --url " + app_->base_url() + " --email alice@example.test --password-stdin",
                "alice password 1\n");
    ASSERT_EQ(login.exit_code, 0) << login.err;
    auto key = GenerateKey(dir_.path(), "laptop");
    auto add = Gpuwerk("keys add laptop " + key.private_path.string() + ".pub");
    ASSERT_EQ(add.exit_code, 0) << add.err;
  }
  CommandResult Gpuwerk(const std::string& args, const std::string& input = "") {
    return RunCommand(dir_.path(),
                      "env -u GPUWERK_URL -u GPUWERK_TOKEN GPUWERK_CONFIG_DIR='" +
                          (dir_.path() / "config").string() + "' " + GpuwerkBinary() + " " + args,
                      input);
  }
};

TEST_F(CliQueueTest, JoinListHistoryLeave) {
  // No host: spark-1x is not online, so creating enters the queue (issue 5); a second entry of
  // the type is refused; joining works and shows the position.
  auto create = Gpuwerk("instances create waiting --key laptop");
  ASSERT_EQ(create.exit_code, 0) << create.err;
  EXPECT_NE(create.out.find("joined its queue at position 1"), std::string::npos) << create.out;
  ASSERT_EQ(Gpuwerk("queue leave waiting").exit_code, 0);
  clock_.Advance(std::chrono::seconds(1));  // history is ordered by entry time
  auto join = Gpuwerk("queue join --gpu-type spark-1x trainer --key laptop");
  ASSERT_EQ(join.exit_code, 0) << join.err;
  EXPECT_NE(join.out.find("position 1"), std::string::npos) << join.out;
  // Alice has no card: her turn would be passed over, and she is told so.
  EXPECT_NE(join.err.find("warning: no payment method is on file"), std::string::npos) << join.err;
  EXPECT_NE(join.err.find("passed over"), std::string::npos) << join.err;
  // Her queued name has no instance yet: ssh says where it stands.
  auto ssh = Gpuwerk("ssh trainer");
  EXPECT_EQ(ssh.exit_code, 1);
  EXPECT_NE(ssh.err.find("waits in the spark-1x queue at position 1"), std::string::npos)
      << ssh.err;
  auto twice = Gpuwerk("queue join --gpu-type spark-1x other --key laptop");
  EXPECT_EQ(twice.exit_code, 1);
  EXPECT_NE(twice.err.find("(already_queued)"), std::string::npos) << twice.err;
  EXPECT_EQ(std::count(twice.err.begin(), twice.err.end(), '\n'), 1) << twice.err;

  auto ls = Gpuwerk("queue ls --json");
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  auto items = json::parse(ls.out);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0]["name"], "trainer");
  EXPECT_EQ(items[0]["position"], 1);
  auto table = Gpuwerk("queue ls");
  EXPECT_NE(table.out.find("POSITION"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("trainer"), std::string::npos) << table.out;

  clock_.Advance(std::chrono::seconds(90));
  auto leave = Gpuwerk("queue leave trainer");
  ASSERT_EQ(leave.exit_code, 0) << leave.err;
  auto gone = Gpuwerk("queue leave trainer");
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_NE(gone.err.find("(not_found)"), std::string::npos) << gone.err;

  auto usage = Gpuwerk("usage queue --json");
  ASSERT_EQ(usage.exit_code, 0) << usage.err;
  auto history = json::parse(usage.out);
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[1]["outcome"], "cancelled");
  EXPECT_EQ(history[1]["wait_seconds"], 90);
  auto usage_table = Gpuwerk("usage queue");
  EXPECT_NE(usage_table.out.find("0h01m30s"), std::string::npos) << usage_table.out;
  EXPECT_NE(usage_table.out.find("cancelled"), std::string::npos) << usage_table.out;
}

}  // namespace
}  // namespace gpuwerk::testing
