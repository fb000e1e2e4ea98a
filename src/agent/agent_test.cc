// Agent against the real container engine (a podman API service of its own, scripts/engine.sh;
// the instance image, scripts/instance-image/build.sh) and a fake control plane whose desired
// list the test controls. Needs root. Cases C05, C10, C11, C12 of docs/cases.md.
#include "agent/agent.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/authorized_keys.h"
#include "agent/docker_engine.h"
#include "cli/fake_api_server.h"
#include "core/clock.h"
#include "core/strings.h"
#include "relay/in_memory_relay_authorizer.h"
#include "relay/in_memory_relay_session_log.h"
#include "relay/relay.h"
#include "relay/relay_certificates.h"
#include "relay/ssh_key_file.h"
#include "tests/support/engine_stand_in.h"

namespace gpuwerk::agent {
namespace {

namespace fs = std::filesystem;
using cli::FakeApiServer;
using cli::FakeRequest;
using cli::FakeResponse;
using std::chrono::milliseconds;

constexpr const char* kImage = "localhost/gpuwerk-instance:bookworm";
constexpr const char* kRunLabel = "io.gpuwerk.test-run";

struct Output {
  int rc = -1;
  std::string text;
};

Output Shell(const std::string& command) {
  Output out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.text.append(buf, n);
  const int status = ::pclose(pipe);
  out.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::string SourceDir() { return GPUWERK_TEST_SOURCE_DIR; }

/// The fake control plane: answers every sync with `desired`, keeps the last request and every
/// drift entry any request carried (each is sent once).
class ControlPlane {
 public:
  ControlPlane()
      : server_([this](const FakeRequest& r) {
          std::lock_guard lock(mu_);
          last_ = r.Json();
          if (last_.contains("drift")) {
            for (const auto& d : last_["drift"]) drift_.push_back(d);
          }
          ++syncs_;
          return FakeResponse::Json(
              200, {{"host_id", "hst_test"}, {"sync_interval_seconds", 1}, {"desired", desired_}});
        }) {}
  std::string url() const { return server_.url(); }
  void SetDesired(nlohmann::json d) {
    std::lock_guard lock(mu_);
    desired_ = std::move(d);
  }
  nlohmann::json Last() {
    std::lock_guard lock(mu_);
    return last_;
  }
  int syncs() {
    std::lock_guard lock(mu_);
    return syncs_;
  }
  /// The drift entries received so far, in order.
  std::vector<nlohmann::json> Drift() {
    std::lock_guard lock(mu_);
    return drift_;
  }

 private:
  std::mutex mu_;
  nlohmann::json desired_ = nlohmann::json::array();
  nlohmann::json last_;
  std::vector<nlohmann::json> drift_;
  int syncs_ = 0;
  FakeApiServer server_;
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the podman API service and containers need root";
    std::string tmpl = (fs::temp_directory_path() / "gpuwerk-agent-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    socket_ = (dir_ / "podman.sock").string();
    run_id_ = "gwa" + std::to_string(::getpid()) + "x" +
              std::to_string(std::chrono::duration_cast<milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count() %
                             1'000'000'000);
    ::setenv("CONTAINERS_CONF", (SourceDir() + "/config/containers.conf").c_str(), 1);
    Output started = Shell(SourceDir() + "/scripts/engine.sh start " + dir_.string());
    ASSERT_EQ(started.rc, 0) << started.text;
    engine_started_ = true;
    Output built = Shell(SourceDir() + "/scripts/instance-image/build.sh " + kImage);
    ASSERT_EQ(built.rc, 0) << built.text;
    engine_ = std::make_unique<DockerEngine>(
        DockerEngine::Options{.socket_path = socket_, .timeout = std::chrono::seconds(30)});
    Output key = Shell("ssh-keygen -q -t ed25519 -N '' -C gpuwerk-test -f " +
                       (dir_ / "id_ed25519").string());
    ASSERT_EQ(key.rc, 0) << key.text;
    std::ifstream in(dir_ / "id_ed25519.pub");
    std::getline(in, public_key_);
  }

  void TearDown() override {
    StopAgent();
    if (!run_id_.empty()) {
      Shell("podman ps -a -q --filter label=" + std::string(kRunLabel) + "=" + run_id_ +
            " | xargs -r podman rm -f -t 0");
    }
    if (engine_started_) Shell(SourceDir() + "/scripts/engine.sh stop " + dir_.string());
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  void StartAgent() {
    AgentOptions options;
    options.state_dir = dir_ / "state";
    options.sync_interval = std::chrono::seconds(1);
    options.engine_timeout = std::chrono::seconds(30);
    options.restart_stop_timeout_seconds = 1;
    options.extra_labels = {{kRunLabel, run_id_}};
    options.relay_authorized_keys = relay_lines_;
    options.relay_certificate_authorities = relay_cas_;
    options.relay_probe_certificate = relay_probe_;
    options.relay_check_interval = std::chrono::seconds(1);
    options.login_probe.command = {GPUWERK_LOGIN_PROBE_PROGRAM};
    // The host's limits (agent options instance_*): the desired entry's 256 MiB is lower and
    // wins for memory.
    auto limits =
        ResolveInstanceLimits({.memory_bytes = 512 << 20, .cpus = "0.5", .pids_limit = 321}, 0, 0);
    ASSERT_TRUE(limits) << limits.error().message;
    options.instance_limits = *limits;
    client_ = std::make_unique<AgentClient>(plane_.url(), "gwh_test", std::chrono::seconds(5));
    ContainerEngine& engine = agent_engine_ != nullptr ? *agent_engine_ : *engine_;
    agent_ = std::make_unique<Agent>(options, engine, *client_, DiscoverInventory());
    thread_ = std::thread([this] { agent_->Run(); });
  }

  /// Like `kill -9` as far as the engine is concerned: the agent stops, its state stays.
  void StopAgent() {
    if (!agent_) return;
    agent_->Stop();
    thread_.join();
    agent_.reset();
  }

  nlohmann::json Entry(const std::string& instance, int64_t generation,
                       const std::string& image = kImage) const {
    return {{"instance_id", instance},
            {"node_index", 0},
            {"container_name", run_id_ + "-" + instance},
            {"hostname", "h-" + run_id_},
            {"image", image},
            {"memory_bytes", 256 << 20},
            {"gpu", true},
            {"authorized_keys", {public_key_}},
            {"restart_generation", generation},
            {"env", {"GPUWERK_INSTANCE=" + instance}}};
  }

  /// Waits (≤ `limit`) for a sync whose report satisfies `pred`; returns that report.
  template <class Pred>
  nlohmann::json WaitFor(Pred pred, std::chrono::seconds limit = std::chrono::seconds(90)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    nlohmann::json last;
    while (std::chrono::steady_clock::now() < deadline) {
      last = plane_.Last();
      if (!last.is_null() && pred(last)) return last;
      std::this_thread::sleep_for(milliseconds(200));
    }
    ADD_FAILURE() << "no matching report; last: " << last.dump();
    return last;
  }

  static const nlohmann::json* Container(const nlohmann::json& report, const std::string& inst) {
    for (const auto& c : report["containers"]) {
      if (c["instance_id"] == inst) return &c;
    }
    return nullptr;
  }

  Output Ssh(int port, const std::string& command) const {
    return Shell("ssh -i " + (dir_ / "id_ed25519").string() + " -p " + std::to_string(port) +
                 " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes"
                 " -o ConnectTimeout=5 -o LogLevel=ERROR root@127.0.0.1 '" +
                 command + "'");
  }

  Output Podman(const std::string& args) const {
    return Shell("podman --url unix://" + socket_ + " " + args);
  }

  fs::path dir_;
  std::string socket_;
  std::string run_id_;
  std::string public_key_;
  std::vector<std::string> relay_lines_;  ///< AgentOptions::relay_authorized_keys of StartAgent
  std::vector<std::string> relay_cas_;    ///< AgentOptions::relay_certificate_authorities
  std::string relay_probe_;               ///< AgentOptions::relay_probe_certificate
  bool engine_started_ = false;
  std::unique_ptr<DockerEngine> engine_;
  /// The engine the agent uses when not `engine_` (e.g. one behind an EngineStandIn).
  ContainerEngine* agent_engine_ = nullptr;
  ControlPlane plane_;
  std::unique_ptr<AgentClient> client_;
  std::unique_ptr<Agent> agent_;
  std::thread thread_;
};

auto RunningReady(const std::string& inst) {
  return [inst](const nlohmann::json& r) {
    for (const auto& c : r["containers"]) {
      if (c["instance_id"] == inst && c["state"] == "running" && c["ssh_ready"] == true) {
        return true;
      }
    }
    return false;
  };
}

// The desired key lines change while the container runs (a relay key added, a person's access
// removed: C09): the agent rewrites authorized_keys in place, without a restart, so the new key
// logs in and the removed one is refused.
TEST_F(AgentTest, C09_AuthorizedKeysFollowTheDesiredKeysWithoutARestart) {
  Output second =
      Shell("ssh-keygen -q -t ed25519 -N '' -C second -f " + (dir_ / "second").string());
  ASSERT_EQ(second.rc, 0) << second.text;
  std::string second_key;
  std::getline(std::ifstream(dir_ / "second.pub"), second_key);
  auto ssh_with = [&](const std::string& key, int port) {
    return Shell("ssh -i " + (dir_ / key).string() + " -p " + std::to_string(port) +
                 " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes"
                 " -o ConnectTimeout=5 -o LogLevel=ERROR root@127.0.0.1 true");
  };
  plane_.SetDesired({Entry("ins_k", 0)});
  StartAgent();
  nlohmann::json report = WaitFor(RunningReady("ins_k"));
  const auto* c = Container(report, "ins_k");
  ASSERT_NE(c, nullptr);
  const int port = (*c)["ssh_port"];
  const std::string started = (*c)["started_at"];
  EXPECT_EQ(ssh_with("id_ed25519", port).rc, 0);
  EXPECT_NE(ssh_with("second", port).rc, 0);

  nlohmann::json both = Entry("ins_k", 0);
  both["authorized_keys"] = {public_key_, second_key};
  plane_.SetDesired({both});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (ssh_with("second", port).rc != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(200));
  }
  // Written on the host into the agent's directory, which the container mounts read-only
  // (nothing runs in the container: issue 12 finding 9).
  EXPECT_EQ(ssh_with("second", port).rc, 0)
      << "authorized_keys now: " << Ssh(port, "cat /etc/ssh/gpuwerk/authorized_keys").text;
  EXPECT_EQ(ssh_with("id_ed25519", port).rc, 0);

  nlohmann::json only_second = Entry("ins_k", 0);
  only_second["authorized_keys"] = {second_key};
  plane_.SetDesired({only_second});
  while (ssh_with("id_ed25519", port).rc == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(200));
  }
  EXPECT_NE(ssh_with("id_ed25519", port).rc, 0);
  EXPECT_EQ(ssh_with("second", port).rc, 0);
  // Modes stay right (C05) and the container was never restarted.
  report = WaitFor(RunningReady("ins_k"));
  c = Container(report, "ins_k");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["started_at"], started);
  Output modes = Shell("ssh -i " + (dir_ / "second").string() + " -p " + std::to_string(port) +
                       " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o "
                       "BatchMode=yes -o LogLevel=ERROR root@127.0.0.1 "
                       "'stat -c %a /etc/ssh/gpuwerk /etc/ssh/gpuwerk/authorized_keys'");
  EXPECT_EQ(modes.text, "700\n600\n");
}

// Issue 12 finding 1 with the real engine, the instance image's sshd and a real relay: the
// agent writes into each container's file the relay CA trusted for that instance's principal
// alone (and its probe line, which the agent's check finds accepted). The relay logs in to
// instance A with A's certificate. Pointed at B's container (as a host that forwards A's port
// to B would have it), the relay's certificate for A is refused by B's sshd: the person hears
// that the relay credential is missing, the refusal is recorded for A, nothing runs in B. A
// certificate past its end is refused, and the relay key alone opens neither container.
TEST_F(AgentTest, F1_TheRelaysCertificateOpensItsOwnInstancesContainerOnly) {
  namespace relay = gpuwerk::relay;
  const auto ca = relay::LoadOrCreateEd25519Key(dir_ / "relay" / "relay_ca", "gpuwerk-relay-ca");
  ASSERT_TRUE(ca) << ca.error().message;
  const auto probe = relay::MakeProbeCertificate(ca->path);
  ASSERT_TRUE(probe) << probe.error().message;
  const auto ca_key = ParseRelayCaLine(ca->public_line);
  ASSERT_TRUE(ca_key) << ca_key.error().message;
  const auto probe_key = ParseRelayProbeCertificate(*probe);
  ASSERT_TRUE(probe_key) << probe_key.error().message;
  relay_cas_ = {*ca_key};
  relay_probe_ = *probe_key;
  plane_.SetDesired({Entry("ins_a", 0), Entry("ins_b", 0)});
  StartAgent();
  nlohmann::json report = WaitFor(
      [](const nlohmann::json& r) { return RunningReady("ins_a")(r) && RunningReady("ins_b")(r); });
  const auto* a = Container(report, "ins_a");
  const auto* b = Container(report, "ins_b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const int port_a = (*a)["ssh_port"], port_b = (*b)["ssh_port"];
  // What sshd in A reads: the person's key, the CA for ins_a alone, the probe line.
  auto line_a = RelayCaKeyLine(*ca_key, "ins_a", "");
  ASSERT_TRUE(line_a) << line_a.error().message;
  EXPECT_EQ(Ssh(port_a, "cat /etc/ssh/gpuwerk/authorized_keys").text,
            public_key_ + "\n" + *line_a + "\n" + RelayCaProbeLine(*ca_key) + "\n");
  // The agent's check (the probe certificate) finds both sshd taking the CA: no fault.
  const int syncs = plane_.syncs();
  report = WaitFor([&](const nlohmann::json&) { return plane_.syncs() >= syncs + 2; });
  for (const char* inst : {"ins_a", "ins_b"}) {
    const auto* c = Container(report, inst);
    ASSERT_NE(c, nullptr) << inst;
    EXPECT_EQ((*c)["error"], "") << report.dump();
  }

  // A relay in front, with the person's key reaching both instances.
  Output fp = Shell("ssh-keygen -l -f " + (dir_ / "id_ed25519.pub").string());
  ASSERT_EQ(fp.rc, 0) << fp.text;
  const std::string fingerprint = fp.text.substr(
      fp.text.find(' ') + 1, fp.text.find(' ', fp.text.find(' ') + 1) - fp.text.find(' ') - 1);
  auto instance = [&](const std::string& id, const std::string& hostname, int port) {
    relay::RelayInstance i;
    i.instance_id = id;
    i.name = id;
    i.hostname = hostname;
    i.person_id = "per_p";
    i.upstream_host = "127.0.0.1";
    i.upstream_port = static_cast<uint16_t>(port);
    i.key_fingerprints = {fingerprint};
    return i;
  };
  // Each container says which it is (written straight to it with the person's key).
  ASSERT_EQ(Ssh(port_a, "echo GPUWERK_INSTANCE=ins_a > /root/which").rc, 0);
  ASSERT_EQ(Ssh(port_b, "echo GPUWERK_INSTANCE=ins_b > /root/which").rc, 0);
  relay::InMemoryRelayAuthorizer authz;
  relay::InMemoryRelaySessionLog log;
  authz.Put(instance("ins_a", "a-aaaaa", port_a));
  authz.Put(instance("ins_b", "b-bbbbb", port_b));
  relay::RelayOptions options;
  options.listen_address = "127.0.0.1";
  options.listen_port = 0;
  options.host_key_path = dir_ / "relay" / "host_key";
  options.relay_key_path = dir_ / "relay" / "relay_key";
  options.relay_ca_path = ca->path;
  auto started = relay::Relay::Start(options, authz, log);
  ASSERT_TRUE(started) << started.error().message;
  std::unique_ptr<relay::Relay> front = std::move(*started);
  auto through = [&](const std::string& user) {
    return Shell("ssh -F /dev/null -i " + (dir_ / "id_ed25519").string() + " -p " +
                 std::to_string(front->port()) +
                 " -o IdentitiesOnly=yes -o IdentityAgent=none -o StrictHostKeyChecking=no"
                 " -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o ConnectTimeout=10 " +
                 user + "@127.0.0.1 cat /root/which");
  };
  Output in_a = through("a-aaaaa");
  EXPECT_EQ(in_a.rc, 0) << in_a.text;
  // (ssh's own words, e.g. "Permanently added", come with the output: 2>&1.)
  EXPECT_NE(in_a.text.find("GPUWERK_INSTANCE=ins_a\n"), std::string::npos) << in_a.text;
  EXPECT_EQ(in_a.text.find("ins_b"), std::string::npos) << in_a.text;

  // A's upstream pointed at B's container.
  authz.Put(instance("ins_a", "a-aaaaa", port_b));
  Output forged = through("a-aaaaa");
  EXPECT_EQ(forged.rc, 255) << forged.text;
  EXPECT_EQ(forged.text.find("GPUWERK_INSTANCE"), std::string::npos) << forged.text;
  EXPECT_NE(forged.text.find("relay credential is missing"), std::string::npos) << forged.text;
  auto refused = log.Refused();
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].code, "upstream_auth_failed");
  EXPECT_EQ(refused[0].instance_id, "ins_a");
  // B's own certificate still opens B.
  Output in_b = through("b-bbbbb");
  EXPECT_EQ(in_b.rc, 0) << in_b.text;
  EXPECT_NE(in_b.text.find("GPUWERK_INSTANCE=ins_b\n"), std::string::npos) << in_b.text;

