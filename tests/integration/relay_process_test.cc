// `gpuwerk up`'s relay in a process of its own (issue 12 finding 3; docs/ssh.md "Running it"):
// app::RelayProcess runs the real `gpuwerk relay` binary against a real server over loopback with
// the credential `local`, in front of a real sshd. The memory limit that applies to the child is
// read back from the kernel (its cgroup's memory.max or memory.limit_in_bytes, or
// /proc/PID/limits), and a relay killed with SIGKILL leaves the API answering and comes back, on
// the same port, under the same limit, letting people in again.
#include "app/relay_process.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <sstream>
#include <string>

#include "app/child_memory_limit.h"
#include "tests/integration/relay_fixture.h"
#include "tests/support/run_command.h"
#include "tests/support/test_sshd.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr int64_t kLimit = int64_t{512} << 20;

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The memory limit the kernel applies to `pid`, read from its own files as `kind` says, in
/// bytes; -1 when it cannot be read. For a cgroup: the group /proc/PID/cgroup names (so it
/// proves the process is in it), its memory.max (v2) or memory.limit_in_bytes (v1). For
/// RLIMIT_AS: the soft "Max address space" of /proc/PID/limits.
int64_t KernelLimitOf(pid_t pid, app::MemoryLimitKind kind, std::filesystem::path* group) {
  const std::string proc = "/proc/" + std::to_string(pid);
  if (kind == app::MemoryLimitKind::kCgroupV2 || kind == app::MemoryLimitKind::kCgroupV1) {
    const bool v2 = kind == app::MemoryLimitKind::kCgroupV2;
    const auto path = app::CgroupPathOf(ReadAll(proc + "/cgroup"), v2 ? "" : "memory");
    if (!path) return -1;
    const auto dir = app::CgroupDirOf(ReadAll("/proc/self/mountinfo"), v2 ? "" : "memory", *path);
    if (!dir) return -1;
    *group = *dir;
    const std::string value = ReadAll(*dir / (v2 ? "memory.max" : "memory.limit_in_bytes"));
    return value.empty() || value.starts_with("max") ? -1 : std::stoll(value);
  }
  if (kind == app::MemoryLimitKind::kAddressSpace) {
    std::istringstream limits(ReadAll(proc + "/limits"));
    for (std::string line; std::getline(limits, line);) {
      if (!line.starts_with("Max address space")) continue;
      std::istringstream fields(line.substr(std::string("Max address space").size()));
      std::string soft;
      fields >> soft;
      return soft == "unlimited" ? -1 : std::stoll(soft);
    }
  }
  return -1;
}

