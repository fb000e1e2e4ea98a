// Issue 12 finding 9: the login probe (a libssh client against an sshd the tenant controls) runs
// in a confined child process, never in the agent that holds the engine socket. The child is
// read back through /proc while it runs: its user, its descriptors, its environment, its limits.
#include "agent/probe_process.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/testing/probe_watch.h"
#include "tests/support/ssh_keygen.h"
#include "tests/support/test_sshd.h"

namespace gpuwerk::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

ConfinedProbeOptions HelperProbe() { return {.command = {GPUWERK_LOGIN_PROBE_PROGRAM}}; }

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

using testing::ChildrenRunning;
using testing::Descriptors;
using testing::StatusField;
using testing::Tarpit;
using testing::WaitForChild;

class ProbeProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpuwerk-probe-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// The agent holds the engine's socket (a connection to it, open without O_CLOEXEC here, as the
// worst case) and a secret in its environment; the probe's child has neither, runs as nobody when
// the agent is root, cannot gain privileges, writes no files and dumps no core, and is killed and
// reaped at its deadline when the sshd hangs.
TEST_F(ProbeProcessTest, Finding9_TheLoginProbeRunsWithoutTheEngineSocketNotAsTheAgentsUser) {
  // A stand-in engine socket and the agent's connection to it.
  const std::string engine_path = (dir_ / "engine.sock").string();
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", engine_path.c_str());
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  const int engine = ::socket(AF_UNIX, SOCK_STREAM, 0);  // inheritable on purpose
  ASSERT_EQ(::connect(engine, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  std::error_code ec;
  const std::string engine_link =
      fs::read_symlink("/proc/self/fd/" + std::to_string(engine), ec).string();
  ASSERT_TRUE(engine_link.starts_with("socket:")) << engine_link;
  ::setenv("GPUWERK_HOST_TOKEN", "gwh_secret_of_the_agent", 1);

  Tarpit tarpit;
  const auto start = std::chrono::steady_clock::now();
  auto probe = std::async(std::launch::async, [&] {
    return ProbeLoginConfined(HelperProbe(), "127.0.0.1", tarpit.port(), "root",
                              "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9ok"
                              "Wi0dh2l9GKJl alice",
                              1s);
  });
  const std::optional<pid_t> child = WaitForChild(GPUWERK_LOGIN_PROBE_PROGRAM);
  ASSERT_TRUE(child.has_value()) << "no child runs the probe: it ran in the agent's process";
  // Once it has connected it is past loading its libraries: what it holds now is what it runs
  // with.
  ASSERT_TRUE(tarpit.WaitForConnections(1));
  // Read while it waits on the silent sshd.
  const std::string uid = StatusField(*child, "Uid:");
  const std::string no_new_privs = StatusField(*child, "NoNewPrivs:");
  const std::string groups = StatusField(*child, "Groups:");
  const std::map<int, std::string> fds = Descriptors(*child);
  const std::string environ = Slurp("/proc/" + std::to_string(*child) + "/environ");
  const std::string limits = Slurp("/proc/" + std::to_string(*child) + "/limits");
  const LoginProbeAnswer answer = probe.get();
  const auto took = std::chrono::steady_clock::now() - start;
  ::unsetenv("GPUWERK_HOST_TOKEN");
  ::close(engine);
  ::close(listener);

  std::istringstream uids(uid);
  std::set<long> ids;
  for (long id = 0; uids >> id;) ids.insert(id);
  if (::geteuid() == 0) {
    EXPECT_EQ(ids, std::set<long>{65534}) << "Uid:" << uid;  // real, effective, saved, fs: nobody
    EXPECT_EQ(groups.find_first_not_of(" \t"), std::string::npos) << "Groups:" << groups;
  } else {
    EXPECT_EQ(ids, std::set<long>{static_cast<long>(::geteuid())}) << "Uid:" << uid;
  }
  EXPECT_EQ(no_new_privs.substr(no_new_privs.find_first_not_of(" \t")), "1") << no_new_privs;
  ASSERT_FALSE(fds.empty());
  for (const auto& [fd, target] : fds) {
    EXPECT_NE(target, engine_link) << "the child holds the engine socket as descriptor " << fd;
    if (fd > 2) {
      // libssh's own TCP connection to the sshd, nothing of the agent's.
      EXPECT_TRUE(target.starts_with("socket:")) << fd << " → " << target;
    }
  }
  EXPECT_EQ(fds.count(0) + fds.count(1) + fds.count(2), 3u);
  EXPECT_EQ(environ.find("gwh_secret"), std::string::npos);
  EXPECT_NE(environ.find("PATH="), std::string::npos);
  EXPECT_NE(limits.find("Max core file size        0"), std::string::npos) << limits;
  EXPECT_NE(limits.find("Max file size             0"), std::string::npos) << limits;

  // The sshd never answered: no answer, within the time limit and the grace, child reaped.
  EXPECT_EQ(answer.outcome, LoginProbe::kNoAnswer);
  EXPECT_LT(took, 1s + HelperProbe().grace + 1s);
  EXPECT_FALSE(fs::exists("/proc/" + std::to_string(*child))) << "the child was not reaped";
}

// A child that outlives its deadline is killed (SIGKILL) and reaped; the caller is told why.
TEST_F(ProbeProcessTest, Finding9_AProbeThatOutlivesItsDeadlineIsKilled) {
  ConfinedProbeOptions sleeper{.command = {"/bin/sh", "-c", "exec sleep 30", "sh"},
                               .grace = std::chrono::milliseconds(300)};
  const auto start = std::chrono::steady_clock::now();
  const LoginProbeAnswer answer =
      ProbeLoginConfined(sleeper, "127.0.0.1", 22, "root", "ssh-ed25519 AAAA x", 200ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(answer.outcome, LoginProbe::kNoAnswer);
  EXPECT_NE(answer.error.find("deadline"), std::string::npos) << answer.error;
  EXPECT_TRUE(ChildrenRunning("/bin/sh").empty());
  // No program configured: no probe, said.
  const LoginProbeAnswer none = ProbeLoginConfined({}, "127.0.0.1", 22, "root", "x", 200ms);
  EXPECT_EQ(none.outcome, LoginProbe::kNoAnswer);
  EXPECT_FALSE(none.error.empty());
}

// What the agent needs from the probe still works from the child: sshd's acceptance of a key
// (C05, C07's relay check), its refusal of another, and the host key it presented (which the
// agent compares with the key read from the container).
TEST_F(ProbeProcessTest, Finding9_TheConfinedProbeProvesALoginAndSeesTheHostKey) {
  if (::geteuid() != 0) GTEST_SKIP() << "the test sshd logs in as the test's user: needs root";
  const gpuwerk::testing::GeneratedKey alice = gpuwerk::testing::GenerateKey(dir_, "alice");
  const gpuwerk::testing::GeneratedKey bob = gpuwerk::testing::GenerateKey(dir_, "bob");
  gpuwerk::testing::Sshd sshd(dir_ / "sshd", alice.public_line + "\n");
  LoginProbeAnswer answer;
  for (int i = 0; i < 50; ++i) {
    answer =
        ProbeLoginConfined(HelperProbe(), "127.0.0.1", sshd.port(), "root", alice.public_line, 2s);
    if (answer.outcome != LoginProbe::kNoAnswer) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(answer.outcome, LoginProbe::kAccepted) << answer.error;
  EXPECT_TRUE(answer.server_host_key.starts_with("ssh-")) << answer.server_host_key;
  const std::string presented = answer.server_host_key;
  answer = ProbeLoginConfined(HelperProbe(), "127.0.0.1", sshd.port(), "root", bob.public_line, 2s);
  EXPECT_EQ(answer.outcome, LoginProbe::kRefused) << answer.error;
  EXPECT_EQ(answer.server_host_key, presented);
  answer = ProbeLoginConfined(HelperProbe(), "127.0.0.1", sshd.port(), "root", "not a key", 2s);
  EXPECT_EQ(answer.outcome, LoginProbe::kUnsupported) << answer.error;
}

}  // namespace
}  // namespace gpuwerk::agent
