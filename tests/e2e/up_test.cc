// `gpuwerk up` end to end (issue 3, item 5): the real binary finds no Docker socket, starts its
// own podman API service, registers this machine as a spark-1x host and runs a local agent; an
// instance made over the API is reached by a stock `ssh`; Ctrl-C (SIGINT) stops the agent, the
// server and the podman service but not the instance; `gpuwerk up` again finds it running
// without restarting it. Needs root (rootful podman) and the instance image.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "core/strings.h"
#include "tests/support/child_process.h"
#include "tests/support/e2e_engine.h"
#include "tests/support/http_client.h"
#include "tests/support/run_command.h"
#include "tests/support/ssh_keygen.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::seconds;

std::string Podman(const std::string& args) {
  return "CONTAINERS_CONF='" + SourceDir() + "/config/containers.conf' podman " + args;
}

class UpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: rootful podman";
    if (fs::exists("/var/run/docker.sock") || fs::exists("/run/docker.sock")) {
      GTEST_SKIP() << "a Docker socket exists here; this test covers the podman service of up";
    }
    CommandResult built =
        RunCommand(dir_.path(),
                   "bash '" + SourceDir() + "/scripts/instance-image/build.sh' " + kInstanceImage);
    ASSERT_EQ(built.exit_code, 0) << built.out << built.err;
    data_ = dir_.path() / "data";
  }

  void TearDown() override {
    if (!instance_id_.empty()) {  // never leave a container behind, whatever failed
      RunCommand(dir_.path(),
                 Podman("rm -f -t 0 $(" +
                        Podman("ps -aq --filter label=gpuwerk.instance=" + instance_id_) + ")"));
    }
    up_.Kill(SIGINT);
    if (!up_.Wait(seconds(20))) up_.Kill(SIGKILL);
    // A podman service that outlived a failed test.
    std::ifstream pid_file(data_ / "engine" / "podman.pid");
    pid_t pid = -1;
    if (pid_file >> pid && pid > 0) ::kill(pid, SIGTERM);
  }

  /// Starts `gpuwerk up` and waits for its banner; returns the banner's dashboard URL.
  std::string StartUp() {
    const fs::path log = dir_.path() / ("up-" + std::to_string(++starts_) + ".log");
    std::vector<std::string> argv = {GpuwerkBinary(),    "up",          "--data",
                                     data_.string(),     "--listen",    "127.0.0.1:0",
                                     "--ssh-listen",     "127.0.0.1:0", "--password-hash-cost",
                                     "test-only-minimum"};
    // No inherited CONTAINERS_CONF: `up` must bring its own engine settings.
    EXPECT_TRUE(up_.Start(argv, {{"CONTAINERS_CONF", ""}}, log)) << up_.error();
    const std::regex dashboard(R"(dashboard:\s+(http://127\.0\.0\.1:[0-9]+)/)");
    const std::regex relay(R"(ssh:\s+127\.0\.0\.1:([0-9]+) \(relay)");
    const auto deadline = std::chrono::steady_clock::now() + seconds(90);
    while (std::chrono::steady_clock::now() < deadline) {
      banner_ = ReadFile(log);
      std::smatch m;
      if (std::regex_search(banner_, m, dashboard)) {
        std::smatch r;
        if (std::regex_search(banner_, r, relay)) relay_port_ = std::stoi(r[1]);
        return m[1];
      }
      if (!up_.Running()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "no banner from gpuwerk up; its log:\n" << ReadFile(log);
    return "";
  }

  /// Signs in as the operator `up` created (its password is in the data directory).
  std::unique_ptr<HttpClient> SignIn(const std::string& url) {
    auto client = std::make_unique<HttpClient>(url);
    std::string password =
        std::string(core::TrimEnd(ReadFile(data_ / "operator-password"), core::kWhitespace));
    auto r = client->PostJson("/api/v1/auth/login",
                              {{"email", "operator@gpuwerk.local"}, {"password", password}});
    EXPECT_EQ(r.status, 200) << r.body;
    return client;
  }

  json WaitForStatus(HttpClient& client, const std::string& status) {
    json in;
    const auto deadline = std::chrono::steady_clock::now() + seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      in = client.Get("/api/v1/instances/" + instance_id_).Json();
      if (in.value("status", "") == status) return in;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "instance never became " << status << ": " << in.dump();
    return in;
  }

  CommandResult Ssh(const json& in, const std::string& command) {
    const std::string ssh_command = in.value("ssh_command", "");
    return RunCommand(dir_.path(),
                      ssh_command + " -i '" + key_.private_path.string() +
                          "' -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o "
                          "BatchMode=yes -o LogLevel=ERROR '" +
                          command + "'");
  }

  /// A stock ssh through the relay, with the instance's hostname as the user name (docs/ssh.md).
  CommandResult SshViaRelay(const json& in, const std::string& command,
                            const std::string& known_hosts = "/dev/null") {
    return RunCommand(
        dir_.path(),
        "ssh -p " + std::to_string(relay_port_) + " -i '" + key_.private_path.string() +
            "' -o StrictHostKeyChecking=" + (known_hosts == "/dev/null" ? "no" : "yes") +
            " -o UserKnownHostsFile=" + known_hosts +
            " -o HostKeyAlias=gpuwerk-relay -o BatchMode=yes -o LogLevel=ERROR " +
            in.value("hostname", "") + "@127.0.0.1 '" + command + "'");
  }

  std::string StartedAt() {
    return std::string(core::TrimEnd(
        RunCommand(dir_.path(),
                   Podman("inspect --format '{{.State.StartedAt}}' $(" +
                          Podman("ps -aq --filter label=gpuwerk.instance=" + instance_id_) + ")"))
            .out,
        core::kWhitespace));
  }

  TempDir dir_;
  fs::path data_;
  ChildProcess up_;
  int starts_ = 0;
  int relay_port_ = 0;
  std::string banner_;
  std::string instance_id_;
  GeneratedKey key_;
};

TEST_F(UpTest, C08_RunsTheWholePlatformAndKeepsInstancesAndTheRelayHostKeyAcrossRestarts) {
  const std::string url = StartUp();
  ASSERT_FALSE(url.empty());
  EXPECT_NE(banner_.find("podman service started by gpuwerk"), std::string::npos) << banner_;
  EXPECT_NE(banner_.find("host:       local, spark-1x"), std::string::npos) << banner_;
  // R-14: the operator `up` made has a manual payment method, so it can launch at once.
  EXPECT_NE(banner_.find("billing:    manual; a payment method was recorded for"),
            std::string::npos)
      << banner_;
  const std::string engine_socket = (data_ / "engine" / "podman.sock").string();
  ASSERT_TRUE(fs::exists(engine_socket));

  // A second `up` on the same data directory refuses to start and changes nothing.
  {
    ChildProcess second;
    const fs::path log = dir_.path() / "second.log";
    ASSERT_TRUE(second.Start(
        {GpuwerkBinary(), "up", "--data", data_.string(), "--listen", "127.0.0.1:0"}, {}, log));
    auto status = second.Wait(seconds(30));
    ASSERT_TRUE(status.has_value());
    EXPECT_NE(*status, 0);
    EXPECT_NE(ReadFile(log).find("in use"), std::string::npos) << ReadFile(log);
  }

  // The operator launches an instance on the local host and logs in with a stock ssh.
  auto op = SignIn(url);
  key_ = GenerateKey(dir_.path(), "op_key");
  auto key =
      op->PostJson("/api/v1/ssh-keys", {{"name", "laptop"}, {"public_key", key_.public_line}});
  ASSERT_EQ(key.status, 201) << key.body;
  auto created =
      op->PostJson("/api/v1/instances",
                   {{"name", "alpha"}, {"ssh_key_id", key.Json()["id"]}, {"gpu_type", "spark-1x"}});
  ASSERT_EQ(created.status, 201) << created.body;
  instance_id_ = created.Json()["id"];
  EXPECT_EQ(created.Json()["hosts"], json::array({"local"}));
  json in = WaitForStatus(*op, "running");
  CommandResult host = Ssh(in, "hostname");
  ASSERT_EQ(host.exit_code, 0) << host.err;
  EXPECT_EQ(std::string(core::TrimEnd(host.out, core::kWhitespace)), in["hostname"]);
  ASSERT_EQ(Ssh(in, "echo kept > /root/marker").exit_code, 0);
  const std::string started = StartedAt();
  ASSERT_FALSE(started.empty());

  // The same through the relay, as `gpuwerk up` prints it: output and exit status come back.
  ASSERT_GT(relay_port_, 0) << banner_;
  CommandResult relayed = SshViaRelay(in, "hostname; exit 7");
  EXPECT_EQ(relayed.exit_code, 7) << relayed.err;
  EXPECT_EQ(std::string(core::TrimEnd(relayed.out, core::kWhitespace)), in["hostname"]);
  // Record the relay's host key (known_hosts written on this first connection) for later.
  const std::string known_hosts = (dir_.path() / "known_hosts").string();
  // (Under the alias "gpuwerk-relay": the test's relay port changes between starts.)
  ASSERT_EQ(RunCommand(dir_.path(), "ssh-keyscan -p " + std::to_string(relay_port_) +
                                        " -t ed25519 127.0.0.1 2>/dev/null | sed "
                                        "'s/^[^ ]* /gpuwerk-relay /' > " +
                                        known_hosts)
                .exit_code,
            0);
  ASSERT_NE(ReadFile(known_hosts).find("gpuwerk-relay ssh-ed25519 "), std::string::npos);

  // Ctrl-C: everything of up stops cleanly; the instance keeps running.
  std::ifstream pid_file(data_ / "engine" / "podman.pid");
  pid_t podman = -1;
  pid_file >> podman;
  ASSERT_GT(podman, 0);
  up_.Kill(SIGINT);
  auto status = up_.Wait(seconds(30));
  ASSERT_TRUE(status.has_value()) << "gpuwerk up did not stop on SIGINT";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << ChildProcess::Describe(*status);
  for (int i = 0; i < 100 && ::kill(podman, 0) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(::kill(podman, 0), 0) << "the podman service outlived gpuwerk up";
  EXPECT_EQ(StartedAt(), started);  // still there, not restarted
  EXPECT_EQ(
      std::string(core::TrimEnd(
          RunCommand(dir_.path(),
                     Podman("inspect --format '{{.State.Running}}' $(" +
                            Podman("ps -aq --filter label=gpuwerk.instance=" + instance_id_) + ")"))
              .out,
          core::kWhitespace)),
      "true");

  // `gpuwerk up` again: the instance is running, was not restarted, and keeps its files.
  const std::string url2 = StartUp();
  ASSERT_FALSE(url2.empty());
  auto op2 = SignIn(url2);
  in = WaitForStatus(*op2, "running");
  EXPECT_EQ(StartedAt(), started);
  CommandResult marker = Ssh(in, "cat /root/marker");
  ASSERT_EQ(marker.exit_code, 0) << marker.err;
  EXPECT_EQ(marker.out, "kept\n");
  // C08: the relay presents the same host key after the restart (StrictHostKeyChecking=yes).
  CommandResult strict = SshViaRelay(in, "cat /root/marker", known_hosts);
  EXPECT_EQ(strict.exit_code, 0) << strict.err;
  EXPECT_EQ(strict.out, "kept\n");

  // Delete ends an open relay session within about a second (R-10).
  ChildProcess shell;
  ASSERT_TRUE(shell.Start(
      {"/usr/bin/ssh", "-p", std::to_string(relay_port_), "-i", key_.private_path.string(), "-o",
       "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
       in.value("hostname", "") + "@127.0.0.1", "sleep 60"},
      {}, dir_.path() / "shell.log"));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ASSERT_TRUE(shell.Running()) << ReadFile(dir_.path() / "shell.log");

  // Delete: the container goes, the name is free again.
  ASSERT_EQ(op2->Delete("/api/v1/instances/" + instance_id_).status, 204);
  EXPECT_TRUE(shell.Wait(std::chrono::milliseconds(3000)).has_value())
      << "the relay session outlived the instance's deletion";
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (std::chrono::steady_clock::now() < deadline &&
         op2->Get("/api/v1/instances/" + instance_id_).status != 404) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(op2->Get("/api/v1/instances/" + instance_id_).status, 404);
  EXPECT_TRUE(
      std::string(
          core::TrimEnd(RunCommand(dir_.path(),
                                   Podman("ps -aq --filter label=gpuwerk.instance=" + instance_id_))
                            .out,
                        core::kWhitespace))
          .empty());
}

}  // namespace
}  // namespace gpuwerk::testing
