// The launch gate end to end (R-14, issue 13 "Must show"): the real `gpuwerk server`, a real
// `gpuwerk agent` on the test's podman service, the real CLI and the manual provider. Without a
// payment method a launch answers 402 and nothing is created (no instance, no container); a
// queue entry of a person without one is passed over (mailed once) while the host is free, and
// is launched (its container running) as soon as the operator records a card with
// `gpuwerk admin billing set-card`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/e2e_engine.h"
#include "tests/support/e2e_platform.h"
#include "tests/support/engine_probe.h"
#include "tests/support/eventually.h"
#include "tests/support/host_waits.h"
#include "tests/support/http_client.h"
#include "tests/support/mail_reader.h"
#include "tests/support/matchers.h"
#include "tests/support/run_command.h"
#include "tests/support/ssh_keygen.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::testing {
namespace {

const auto* const kEngine = RegisterEngineEnvironment("gpuwerk-billing-engine");

using nlohmann::json;
using std::chrono::seconds;

class BillingE2eTest : public E2eTest<> {
 protected:
  /// `gpuwerk ARGS` with a login file of `who`'s own.
  CommandResult Cli(const std::string& who, const std::string& args,
                    const std::string& input = "") {
    return RunCommand(dir_.path(),
                      "env -u GPUWERK_URL -u GPUWERK_TOKEN GPUWERK_CONFIG_DIR='" +
                          (dir_.path() / ("cli-" + who)).string() + "' " + GpuwerkBinary() + " " +
                          args,
                      input);
  }
  /// The containers the engine runs for the test's host.
  json HostContainers(const E2eHost& host) {
    return engine_->ContainersWithLabel(kHostLabel, host.id);
  }
};

TEST_F(BillingE2eTest, NoCardNoLaunchThenTheQueueEntryLaunchesOnceTheCardIsRecorded) {
  platform_.StartServer();
  ASSERT_FALSE(HasFatalFailure());
  auto op = platform_.Operator();
  E2eHost& host = platform_.AddHost(*op, "spark-bill");
  ASSERT_FALSE(host.id.empty() || host.token.empty());
  platform_.StartAgent(host);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(WaitHostsReady(*op, 1)) << "the agent never synced with a working engine";

  auto alice = platform_.SignUp("alice@example.test", {}, Card::kNone);
  GeneratedKey key = GenerateKey(dir_.path(), "alice");
  ASSERT_FALSE(key.public_line.empty()) << "ssh-keygen failed";
  auto k =
      alice->PostJson("/api/v1/ssh-keys", {{"name", "laptop"}, {"public_key", key.public_line}});
  ASSERT_EQ(k.status, 201) << k.body;
  const std::string key_id = k.Json()["id"];

  // No card: 402 with what to do, and nothing created, on the server or on the engine.
  auto refused = alice->PostJson(
      "/api/v1/instances", {{"name", "web"}, {"ssh_key_id", key_id}, {"gpu_type", "spark-1x"}});
  EXPECT_EQ(refused.status, 402) << refused.body;
  EXPECT_THAT(refused, HasApiCode("payment_method_required"));
  EXPECT_EQ(alice->Get("/api/v1/instances").Json()["total"], 0);
  EXPECT_EQ(alice->Get("/api/v1/queue-entries").Json()["total"], 0);
  EXPECT_EQ(HostContainers(host), json::array());
  // The CLI says the same, and where cards come from under the manual provider.
  auto login = Cli(
      "alice", "login --url " + platform_.url() + " --email alice@example.test --password-stdin",
      std::string(kPassword) + "\n");
  ASSERT_EQ(login.exit_code, 0) << login.err;
  auto add_card = Cli("alice", "billing add-card");
  EXPECT_EQ(add_card.exit_code, 1);
  EXPECT_NE(add_card.err.find("(manual_provider)"), std::string::npos) << add_card.err;

  // Joining the queue needs no card; the free host passes the entry over (one mail).
  auto joined = alice->PostJson(
      "/api/v1/queue-entries", {{"name", "web"}, {"ssh_key_id", key_id}, {"gpu_type", "spark-1x"}});
  ASSERT_EQ(joined.status, 201) << joined.body;
  EXPECT_EQ(joined.Json()["status"], "open");
  ASSERT_TRUE(Eventually(
      [&] {
        for (const auto& m : MailsTo(platform_.data() / "mail", "alice@example.test")) {
          if (m.subject.find("passed over") != std::string::npos) return true;
        }
        return false;
      },
      seconds(30)))
      << "no passed-over mail";
  json entry = alice->Get("/api/v1/queue-entries").Json()["items"][0];
  EXPECT_EQ(entry["position"], 1);
  EXPECT_EQ(HostContainers(host), json::array());

  // The operator records her card with the CLI: the entry launches at once, and runs.
  auto op_login = Cli(
      "op", "login --url " + platform_.url() + " --email " + kOperatorEmail + " --password-stdin",
      std::string(kOperatorPassword) + "\n");
  ASSERT_EQ(op_login.exit_code, 0) << op_login.err;
  auto set = Cli("op",
                 "admin billing set-card alice@example.test --brand visa --last4 4242 "
                 "--exp 12/2030");
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_NE(set.out.find("visa ending 4242"), std::string::npos) << set.out;
  json instances = alice->Get("/api/v1/instances").Json();
  ASSERT_EQ(instances["total"], 1) << instances.dump();
  EXPECT_EQ(instances["items"][0]["name"], "web");
  const std::string id = instances["items"][0]["id"];
  json shown;
  EXPECT_TRUE(Eventually(
      [&] {
        shown = alice->Get("/api/v1/instances/" + id).Json();
        return shown.is_object() && shown["status"] == "running";
      },
      seconds(120)))
      << shown.dump();
  EXPECT_EQ(HostContainers(host).size(), 1u);
  size_t passed_over = 0;
  for (const auto& m : MailsTo(platform_.data() / "mail", "alice@example.test")) {
    passed_over += m.subject.find("passed over") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(passed_over, 1u);
  auto state = Cli("alice", "billing --json");
  ASSERT_EQ(state.exit_code, 0) << state.err;
  EXPECT_EQ(json::parse(state.out, nullptr, false)["payment_method"]["last4"], "4242") << state.out;
  EXPECT_EQ(alice->Delete("/api/v1/instances/" + id).status, 204);
}

}  // namespace
}  // namespace gpuwerk::testing