class RelayProcessTest : public RelayServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    if (HasFatalFailure()) return;
    SignInOperator();
    if (HasFatalFailure()) return;
    SignUpAliceWithKey();
    if (HasFatalFailure()) return;
    host_token_ = AddHost("spark-a");
    ASSERT_EQ(Sync(host_token_).status, 200);  // the host is heard from: it takes instances
    // The instance's sshd trusts the relay CA for its own instance (docs/ssh.md "Upstream"),
    // whose key file the relay process and the test share.
    auto relay_ca = RelayCa();
    ASSERT_TRUE(relay_ca) << relay_ca.error().message;
    sshd_ = std::make_unique<Sshd>(dir_.path() / "instance", "");
    auto created = alice_->PostJson(
        "/api/v1/instances",
        {{"name", "alpha"}, {"ssh_key_id", alice_key_id_}, {"gpu_type", "spark-1x"}});
    ASSERT_EQ(created.status, 201) << created.body;
    instance_id_ = created.Json()["id"].get<std::string>();
    hostname_ = created.Json()["hostname"].get<std::string>();
    sshd_->SetAuthorizedKeys(RelayCaLines(relay_ca->public_line, {instance_id_}));
    auto sync = Sync(host_token_, json::array({RunningContainer(instance_id_, sshd_->port())}));
    ASSERT_EQ(sync.status, 200) << sync.body;
  }
  void TearDown() override {
    if (relay_) relay_->Stop();
    ServerTest::TearDown();
  }

  /// Starts `gpuwerk relay` as `up` does, with the credential `local`.
  void StartRelay() {
    auto credential = app_->relay_credentials().IssueLocal("system");
    ASSERT_TRUE(credential) << credential.error().message;
    auto started = app::RelayProcess::Start({.program = GpuwerkBinary(),
                                             .server_url = app_->base_url(),
                                             .credential = credential->secret,
                                             .listen_address = "127.0.0.1",
                                             .listen_port = 0,
                                             .host_key_path = relay_dir() / "host_key",
                                             .relay_key_path = relay_dir() / "relay_key",
                                             .relay_ca_path = relay_dir() / "relay_ca",
                                             // A balancer network nobody here connects from:
                                             // the child must take the flag and start.
                                             .trusted_proxies = {"192.0.2.0/24"},
                                             .log_level = "info",
                                             .memory_limit_bytes = kLimit,
                                             .cgroup_name = "",
                                             .initial_backoff = 200ms});
    ASSERT_TRUE(started) << started.error().message;
    relay_ = std::move(*started);
  }

  /// `ssh <hostname>@relay COMMAND` with alice's key, the stock client.
  CommandResult Ssh(const std::string& command) {
    return RunCommand(dir_.path(),
                      SshVia(relay_->port(), alice_key_, hostname_) + " '" + command + "'");
  }

  /// Expects the limit the relay process reports to be the one the kernel applies to `pid`.
  void ExpectLimitApplies(pid_t pid) {
    const app::ChildMemoryLimit reported = relay_->memory_limit();
    if (reported.kind == app::MemoryLimitKind::kNone) {
      // Only a sanitizer build on a host without a cgroup memory controller it may use.
      ASSERT_TRUE(app::IsSanitizerBuild()) << reported.note;
      GTEST_SKIP() << "no memory limit can apply here: " << reported.note;
    }
    EXPECT_EQ(reported.bytes, kLimit);
    std::filesystem::path group;
    EXPECT_EQ(KernelLimitOf(pid, reported.kind, &group), kLimit)
        << app::MemoryLimitKindName(reported.kind) << ": " << reported.note;
    if (!reported.cgroup.empty()) {
      EXPECT_EQ(group, reported.cgroup);
    }
  }

  std::string host_token_, instance_id_, hostname_;
  std::unique_ptr<Sshd> sshd_;
  std::unique_ptr<app::RelayProcess> relay_;
};

TEST_F(RelayProcessTest, RunsUnderAMemoryLimitAndComesBackAfterAKillWhileTheApiAnswers) {
  ASSERT_NO_FATAL_FAILURE(StartRelay());
  const pid_t first = relay_->pid();
  ASSERT_GT(first, 0);
  EXPECT_EQ(relay_->starts(), 1);
  ASSERT_NO_FATAL_FAILURE(ExpectLimitApplies(first));

  auto through = Ssh("echo ok");
  EXPECT_EQ(through.out, "ok\n") << through.err;
  // Recorded under its credential's name.
  auto recorded = [&] {
    return op_->Get("/api/v1/admin/relay-sessions?instance_id=" + instance_id_).Json();
  };
  for (int i = 0; i < 200 && recorded()["total"] != 1; ++i) std::this_thread::sleep_for(50ms);
  const json rows = recorded();
  ASSERT_EQ(rows["total"], 1) << rows;
  EXPECT_EQ(rows["items"][0]["relay"], "local");

  // Killed: the control plane goes on answering, and the relay comes back on the same port.
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  EXPECT_EQ(Browser()->Get("/healthz").status, 200);
  EXPECT_EQ(op_->Get("/api/v1/admin/relays").status, 200);
  ASSERT_TRUE(relay_->WaitUntilListening(2, 30s));
  const pid_t second = relay_->pid();
  EXPECT_NE(second, first);
  EXPECT_EQ(relay_->starts(), 2);
  ASSERT_NO_FATAL_FAILURE(ExpectLimitApplies(second));
  auto again = Ssh("echo again");
  EXPECT_EQ(again.out, "again\n") << again.err;

  relay_->Stop();
  EXPECT_EQ(relay_->pid(), -1);
  EXPECT_EQ(::kill(second, 0), -1);  // reaped: gone
}

}  // namespace
}  // namespace gpuwerk::testing