  // A relay whose certificates are dated an hour back: expired at sshd, refused.
  front.reset();
  authz.Put(instance("ins_a", "a-aaaaa", port_a));
  core::FakeClock an_hour_ago(std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count() -
                              3600);
  options.certificate_clock = &an_hour_ago;
  started = relay::Relay::Start(options, authz, log);
  ASSERT_TRUE(started) << started.error().message;
  front = std::move(*started);
  Output expired = through("a-aaaaa");
  EXPECT_EQ(expired.rc, 255) << expired.text;
  EXPECT_NE(expired.text.find("relay credential is missing"), std::string::npos) << expired.text;
  refused = log.Refused();
  ASSERT_EQ(refused.size(), 2u);
  EXPECT_EQ(refused[1].code, "upstream_auth_failed");
  front.reset();

  // The relay key without a certificate, straight to A: refused.
  Output bare = Shell("ssh -F /dev/null -i " + (dir_ / "relay" / "relay_key").string() + " -p " +
                      std::to_string(port_a) +
                      " -o IdentitiesOnly=yes -o StrictHostKeyChecking=no"
                      " -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o ConnectTimeout=5"
                      " root@127.0.0.1 true");
  EXPECT_NE(bare.rc, 0) << bare.text;
  EXPECT_EQ(Ssh(port_a, "true").rc, 0);  // the person's key, as before
}

// `gpuwerk agent --relay-from`: the relay key's line carries from="PATTERNS", so sshd refuses
// the relay key from any other source address and accepts it from a matching one; changing the
// patterns rewrites the running container's file in place. The agent's own check of the relay
// key (sshd refuses the agent's address too) must not take the restricted line for a missing one.
TEST_F(AgentTest, RelayKeyFromPatternsLimitWhereTheRelayKeyLogsInFrom) {
  Output made =
      Shell("ssh-keygen -q -t ed25519 -N '' -C gpuwerk-relay -f " + (dir_ / "relay").string());
  ASSERT_EQ(made.rc, 0) << made.text;
  std::string relay_key;
  std::getline(std::ifstream(dir_ / "relay.pub"), relay_key);
  auto relay_login = [&](int port) {
    return Shell("ssh -i " + (dir_ / "relay").string() + " -p " + std::to_string(port) +
                 " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes"
                 " -o ConnectTimeout=5 -o LogLevel=ERROR root@127.0.0.1 true");
  };
  // 192.0.2.1 (TEST-NET-1) is never the address a connection to the published port comes from.
  auto nowhere = RestrictRelayKeyLine(relay_key, "192.0.2.1");
  ASSERT_TRUE(nowhere) << nowhere.error().message;
  relay_lines_ = {*nowhere};
  plane_.SetDesired({Entry("ins_r", 0)});
  StartAgent();
  nlohmann::json report = WaitFor(RunningReady("ins_r"));
  const auto* c = Container(report, "ins_r");
  ASSERT_NE(c, nullptr);
  const int port = (*c)["ssh_port"];
  const std::string started = (*c)["started_at"];

  // The source address the container's sshd sees for a connection to 127.0.0.1:PORT.
  Output seen = Ssh(port, "echo $SSH_CONNECTION");
  ASSERT_EQ(seen.rc, 0) << seen.text;
  const std::string source = seen.text.substr(0, seen.text.find(' '));
  std::cout << "[ measured ] sshd in the container sees 127.0.0.1:" << port << " connections from "
            << source << "\n";
  ASSERT_FALSE(source.empty());

  EXPECT_EQ(Ssh(port, "cat /etc/ssh/gpuwerk/authorized_keys").text,
            public_key_ + "\nfrom=\"192.0.2.1\" " + relay_key + "\n");
  Output refused = relay_login(port);
  EXPECT_NE(refused.rc, 0) << "the relay key logged in from " << source << " despite from=";
  // The person's key is untouched by the relay's restriction.
  EXPECT_EQ(Ssh(port, "true").rc, 0);
  // No false alarm: the agent's own probe is refused by from= too, but the line is there.
  const int syncs = plane_.syncs();
  report = WaitFor([&](const nlohmann::json&) { return plane_.syncs() >= syncs + 2; });
  c = Container(report, "ins_r");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["error"], "") << report.dump();
  EXPECT_EQ((*c)["ssh_ready"], true);
  // Someone in the container tries to remove the relay's line: the file is the agent's,
  // mounted read-only, so the line stays (issue 12 finding 9), and the agent's check (its own
  // copy, since from= refuses the agent too) finds it there.
  EXPECT_NE(Ssh(port, "echo \"" + public_key_ + "\" > /etc/ssh/gpuwerk/authorized_keys").rc, 0);
  const std::string with_relay = public_key_ + "\nfrom=\"192.0.2.1\" " + relay_key + "\n";
  EXPECT_EQ(Ssh(port, "cat /etc/ssh/gpuwerk/authorized_keys").text, with_relay);

  // The agent comes back with patterns that match (a list, one element matching): the running
  // container's file is rewritten without a restart, and the relay key gets in.
  StopAgent();
  auto matching = RestrictRelayKeyLine(relay_key, "192.0.2.1," + source);
  ASSERT_TRUE(matching) << matching.error().message;
  relay_lines_ = {*matching};
  StartAgent();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (relay_login(port).rc != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(200));
  }
  Output accepted = relay_login(port);
  EXPECT_EQ(accepted.rc, 0) << accepted.text
                            << "; file: " << Ssh(port, "cat /etc/ssh/gpuwerk/authorized_keys").text;
  report = WaitFor(RunningReady("ins_r"));
  c = Container(report, "ins_r");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["started_at"], started);
  EXPECT_EQ((*c)["error"], "");
}

// Issue 12 finding 9: whatever the tenant (root in the container) does to the keys, the agent
// never runs anything in the container. The agent talks to the real engine through a stand-in
// socket that records every request: the tenant replaces /root/.ssh with a symlink, tries to
// remove the relay's line, makes sshd ignore the agent's file (the relay key is refused: C07's
// fault shows) and puts it back, and the person's keys change meanwhile (C09). Not one exec (nor
// an archive upload) reaches the engine; the keys follow the desired list, the relay key logs in
// at the end.
TEST_F(AgentTest, Finding9_ATenantWhoRemovesTheRelayLineOrSymlinksSshNeverMakesTheAgentExec) {
  std::mutex mu;
  std::vector<std::string> requests;
  const std::string stand_in_socket = (dir_ / "stand-in.sock").string();
  gpuwerk::testing::EngineStandIn stand_in(
      stand_in_socket, socket_, [&](const std::string& method, const std::string& target) {
        std::lock_guard lock(mu);
        requests.push_back(method + " " + target);
        return std::string();
      });
  ASSERT_TRUE(stand_in.ok());
  DockerEngine recorded(
      DockerEngine::Options{.socket_path = stand_in_socket, .timeout = std::chrono::seconds(30)});
  agent_engine_ = &recorded;
  Output made =
      Shell("ssh-keygen -q -t ed25519 -N '' -C gpuwerk-relay -f " + (dir_ / "relay").string());
  ASSERT_EQ(made.rc, 0) << made.text;
  std::string relay_key;
  std::getline(std::ifstream(dir_ / "relay.pub"), relay_key);
  relay_lines_ = {relay_key};
  auto login_with = [&](const std::string& key, int port, const std::string& command) {
    return Shell("ssh -i " + (dir_ / key).string() + " -p " + std::to_string(port) +
                 " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes"
                 " -o ConnectTimeout=5 -o LogLevel=ERROR root@127.0.0.1 '" +
                 command + "'");
  };
  plane_.SetDesired({Entry("ins_t", 0)});
  StartAgent();
  nlohmann::json report = WaitFor(RunningReady("ins_t"));
  const auto* c = Container(report, "ins_t");
  ASSERT_NE(c, nullptr);
  const int port = (*c)["ssh_port"];
  ASSERT_EQ(login_with("relay", port, "true").rc, 0);

  // The tenant: /root/.ssh becomes a symlink, the relay's line cannot be removed.
  ASSERT_EQ(Ssh(port, "rm -rf /root/.ssh && ln -s /proc/self /root/.ssh").rc, 0);
  EXPECT_NE(Ssh(port, "sed -i /gpuwerk-relay/d /etc/ssh/gpuwerk/authorized_keys").rc, 0);
  // sshd made to read only a file of the tenant's (which has the person's key alone): the relay
  // key is refused, and the agent reports the relay credential's fault (C07).
  ASSERT_EQ(Ssh(port, "echo \"" + public_key_ +
                          "\" > /root/own_keys && sed -i \"1i AuthorizedKeysFile /root/own_keys\" "
                          "/etc/ssh/sshd_config && kill -HUP 1")
                .rc,
            0);
  report = WaitFor([](const nlohmann::json& r) {
    for (const auto& x : r["containers"]) {
      if (x["instance_id"] == "ins_t" &&
          x["error"].get<std::string>().find("relay credential") != std::string::npos) {
        return true;
      }
    }
    return false;
  });
  c = Container(report, "ins_t");
  ASSERT_NE(c, nullptr);
  EXPECT_NE((*c)["error"].get<std::string>().find("sshd refuses the relay credential"),
            std::string::npos)
      << report.dump();
  // Several relay checks later (one a second), sshd put back as it was: the fault clears.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  ASSERT_EQ(Ssh(port, "sed -i 1d /etc/ssh/sshd_config && kill -HUP 1").rc, 0);
  report = WaitFor([](const nlohmann::json& r) {
    for (const auto& x : r["containers"]) {
      if (x["instance_id"] == "ins_t" && x["error"] == "" && x["ssh_ready"] == true) return true;
    }
    return false;
  });

  // The person's keys change (C09): the second key gets in, with /root/.ssh still a symlink.
  Output second =
      Shell("ssh-keygen -q -t ed25519 -N '' -C second -f " + (dir_ / "second").string());
  ASSERT_EQ(second.rc, 0) << second.text;
  std::string second_key;
  std::getline(std::ifstream(dir_ / "second.pub"), second_key);
  nlohmann::json both = Entry("ins_t", 0);
  both["authorized_keys"] = {public_key_, second_key};
  plane_.SetDesired({both});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (login_with("second", port, "true").rc != 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(200));
  }
  EXPECT_EQ(login_with("second", port, "true").rc, 0);
  EXPECT_EQ(login_with("relay", port, "readlink /root/.ssh").text, "/proc/self\n");
  StopAgent();

  std::lock_guard lock(mu);
  ASSERT_FALSE(requests.empty());
  int creates = 0;
  for (const std::string& r : requests) {
    EXPECT_EQ(r.find("/exec"), std::string::npos) << "the agent asked the engine: " << r;
    // No upload into the container either (reading sshd's host key by archive download, GET, is
    // the engine reading a file; nothing runs in the container).
    if (!r.starts_with("GET ")) {
      EXPECT_EQ(r.find("/archive"), std::string::npos) << "the agent asked the engine: " << r;
    }
    if (r.starts_with("POST ") && r.find("/containers/create") != std::string::npos) ++creates;
  }
  EXPECT_EQ(creates, 1);
  std::cout << "[ measured ] " << requests.size()
            << " engine requests from the agent, none of them an exec\n";
}

TEST_F(AgentTest, C05_C12_LifecycleAdoptionAndRemoval) {
  plane_.SetDesired({Entry("ins_a", 0)});
  StartAgent();
  nlohmann::json report = WaitFor(RunningReady("ins_a"));
  const auto* c = Container(report, "ins_a");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(report["engine"]["ok"], true);
  const int port = (*c)["ssh_port"];
  const std::string first_start = (*c)["started_at"];
  const std::string id = (*c)["container_id"];

  // C05: a stock ssh with the person's key gets in and sees the hostname.
  Output host = Ssh(port, "hostname");
  ASSERT_EQ(host.rc, 0) << host.text;
  EXPECT_EQ(core::TrimEnd(host.text, core::kWhitespace), "h-" + run_id_);
  ASSERT_EQ(Ssh(port, "echo kept > /root/marker").rc, 0);
  // Issue 11: the limits and capabilities of the host's configuration, read back from inside,
  // and reported in the inventory.
  Output inside = Ssh(
      port,
      "grep ^CapEff: /proc/1/status; cd /sys/fs/cgroup; if [ -f memory.max ]; then cat memory.max "
      "cpu.max pids.max; else cat memory/memory.limit_in_bytes; echo $(cat cpu/cpu.cfs_quota_us "
      "cpu/cpu.cfs_period_us); cat pids/pids.max; fi");
  EXPECT_EQ(inside.text,
            "CapEff:\t00000000200404eb\n" + std::to_string(256 << 20) + "\n50000 100000\n321\n");
  const nlohmann::json& reported = report["inventory"]["limits"];
  EXPECT_EQ(reported["memory_bytes"], 512 << 20);
  EXPECT_EQ(reported["nano_cpus"], 500'000'000);
  EXPECT_EQ(reported["pids_limit"], 321);
  EXPECT_EQ(reported["capabilities"].size(), kInstanceCapabilities.size());
  EXPECT_EQ(reported["not_enforced"].size(), 1u);
  // No GPU here: no NVIDIA runtime although the entry asks for one; the labels are set.
  EXPECT_EQ(
      core::TrimEnd(
          Podman("inspect --format '{{index .Config.Labels \"gpuwerk.generation\"}}' " + id).text,
          core::kWhitespace),
      "0");

  // Restart generation raised: restarted, files kept, new start time.
  plane_.SetDesired({Entry("ins_a", 1)});
  report = WaitFor([&](const nlohmann::json& r) {
    const auto* x = Container(r, "ins_a");
    return x != nullptr && (*x)["restart_generation"] == 1 && (*x)["started_at"] != first_start &&
           RunningReady("ins_a")(r);
  });
  c = Container(report, "ins_a");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["container_id"], id);
  const std::string second_start = (*c)["started_at"];
  Output marker = Ssh((*c)["ssh_port"], "cat /root/marker");
  EXPECT_EQ(marker.text, "kept\n");

  // The agent goes away and comes back with the same state dir: adopts, does not restart.
  StopAgent();
  const int before = plane_.syncs();
  StartAgent();
  report = WaitFor([&](const nlohmann::json&) { return plane_.syncs() >= before + 3; });
  c = Container(report, "ins_a");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["started_at"], second_start);
  EXPECT_EQ((*c)["restart_generation"], 1);
  EXPECT_EQ((*c)["state"], "running");

  // C12: stopped by hand: started again, and reported.
  EXPECT_TRUE(plane_.Drift().empty());
  Output stopped = Podman("stop -t 1 " + id);
  ASSERT_EQ(stopped.rc, 0) << stopped.text;
  report = WaitFor([&](const nlohmann::json& r) {
    const auto* x = Container(r, "ins_a");
    return x != nullptr && (*x)["started_at"] != second_start && RunningReady("ins_a")(r);
  });
  EXPECT_EQ((*Container(report, "ins_a"))["container_id"], id);
  // The stop made outside gpuwerk was told to the server, once, as what it was: the drift record
  // the server turns into the instance's status reason (docs/agent-protocol.md "Drift").
  const std::vector<nlohmann::json> drift = plane_.Drift();
  ASSERT_EQ(drift.size(), 1u) << nlohmann::json(drift).dump();
  EXPECT_EQ(drift[0]["kind"], "stopped");
  EXPECT_EQ(drift[0]["instance_id"], "ins_a");
  EXPECT_EQ(drift[0]["node_index"], 0);
  EXPECT_EQ(drift[0]["container_id"], id);
  EXPECT_EQ(drift[0]["oom_killed"], false);

  // Nobody wants it any more: removed.
  plane_.SetDesired(nlohmann::json::array());
  WaitFor([](const nlohmann::json& r) { return r["containers"].empty(); });
  Output left = Podman("ps -a -q --filter label=" + std::string(kRunLabel) + "=" + run_id_);
  EXPECT_EQ(core::TrimEnd(left.text, core::kWhitespace), "");
}

TEST_F(AgentTest, MissingImageIsAFailureAndLeavesNoContainer) {
  plane_.SetDesired({Entry("ins_x", 0, "localhost/gpuwerk-no-such-image:" + run_id_)});
  StartAgent();
  nlohmann::json report = WaitFor([](const nlohmann::json& r) { return !r["failures"].empty(); });
  ASSERT_FALSE(report["failures"].empty());
  EXPECT_EQ(report["failures"][0]["instance_id"], "ins_x");
  EXPECT_EQ(report["failures"][0]["code"], "image_not_found");
  EXPECT_NE(report["failures"][0]["message"].get<std::string>().find("no-such-image"),
            std::string::npos);
  EXPECT_TRUE(report["containers"].empty());
  Output left = Podman("ps -a -q --filter label=" + std::string(kRunLabel) + "=" + run_id_);
  EXPECT_EQ(core::TrimEnd(left.text, core::kWhitespace), "");
}

TEST_F(AgentTest, EngineGoneIsReportedAndTheAgentKeepsRunning) {
  plane_.SetDesired({Entry("ins_g", 0)});
  StartAgent();
  WaitFor(RunningReady("ins_g"));
  Output stopped = Shell(SourceDir() + "/scripts/engine.sh stop " + dir_.string());
  ASSERT_EQ(stopped.rc, 0) << stopped.text;
  nlohmann::json report =
      WaitFor([](const nlohmann::json& r) { return r["engine"]["ok"] == false; });
  EXPECT_NE(report["engine"]["error"].get<std::string>().find("engine_unavailable"),
            std::string::npos);
  // The last known container is kept but unknown: never a stale running (C11).
  const auto* c = Container(report, "ins_g");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["state"], "unknown");
  EXPECT_EQ((*c)["ssh_ready"], false);
  const int before = plane_.syncs();
  WaitFor([&](const nlohmann::json&) { return plane_.syncs() >= before + 2; });
  // Back: the engine again, and the container seen again.
  Output again = Shell(SourceDir() + "/scripts/engine.sh start " + dir_.string());
  ASSERT_EQ(again.rc, 0) << again.text;
  WaitFor([](const nlohmann::json& r) { return r["engine"]["ok"] == true; });
}

}  // namespace
}  // namespace gpuwerk::agent
