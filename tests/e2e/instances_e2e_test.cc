// Issue 3, "Must show": instances end to end with real processes. Each test starts the real
// `gpuwerk server` and `gpuwerk agent` binaries as child processes (so they can be `kill -9`ed),
// against one real podman API service (scripts/engine.sh) and the real instance image
// (scripts/instance-image/build.sh) shared by the suite, with keys made by `ssh-keygen` and the
// stock `ssh` client. What a test asserts about containers it reads from the engine itself
// (EngineProbe), not from the product. Cases C05, C11, C12, C14 of shared/cases/README.md;
// rules R-5, R-6, R-17, R-19 of shared/DESIGN.md. Needs root (rootful podman).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/strings.h"
#include "tests/support/child_process.h"
#include "tests/support/e2e_engine.h"
#include "tests/support/e2e_platform.h"
#include "tests/support/e2e_relay.h"
#include "tests/support/engine_probe.h"
#include "tests/support/engine_stand_in.h"
#include "tests/support/eventually.h"
#include "tests/support/host_waits.h"
#include "tests/support/http_client.h"
#include "tests/support/matchers.h"
#include "tests/support/net.h"
#include "tests/support/run_command.h"
#include "tests/support/sign_up.h"
#include "tests/support/ssh_keygen.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::testing {
namespace {

const auto* const kEngine = RegisterEngineEnvironment("gpuwerk-e2e-engine");

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

/// `ssh -p PORT USER@ADDRESS` as the API shows it, split up.
struct SshTarget {
  std::string user;
  std::string address;
  int port = 0;
};

std::optional<SshTarget> ParseSshCommand(const json& command) {
  if (!command.is_string()) return std::nullopt;
  std::istringstream in(command.get<std::string>());
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.size() != 4 || words[0] != "ssh" || words[1] != "-p") return std::nullopt;
  const size_t at = words[3].find('@');
  if (at == std::string::npos) return std::nullopt;
  SshTarget t{.user = words[3].substr(0, at), .address = words[3].substr(at + 1)};
  t.port = std::atoi(words[2].c_str());
  if (t.port <= 0) return std::nullopt;
  return t;
}

class InstancesE2eTest : public E2eTest<> {
 protected:
  void TearDown() override {
    if (relay_.Running()) relay_.Stop(seconds(10));
    platform_.Stop();
    if (HasFailure()) platform_.PrintLogs();
    if (HasFailure() && relay_port_ != 0) {
      std::cerr << "---- relay log\n" << Tail(dir_.path() / "relay.log") << "\n----\n";
    }
    if (!engine_) return;
    // The engine may have been stopped by a test that failed half-way: bring it back first.
    if (!engine_->Up()) EngineEnvironment::Start();
    for (const auto& id : instances_) {
      json list = engine_->ContainersWithLabel(kInstanceLabel, id);
      if (!list.is_array()) continue;
      for (const auto& c : list) engine_->ForceRemove(c["Id"].get<std::string>());
    }
  }

  // ---- processes ---------------------------------------------------------------------------

  /// Starts `gpuwerk server` (E2ePlatform::StartServer) with hosts silent for 3 s counted
  /// unknown and `env` on top; a second call restarts it on the same port and data directory
  /// (the agent keeps its URL).
  void StartServer(const std::map<std::string, std::string>& env = {}) {
    std::map<std::string, std::string> all = {{"GPUWERK_HOST_UNKNOWN_AFTER_SECONDS", "3"}};
    for (const auto& [k, v] : env) all[k] = v;
    platform_.StartServer(all);
  }
  void RestartServer(const std::map<std::string, std::string>& env = {}) { StartServer(env); }

  /// (Re)starts the host's agent on its state directory, against `agent_engine_`.
  void StartAgent() { platform_.StartAgent(platform_.host(0), {}, agent_engine_); }

  ChildProcess& server() { return platform_.server(); }
  ChildProcess& agent() { return platform_.host(0).agent; }
  const fs::path& data() const { return platform_.data(); }
  const std::string& url() const { return platform_.url(); }
  fs::path agent_log() { return platform_.host(0).log; }

  /// Server, operator, one host, its agent; waits until the host has been heard from.
  void StartPlatform(const std::map<std::string, std::string>& env = {}) {
    StartServer(env);
    if (HasFatalFailure()) return;
    op_ = platform_.Operator();
    E2eHost& host = platform_.AddHost(*op_, "spark-e2e");
    ASSERT_FALSE(host.token.empty());
    StartAgent();
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_TRUE(WaitHostsReady(*op_, 1))
        << "the agent never synced with a working engine; agent log:\n"
        << Tail(agent_log());
  }

  void WaitAgentRounds(int rounds) {
    EXPECT_TRUE(gpuwerk::testing::WaitAgentRounds(*op_, rounds))
        << "the agent did not sync " << rounds << " more times";
  }

  /// A new person, signed in, whose address is proven through the mailed link.
  std::unique_ptr<HttpClient> SignUp(const std::string& email) { return platform_.SignUp(email); }

  /// A key made by ssh-keygen, added to `who`'s account; returns its id.
  std::string AddKey(HttpClient& who, const std::string& name, GeneratedKey* key_out) {
    GeneratedKey key = GenerateKey(dir_.path(), name);
    EXPECT_FALSE(key.public_line.empty()) << "ssh-keygen failed";
    auto r = who.PostJson("/api/v1/ssh-keys", {{"name", name}, {"public_key", key.public_line}});
    EXPECT_EQ(r.status, 201) << r.body;
    if (key_out != nullptr) *key_out = key;
    const json j = r.Json();
    return j.is_object() && j.contains("id") ? j["id"].get<std::string>() : "";
  }

  HttpResult Create(HttpClient& who, const std::string& name, const std::string& key_id,
                    const std::string& type = "spark-1x") {
    auto r = who.PostJson("/api/v1/instances",
                          {{"name", name}, {"ssh_key_id", key_id}, {"gpu_type", type}});
    const json j = r.Json();
    if (j.is_object() && j.contains("id") && j["id"].is_string()) instances_.insert(j["id"]);
    return r;
  }

  /// Polls GET /api/v1/instances/{id} until `pred` holds (≤ `limit`); the last answer.
  json WaitInstance(HttpClient& who, const std::string& id,
                    const std::function<bool(const json&)>& pred, milliseconds limit,
                    const std::string& what) {
    json last;
    const bool ok = Eventually(
        [&] {
          auto r = who.Get("/api/v1/instances/" + id);
          last = r.status == 200 ? r.Json() : json{{"http_status", r.status}, {"body", r.body}};
          return r.status == 200 && pred(last);
        },
        limit);
    EXPECT_TRUE(ok) << "instance " << id << " never became " << what << "; last: " << last.dump();
    return last;
  }

  json WaitStatus(HttpClient& who, const std::string& id, const std::string& status,
                  milliseconds limit = seconds(90)) {
    return WaitInstance(
        who, id, [&](const json& j) { return j["status"] == status; }, limit, status);
  }

  json WaitRunning(HttpClient& who, const std::string& id, milliseconds limit = seconds(90)) {
    return WaitInstance(
        who, id,
        [](const json& j) { return j["status"] == "running" && j["ssh_command"].is_string(); },
        limit, "running with an ssh_command");
  }

  /// A stock ssh client with `key`, strict about nothing but the key: runs `command`.
  CommandResult Ssh(const GeneratedKey& key, const std::string& address, int port,
                    const std::string& command) {
    return RunCommand(dir_.path(),
                      "ssh -i " + key.private_path.string() + " -p " + std::to_string(port) +
                          " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
                          " -o BatchMode=yes -o ConnectTimeout=10 -o LogLevel=ERROR root@" +
                          address + " '" + command + "'");
  }

  /// The engine's containers of an instance (by label); an array, or null when the engine is away.
  json ContainersOf(const std::string& instance_id) {
    return engine_->ContainersWithLabel(kInstanceLabel, instance_id);
  }

  /// The only container of an instance, inspected by the engine; null when not exactly one.
  json OnlyContainer(const std::string& instance_id) {
    json list = ContainersOf(instance_id);
    if (!list.is_array() || list.size() != 1) return nullptr;
    return engine_->Inspect(list[0]["Id"].get<std::string>());
  }

  /// The audit log's events about `target`, oldest first, read from the server's SQLite store
  /// (there is no audit API yet): [{action, actor_id, source_address}].
  json AuditEvents(const std::string& target) {
    json out = json::array();
    sqlite3* db = nullptr;
    if (sqlite3_open_v2((data().string() + "/gpuwerk.db").c_str(), &db, SQLITE_OPEN_READONLY,
                        nullptr) != SQLITE_OK) {
      sqlite3_close(db);
      return nullptr;
    }
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db,
                           "SELECT action, COALESCE(actor_id, ''), source_address FROM "
                           "audit_events WHERE target = ? ORDER BY at, rowid",
                           -1, &st, nullptr) == SQLITE_OK) {
      sqlite3_bind_text(st, 1, target.c_str(), -1, SQLITE_TRANSIENT);
      while (sqlite3_step(st) == SQLITE_ROW) {
        auto text = [&](int i) {
          const unsigned char* t = sqlite3_column_text(st, i);
          return t == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(t));
        };
        out.push_back({{"action", text(0)}, {"actor_id", text(1)}, {"source_address", text(2)}});
      }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
  }

  /// `gpuwerk ARGS` as a person runs it, with its own login file.
  CommandResult Cli(const std::string& args, const std::string& input = "") {
    return RunCommand(dir_.path(),
                      "env -u GPUWERK_URL -u GPUWERK_TOKEN GPUWERK_CONFIG_DIR='" +
                          (dir_.path() / "cli").string() + "' " + GpuwerkBinary() + " " + args,
                      input);
  }

  /// `gpuwerk relay` (as tests/e2e/isolation_e2e_test.cc starts it): its own relay credential
  /// registered by the operator, its key and a CA made here whose public line (`relay_ca_line_`)
  /// the agent must be given with --relay-ca. Needs StartServer and op_.
  void StartRelay() {
    StartE2eRelay(*op_, "instances-e2e", platform_.url(), dir_.path(), relay_, &relay_ca_line_,
                  &relay_port_);
  }

  /// `sh -s` with `script` on its stdin in instance `hostname`, through the relay, as `key`.
  CommandResult ThroughRelay(const GeneratedKey& key, const std::string& hostname,
                             const std::string& script) {
    return RunCommand(dir_.path(),
                      "ssh -p " + std::to_string(relay_port_) + " -i " + key.private_path.string() +
                          " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
                          " -o BatchMode=yes -o ConnectTimeout=10 -o LogLevel=ERROR " +
                          hostname + "@127.0.0.1 sh -s",
                      script);
  }

  std::string agent_engine_;  ///< the socket the agent talks to; "" for the suite's engine
  ChildProcess relay_;
  int relay_port_ = 0;
  std::string relay_ca_line_;
  std::unique_ptr<HttpClient> op_;
  std::set<std::string> instances_;  ///< every instance id this test created: cleaned up
};

// ---- 1. the whole life of an instance --------------------------------------------------------

TEST_F(InstancesE2eTest, C05_C14_LifecycleSshRestartKeepsFilesAndSessionDeleteFreesName) {
  StartPlatform();
  ASSERT_FALSE(HasFatalFailure());
  auto alice = SignUp("alice@example.test");
  GeneratedKey key;
  const std::string key_id = AddKey(*alice, "laptop", &key);

  auto created = Create(*alice, "alpha", key_id);
  ASSERT_EQ(created.status, 201) << created.body;
  const json in = created.Json();
  const std::string id = in["id"];
  const std::string hostname = in["hostname"];
  const std::string session = in["billing_session"]["id"];
  EXPECT_EQ(in["status"], "provisioning");
  EXPECT_EQ(in["name"], "alpha");

  // C05: `running` only once a login works; the shown command, used as shown, gets in.
  json shown = WaitRunning(*alice, id);
  ASSERT_EQ(shown["status"], "running");
  auto target = ParseSshCommand(shown["ssh_command"]);
  ASSERT_TRUE(target) << shown["ssh_command"];
  EXPECT_EQ(target->user, "root");
  CommandResult as_shown = Ssh(key, target->address, target->port, "hostname");
  EXPECT_EQ(as_shown.exit_code, 0) << "the ssh_command the API shows (" << shown["ssh_command"]
                                   << ") does not reach the instance: " << as_shown.err;
  EXPECT_EQ(std::string(core::TrimEnd(as_shown.out, core::kWhitespace)), hostname);

  // The agent publishes sshd on its --ssh-bind address (127.0.0.1 by default).
  const int port = target->port;
  CommandResult host = Ssh(key, "127.0.0.1", port, "hostname");
  ASSERT_EQ(host.exit_code, 0) << host.err;
  EXPECT_EQ(std::string(core::TrimEnd(host.out, core::kWhitespace)), hostname);
  // C05: modes and owner of the key file inside the container (the agent's read-only mount,
  // issue 12 finding 9).
  CommandResult modes = Ssh(key, "127.0.0.1", port,
                            "stat -c %a:%u /etc/ssh/gpuwerk /etc/ssh/gpuwerk/authorized_keys && "
                            "echo kept-across-restart > /root/marker");
  ASSERT_EQ(modes.exit_code, 0) << modes.err;
  EXPECT_EQ(modes.out, "700:0\n600:0\n");
  // Docker inside is off by default (docs/docker-inside.md): the client says so and fails;
  // /dev/shm has the host's automatic size, which the host listing reports.
  CommandResult docker_off = Ssh(
      key, "127.0.0.1", port, "docker ps; echo rc=$?; df -B1 --output=size /dev/shm | tail -n 1");
  EXPECT_NE(docker_off.err.find("docker inside: off"), std::string::npos) << docker_off.err;
  auto hosts = op_->Get("/api/v1/admin/hosts");
  ASSERT_EQ(hosts.status, 200) << hosts.body;
  const json shm = hosts.Json()["items"][0]["inventory"]["limits"]["shm_bytes"];
  ASSERT_TRUE(shm.is_number_integer()) << hosts.body;
  EXPECT_GT(shm.get<int64_t>(), int64_t{64} << 20);
  EXPECT_EQ(docker_off.out, "rc=1\n" + std::to_string(shm.get<int64_t>()) + "\n");

  // R-5: the key of a live instance cannot be deleted; the error names the instance.
  auto key_delete = alice->Delete("/api/v1/ssh-keys/" + key_id);
  EXPECT_EQ(key_delete.status, 409) << key_delete.body;
  EXPECT_THAT(key_delete, HasApiCode("key_in_use")) << key_delete.body;
  EXPECT_EQ(key_delete.Json()["instances"], json::array({"alpha"})) << key_delete.body;

  json before = OnlyContainer(id);
  ASSERT_TRUE(before.is_object()) << ContainersOf(id).dump();
  const std::string container_id = before["Id"];
  const std::string first_start = before["State"]["StartedAt"];
  EXPECT_EQ(before["Config"]["Hostname"], hostname);

  // Restart: same container, cycled; files, key and billing session kept.
  auto restarted = alice->PostJson("/api/v1/instances/" + id + "/restart", json::object());
  ASSERT_EQ(restarted.status, 202) << restarted.body;
  EXPECT_EQ(restarted.Json()["status"], "restarting");
  EXPECT_EQ(restarted.Json()["billing_session"]["id"], session);
  shown = WaitInstance(
      *alice, id,
      [](const json& j) {
        return j["status"] == "running" && j["restart_generation"] == 1 &&
               j["ssh_command"].is_string();
      },
      seconds(90), "running after the restart");
  ASSERT_EQ(shown["status"], "running");
  EXPECT_EQ(shown["billing_session"]["id"], session);
  json after = OnlyContainer(id);
  ASSERT_TRUE(after.is_object()) << ContainersOf(id).dump();
  EXPECT_EQ(after["Id"], container_id) << "a restart must keep the container";
  EXPECT_NE(after["State"]["StartedAt"], first_start) << "the container was not restarted";
  auto target2 = ParseSshCommand(shown["ssh_command"]);
  ASSERT_TRUE(target2);
  CommandResult marker = Ssh(key, "127.0.0.1", target2->port, "cat /root/marker; hostname");
  ASSERT_EQ(marker.exit_code, 0) << marker.err;
  EXPECT_EQ(marker.out, "kept-across-restart\n" + hostname + "\n");

  // Delete: 204; then the container is gone, the port closed, the name free.
  ASSERT_EQ(alice->Delete("/api/v1/instances/" + id).status, 204);
  // C14: a restart from a stale tab while (or after) it is deleted creates nothing.
  auto stale = alice->PostJson("/api/v1/instances/" + id + "/restart", json::object());
  EXPECT_TRUE(stale.status == 404 || stale.status == 409) << stale.status << " " << stale.body;
  EXPECT_TRUE(
      Eventually([&] { return alice->Get("/api/v1/instances/" + id).status == 404; }, seconds(60)))
      << alice->Get("/api/v1/instances/" + id).body;
  EXPECT_EQ(ContainersOf(id), json::array());
  EXPECT_FALSE(PortOpen("127.0.0.1", target2->port)) << "port " << target2->port << " still open";
  auto gone = alice->PostJson("/api/v1/instances/" + id + "/restart", json::object());
  EXPECT_EQ(gone.status, 404) << gone.body;
  EXPECT_THAT(gone, HasApiCode("not_found"));
  EXPECT_EQ(alice->Get("/api/v1/instances").Json()["total"], 0);

  // R-17: every action is in the audit log, by whom and from where.
  const std::string alice_id = alice->Get("/api/v1/me").Json()["id"];
  json audit = AuditEvents(id);
  // The person's actions in order; the system's (the sshd host key pinned at the first login
  // proof, the row removed when the agent reports the container gone) beside them.
  std::vector<std::string> actions;
  std::vector<std::string> system_actions;
  for (const auto& e : audit) {
    const bool by_system =
        e["action"] == "instance.deleted" || e["action"] == "instance.host_key_pinned";
    (by_system ? system_actions : actions).push_back(e["action"]);
  }
  EXPECT_EQ(actions,
            (std::vector<std::string>{"instance.create", "instance.restart", "instance.delete"}))
      << audit.dump();
  std::sort(system_actions.begin(), system_actions.end());
  EXPECT_EQ(system_actions,
            (std::vector<std::string>{"instance.deleted", "instance.host_key_pinned"}))
      << audit.dump();
  for (const auto& e : audit) {
    if (e["action"] == "instance.deleted" || e["action"] == "instance.host_key_pinned") continue;
    EXPECT_EQ(e["actor_id"], alice_id) << e.dump();
    EXPECT_EQ(e["source_address"], "127.0.0.1") << e.dump();
  }

  auto again = Create(*alice, "alpha", key_id);
  ASSERT_EQ(again.status, 201) << again.body;
  EXPECT_NE(again.Json()["id"], id);
  EXPECT_NE(again.Json()["billing_session"]["id"], session);
  // C14 again: the old instance's container never came back.
  WaitRunning(*alice, again.Json()["id"]);
  EXPECT_EQ(ContainersOf(id), json::array());
}

// ---- 2. another person's instance does not exist for them ------------------------------------

TEST_F(InstancesE2eTest, SecondPersonGets404AndTheInstanceKeepsRunning) {
  StartPlatform();
  ASSERT_FALSE(HasFatalFailure());
  auto alice = SignUp("alice@example.test");
  GeneratedKey key;
  const std::string key_id = AddKey(*alice, "laptop", &key);
  auto created = Create(*alice, "alpha", key_id);
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.Json()["id"];
  WaitRunning(*alice, id);
  json before = OnlyContainer(id);
  ASSERT_TRUE(before.is_object());

  auto bob = SignUp("bob@example.test");
  for (const std::string& ref : {id, std::string("alpha")}) {
    auto get = bob->Get("/api/v1/instances/" + ref);
    EXPECT_EQ(get.status, 404) << get.body;
    EXPECT_THAT(get, HasApiCode("not_found"));
    auto restart = bob->PostJson("/api/v1/instances/" + ref + "/restart", json::object());
    EXPECT_EQ(restart.status, 404) << restart.body;
    EXPECT_THAT(restart, HasApiCode("not_found"));
    auto del = bob->Delete("/api/v1/instances/" + ref);
    EXPECT_EQ(del.status, 404) << del.body;
    EXPECT_THAT(del, HasApiCode("not_found"));
  }
  EXPECT_EQ(bob->Get("/api/v1/instances").Json()["total"], 0);
  // Bob cannot create one with alice's key either (R-19).
  auto with_her_key = Create(*bob, "beta", key_id);
  EXPECT_EQ(with_her_key.status, 404) << with_her_key.body;

  // Still hers, still running, never restarted or removed; a few agent rounds later too.
  WaitAgentRounds(2);
  json shown = alice->Get("/api/v1/instances/" + id).Json();
  EXPECT_EQ(shown["status"], "running");
  EXPECT_EQ(shown["restart_generation"], 0);
  json after = OnlyContainer(id);
  ASSERT_TRUE(after.is_object());
  EXPECT_EQ(after["Id"], before["Id"]);
  EXPECT_EQ(after["State"]["StartedAt"], before["State"]["StartedAt"]);
  EXPECT_EQ(after["State"]["Running"], true);
}

// ---- 3. kill -9 the agent --------------------------------------------------------------------

TEST_F(InstancesE2eTest,
       C12_AgentKilledGoesUnknownThenAdoptedWithoutRestartAndStoppedByHandIsStarted) {
  StartPlatform();
  ASSERT_FALSE(HasFatalFailure());
  auto alice = SignUp("alice@example.test");
  GeneratedKey key;
  const std::string key_id = AddKey(*alice, "laptop", &key);
  auto created = Create(*alice, "alpha", key_id);
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.Json()["id"];
  WaitRunning(*alice, id);
  // A restart first, so the generation the agent applied lives in its state, not in a label.
  ASSERT_EQ(alice->PostJson("/api/v1/instances/" + id + "/restart", json::object()).status, 202);
  json shown = WaitInstance(
      *alice, id,
      [](const json& j) { return j["status"] == "running" && j["restart_generation"] == 1; },
      seconds(90), "running after the restart");
  ASSERT_EQ(shown["status"], "running");
  json before = OnlyContainer(id);
  ASSERT_TRUE(before.is_object());

  agent().Kill(SIGKILL);
  ASSERT_TRUE(agent().status().has_value());
  const auto killed_at = std::chrono::steady_clock::now();
  // host_unknown_after_seconds is 3; one-second store resolution and a round's length as slack.
  shown = WaitStatus(*alice, id, "unknown", seconds(3 + 5));
  EXPECT_EQ(shown["status"], "unknown");
  EXPECT_FALSE(shown["status_reason"].get<std::string>().empty());
  const auto took =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - killed_at);
  EXPECT_LE(took.count(), 8000) << "unknown only after " << took.count() << " ms";
  // The container itself kept running meanwhile.
  json during = OnlyContainer(id);
  ASSERT_TRUE(during.is_object());
  EXPECT_EQ(during["State"]["Running"], true);

  StartAgent();
  shown = WaitRunning(*alice, id, seconds(30));
  EXPECT_EQ(shown["status"], "running");
  // A few more rounds: the adopted container must never be restarted.
  WaitAgentRounds(2);
  EXPECT_EQ(alice->Get("/api/v1/instances/" + id).Json()["status"], "running");
  json after = OnlyContainer(id);
  ASSERT_TRUE(after.is_object());
  EXPECT_EQ(after["Id"], before["Id"]);
  EXPECT_EQ(after["State"]["StartedAt"], before["State"]["StartedAt"])
      << "the agent restarted a running container it adopted";
  auto target = ParseSshCommand(shown["ssh_command"]);
  ASSERT_TRUE(target);
  CommandResult host = Ssh(key, "127.0.0.1", target->port, "hostname");
  EXPECT_EQ(host.exit_code, 0) << host.err;

  // C12: someone stops the container by hand: the agent sees it and starts it again (same
  // container, a new start), and the instance is `running` again.
  const std::string container_id = after["Id"];
  auto stopped = engine_->Send("POST", "/v1.41/containers/" + container_id + "/stop?t=1");
  ASSERT_EQ(stopped.status, 204) << stopped.body << stopped.error;
  shown = WaitInstance(
      *alice, id,
      [&](const json& j) {
        if (j["status"] != "running") return false;
        json c = OnlyContainer(id);
        return c.is_object() && c["State"]["Running"] == true &&
               c["State"]["StartedAt"] != before["State"]["StartedAt"];
      },
      seconds(60), "running again after a stop by hand");
  json restarted = OnlyContainer(id);
  ASSERT_TRUE(restarted.is_object());
  EXPECT_EQ(restarted["Id"], container_id);
  // The stop made outside gpuwerk was visible, not only undone: the instance's drift record and
  // its status reason say so. The agent reports it in the sync of the round that saw the
  // container stopped (and started it again), which may reach the server a moment after the
  // engine shows the new start that the wait above looks at; `running` follows once sshd is
  // proven again.
  shown = WaitInstance(
      *alice, id, [](const json& j) { return j.contains("drift") && j["status"] == "running"; },
      seconds(30), "running, with the stop by hand in the instance's drift");
  EXPECT_EQ(shown["status"], "running") << shown;
  ASSERT_TRUE(shown.contains("drift")) << shown;
  EXPECT_EQ(shown["drift"]["kind"], "stopped") << shown;
  EXPECT_EQ(shown["drift"]["count"], 1) << shown;
  EXPECT_NE(shown["status_reason"].get<std::string>().find("stopped without gpuwerk stopping it"),
            std::string::npos)
      << shown["status_reason"];
}

// Changes made outside gpuwerk (docs/instances.md "Changes outside gpuwerk"): a stop and a
// forced removal of the instance's container on the host, through the engine's own API as
// `podman stop` / `podman rm -f` do, show in the instance's status reason and `drift`; the
// container made again really lost the person's files, as the reason says.
TEST_F(InstancesE2eTest, DriftStopAndRemovalOutsideGpuwerkShowInTheStatusReason) {
  StartPlatform();
  ASSERT_FALSE(HasFatalFailure());
  auto alice = SignUp("alice@example.test");
  GeneratedKey key;
  const std::string key_id = AddKey(*alice, "laptop", &key);
  auto created = Create(*alice, "alpha", key_id);
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.Json()["id"];
  json shown = WaitRunning(*alice, id);
  ASSERT_EQ(shown["status"], "running");
  EXPECT_EQ(shown["status_reason"], "");
  EXPECT_FALSE(shown.contains("drift")) << shown;
  auto target = ParseSshCommand(shown["ssh_command"]);
  ASSERT_TRUE(target);
  CommandResult wrote = Ssh(key, "127.0.0.1", target->port, "echo mine > /root/marker");
  ASSERT_EQ(wrote.exit_code, 0) << wrote.err;
  json before = OnlyContainer(id);
  ASSERT_TRUE(before.is_object());
  const std::string container_id = before["Id"];

  // `podman stop`: the agent starts it again, and the status reason says what happened.
  auto stopped = engine_->Send("POST", "/v1.41/containers/" + container_id + "/stop?t=1");
  ASSERT_EQ(stopped.status, 204) << stopped.body << stopped.error;
  shown = WaitInstance(
      *alice, id,
      [](const json& j) {
        return j["status"] == "running" && j.contains("drift") && j["drift"]["kind"] == "stopped";
      },
      seconds(60), "running again, the stop in its status reason");
  EXPECT_NE(shown["status_reason"].get<std::string>().find("stopped without gpuwerk stopping it"),
            std::string::npos)
      << shown["status_reason"];
  EXPECT_EQ(shown["drift"]["count"], 1);
  json again = OnlyContainer(id);
  ASSERT_TRUE(again.is_object());
  EXPECT_EQ(again["Id"], container_id);
  target = ParseSshCommand(shown["ssh_command"]);
  ASSERT_TRUE(target);
  CommandResult kept = Ssh(key, "127.0.0.1", target->port, "cat /root/marker");
  EXPECT_EQ(kept.exit_code, 0) << kept.err;
  EXPECT_EQ(kept.out, "mine\n");

  // `podman rm -f`: the agent creates it again from the image; the reason says the files and
  // the SSH host key are new, and they are.
  auto removed = engine_->Send("DELETE", "/v1.41/containers/" + container_id + "?force=true");
  ASSERT_TRUE(removed.status == 204 || removed.status == 200) << removed.status << removed.body;
  shown = WaitInstance(
      *alice, id,
      [](const json& j) {
        return j["status"] == "running" && j["ssh_command"].is_string() && j.contains("drift") &&
               j["drift"]["kind"] == "removed";
      },
      seconds(90), "running again, the removal in its status reason");
  const std::string reason = shown["status_reason"];
  EXPECT_NE(reason.find("removed outside gpuwerk"), std::string::npos) << reason;
  EXPECT_NE(reason.find("files written since launch are gone"), std::string::npos) << reason;
  EXPECT_NE(reason.find("SSH host key is new"), std::string::npos) << reason;
  EXPECT_EQ(shown["drift"]["count"], 2);
  json made = OnlyContainer(id);
  ASSERT_TRUE(made.is_object());
  EXPECT_NE(made["Id"], container_id);
  target = ParseSshCommand(shown["ssh_command"]);
  ASSERT_TRUE(target);
  CommandResult gone = Ssh(key, "127.0.0.1", target->port, "test -e /root/marker");
  EXPECT_EQ(gone.exit_code, 1) << gone.err;
}

// ---- 4. kill -9 the server between "instance row written" and "container created" ------------

TEST_F(InstancesE2eTest, ServerKilledAfterInstanceRowWrittenLeavesOneContainerOrAFailure) {
  StartPlatform({{"GPUWERK_FAULT_POINTS", "instance_row_written"}});
  ASSERT_FALSE(HasFatalFailure());
  auto alice = SignUp("alice@example.test");
  GeneratedKey key;
  const std::string key_id = AddKey(*alice, "laptop", &key);

  auto created = Create(*alice, "alpha", key_id);
  EXPECT_EQ(created.status, -1) << "the create should have lost its connection: " << created.body;
  auto ended = server().Wait(seconds(10));
  ASSERT_TRUE(ended.has_value()) << "the server did not die at the fault point";
  EXPECT_TRUE(WIFSIGNALED(*ended) && WTERMSIG(*ended) == SIGKILL) << "wait status " << *ended;

  RestartServer();  // no fault point this time
  ASSERT_FALSE(HasFatalFailure());
  // The row was committed before the crash: exactly one instance, whatever the client saw.
  auto list = alice->Get("/api/v1/instances");
  ASSERT_EQ(list.status, 200) << list.body;
  ASSERT_EQ(list.Json()["total"], 1) << list.body;
  const std::string id = list.Json()["items"][0]["id"];
  instances_.insert(id);

  json shown = WaitInstance(
      *alice, id,
      [](const json& j) {
        return (j["status"] == "running" && j["ssh_command"].is_string()) ||
               j["status"] == "failed";
      },
      seconds(90), "running or failed");
  if (shown["status"] == "failed") {
    EXPECT_FALSE(shown["status_reason"].get<std::string>().empty());
    EXPECT_TRUE(Eventually([&] { return ContainersOf(id) == json::array(); }, seconds(10)));
  } else {
    ASSERT_EQ(shown["status"], "running");
    // Exactly one container, and it stays one over the next agent rounds.
    EXPECT_EQ(ContainersOf(id).size(), 1u) << ContainersOf(id).dump();
    WaitAgentRounds(2);
    EXPECT_EQ(ContainersOf(id).size(), 1u) << ContainersOf(id).dump();
    auto target = ParseSshCommand(shown["ssh_command"]);
    ASSERT_TRUE(target);
    CommandResult host = Ssh(key, "127.0.0.1", target->port, "hostname");
    EXPECT_EQ(host.exit_code, 0) << host.err;
    EXPECT_EQ(std::string(core::TrimEnd(host.out, core::kWhitespace)), shown["hostname"]);
  }
  // The name is alpha's: a retried create is refused, not a second instance (and container).
  auto retried = Create(*alice, "alpha", key_id);
  EXPECT_EQ(retried.status, 409) << retried.body;
  EXPECT_EQ(alice->Get("/api/v1/instances").Json()["total"], 1);
}

// ---- 5. the engine socket goes away and comes back -------------------------------------------

TEST_F(InstancesE2eTest, C11_EngineGoneIsReportedNeverStaleRunningAndTheAgentRecovers) {
  StartPlatform();
  ASSERT_FALSE(HasFatalFailure());
  auto alice = SignUp("alice@example.test");
  GeneratedKey key;
  const std::string key_id = AddKey(*alice, "laptop", &key);
  auto created = Create(*alice, "alpha", key_id);
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.Json()["id"];
  WaitRunning(*alice, id);
  json before = OnlyContainer(id);
  ASSERT_TRUE(before.is_object());
  const pid_t agent_pid = agent().pid();

  CommandResult stopped = EngineEnvironment::Stop();
  ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
  json host;
  EXPECT_TRUE(Eventually(
      [&] {
        auto hosts = op_->Get("/api/v1/admin/hosts").Json();
        if (!hosts.is_object() || hosts["items"].size() != 1) return false;
        host = hosts["items"][0];
        return host["engine_error"].is_string() && !host["engine_error"].get<std::string>().empty();
      },
      seconds(20)))
      << "the API never said the engine is gone; host: " << host.dump();
  // Never a stale `running` (C11).
  json shown = WaitInstance(
      *alice, id, [](const json& j) { return j["status"] != "running"; }, seconds(20),
      "anything but running");
  EXPECT_EQ(shown["status"], "unknown");
  EXPECT_NE(shown["status_reason"].get<std::string>().find("engine"), std::string::npos)
      << shown.dump();
  EXPECT_TRUE(agent().Running()) << "the agent died with its engine";

  CommandResult again = EngineEnvironment::Start();
  ASSERT_EQ(again.exit_code, 0) << again.err;
  shown = WaitRunning(*alice, id, seconds(30));
  EXPECT_EQ(shown["status"], "running");
  EXPECT_TRUE(Eventually(
      [&] {
        auto hosts = op_->Get("/api/v1/admin/hosts").Json();
        return hosts.is_object() && hosts["items"].size() == 1 &&
               hosts["items"][0]["engine_error"] == "";
      },
      seconds(20)));
  EXPECT_TRUE(agent().Running());
  EXPECT_EQ(agent().pid(), agent_pid);
  json after = OnlyContainer(id);
  ASSERT_TRUE(after.is_object());
  EXPECT_EQ(after["Id"], before["Id"]);
  EXPECT_EQ(after["State"]["StartedAt"], before["State"]["StartedAt"]);
}

// ---- 5b. a host whose engine is gone is not offered to new instances (C13) -------------------

TEST_F(InstancesE2eTest, C13_HostWhoseEngineIsGoneTakesNoNewInstance) {
  StartPlatform();
  ASSERT_FALSE(HasFatalFailure());
  auto alice = SignUp("alice@example.test");
  const std::string key_id = AddKey(*alice, "laptop", nullptr);
  CommandResult stopped = EngineEnvironment::Stop();
  ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
  ASSERT_TRUE(Eventually(
      [&] {
        auto hosts = op_->Get("/api/v1/admin/hosts").Json();
        return hosts.is_object() && hosts["items"].size() == 1 &&
               hosts["items"][0]["engine_error"].is_string() &&
               !hosts["items"][0]["engine_error"].get<std::string>().empty();
      },
      seconds(20)));
  // The host is heard from but cannot run a container: no capacity to offer, none taken.
  auto types = alice->Get("/api/v1/gpu-types").Json();
  EXPECT_EQ(types["items"][0]["free_capacity"], 0) << types.dump();
  // spark-1x is not online then: the create enters the queue (issue 5).
  auto created = Create(*alice, "alpha", key_id);
  EXPECT_EQ(created.status, 202) << created.body;
  EXPECT_EQ(created.Json()["queued"], true) << created.body;

  // The engine back: the host is offered again and takes an instance (or runs the one it got).
  CommandResult again = EngineEnvironment::Start();
  ASSERT_EQ(again.exit_code, 0) << again.err;
  ASSERT_TRUE(Eventually(
      [&] {
        auto hosts = op_->Get("/api/v1/admin/hosts").Json();
        return hosts.is_object() && hosts["items"].size() == 1 &&
               hosts["items"][0]["engine_error"] == "";
      },
      seconds(20)));
  // The queue launches alpha once the host is usable again.
  std::string id;
  ASSERT_TRUE(Eventually(
      [&] {
        auto items = alice->Get("/api/v1/instances").Json()["items"];
        if (!items.is_array() || items.size() != 1) return false;
        id = items[0]["id"];
        instances_.insert(id);  // launched from the queue: TearDown removes its container too
        return true;
      },
      seconds(20)));
  EXPECT_EQ(WaitRunning(*alice, id)["status"], "running");
}

// ---- 5c. a busy engine fails one step of a create once ---------------------------------------

TEST_F(InstancesE2eTest, C11_OneEngineErrorDuringCreateIsRetriedNotAFailureForGood) {
  // The agent talks to a stand-in socket that forwards to the real engine, except that the first
  // start of a container (POST …/start) gets a 500, as a busy daemon answers now and then. (It was
  // the authorized_keys upload, PUT …/archive, until the keys became the agent's read-only mount,
  // issue 12 finding 9: a create sends no archive any more.)
  std::atomic<bool> failed_once{false};
  EngineStandIn stand_in((dir_.path() / "stand-in.sock").string(), EngineEnvironment::socket(),
                         [&](const std::string& method, const std::string& target) -> std::string {
                           if (method == "POST" && target.find("/start") != std::string::npos &&
                               !failed_once.exchange(true)) {
                             return EngineStandIn::Answer(
                                 500, "Internal Server Error",
                                 "io: read/write on closed pipe (a busy daemon)");
                           }
                           return "";
                         });
  ASSERT_TRUE(stand_in.ok());
  agent_engine_ = (dir_.path() / "stand-in.sock").string();
  StartPlatform();
  ASSERT_FALSE(HasFatalFailure());
  auto alice = SignUp("alice@example.test");
  GeneratedKey key;
  const std::string key_id = AddKey(*alice, "laptop", &key);
  auto created = Create(*alice, "alpha", key_id);
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.Json()["id"];

  json shown = WaitInstance(
      *alice, id,
      [](const json& j) {
        return (j["status"] == "running" && j["ssh_command"].is_string()) ||
               j["status"] == "failed";
      },
      seconds(90), "running (or failed)");
  EXPECT_EQ(stand_in.faults(), 1);
  EXPECT_EQ(shown["status"], "running")
      << "one transient engine error made the instance fail for good: " << shown.dump();
  // Whatever happened, nothing is left half-made: one container when running, none when failed.
  EXPECT_EQ(ContainersOf(id).size(), shown["status"] == "running" ? 1u : 0u)
      << ContainersOf(id).dump();
}

// ---- 5d. a create whose answer is lost, on an engine whose execs cannot write ---------------

// What C13 ran into after the podman service came back (in a fresh root): the engine made the
// container but the agent never got the create's answer, so the container went through none of
// the rest of the create. Here the stand-in loses the first create's answer and refuses every
// exec (the agent sends none: issue 12 finding 9): the agent must still have the person's key in
// place before the start, and the stock ssh client must log in with it.
TEST_F(InstancesE2eTest, C13_ACreateWhoseAnswerIsLostStillGetsThePersonsKeyBeforeItsStart) {
  std::atomic<bool> lost_once{false};
  EngineStandIn stand_in((dir_.path() / "stand-in.sock").string(), EngineEnvironment::socket(),
                         [&](const std::string& method, const std::string& target) -> std::string {
                           if (method == "POST" &&
                               target.find("/containers/create") != std::string::npos &&
                               !lost_once.exchange(true)) {
                             return EngineStandIn::AfterForwarding(EngineStandIn::Answer(
                                 500, "Internal Server Error", "the answer got lost"));
                           }
                           if (method == "POST" && target.find("/exec") != std::string::npos) {
                             return EngineStandIn::Answer(500, "Internal Server Error",
                                                          "execs do not reach this container");
                           }
                           return "";
                         });
  ASSERT_TRUE(stand_in.ok());
  agent_engine_ = (dir_.path() / "stand-in.sock").string();
  StartPlatform();
  ASSERT_FALSE(HasFatalFailure());
  auto alice = SignUp("alice@example.test");
  GeneratedKey key;
  const std::string key_id = AddKey(*alice, "laptop", &key);
  auto created = Create(*alice, "alpha", key_id);
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.Json()["id"];

  json shown = WaitRunning(*alice, id);
  ASSERT_TRUE(lost_once.load());
  ASSERT_EQ(shown["status"], "running") << shown.dump();
  EXPECT_EQ(ContainersOf(id).size(), 1u) << ContainersOf(id).dump();
  auto target = ParseSshCommand(shown["ssh_command"]);
  ASSERT_TRUE(target) << shown["ssh_command"];
  CommandResult ssh = Ssh(key, target->address, target->port, "hostname");
  EXPECT_EQ(ssh.exit_code, 0) << ssh.err;
  EXPECT_EQ(std::string(core::TrimEnd(ssh.out, core::kWhitespace)), shown["hostname"]);
}

// ---- 6. bad input, and an image that does not exist ------------------------------------------

TEST_F(InstancesE2eTest, BadInputAndMissingImageCreateNothingAndSayWhy) {
  const std::string missing = "localhost/no-such-image:1";
  StartPlatform({{"GPUWERK_INSTANCE_IMAGE", missing}});
  ASSERT_FALSE(HasFatalFailure());
  auto alice = SignUp("alice@example.test");
  GeneratedKey key;
  const std::string key_id = AddKey(*alice, "laptop", &key);
  auto bob = SignUp("bob@example.test");
  const std::string bobs_key = AddKey(*bob, "bobs", nullptr);

  auto expect_problem = [](const HttpResult& r, long status, const std::string& code) {
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_EQ(r.Header("content-type"), "application/problem+json") << r.body;
    EXPECT_THAT(r, HasApiCode(code)) << r.body;
    const json j = r.Json();
    EXPECT_TRUE(j.is_object() && j.contains("detail") && j["detail"].is_string() &&
                !j["detail"].get<std::string>().empty())
        << r.body;
  };
  expect_problem(Create(*alice, "Not_A_Label", key_id), 400, "invalid_name");
  expect_problem(Create(*alice, "-alpha", key_id), 400, "invalid_name");
  expect_problem(Create(*alice, std::string(64, 'a'), key_id), 400, "invalid_name");
  expect_problem(Create(*alice, "alpha", bobs_key), 404, "not_found");
  expect_problem(Create(*alice, "alpha", key_id, "spark-9x"), 400, "unknown_gpu_type");
  EXPECT_EQ(alice->Get("/api/v1/instances").Json()["total"], 0);
  EXPECT_EQ(bob->Get("/api/v1/instances").Json()["total"], 0);
  // Nothing placed; after some agent rounds nothing exists on the engine for it either.
  WaitAgentRounds(2);
  auto hosts = op_->Get("/api/v1/admin/hosts").Json();
  ASSERT_EQ(hosts["items"].size(), 1u);
  EXPECT_TRUE(hosts["items"][0]["instance_id"].is_null()) << hosts.dump();
  EXPECT_EQ(ReadFile(agent_log()).find("created and started"), std::string::npos);

  // An image the engine does not have: the instance fails with a reason naming the image.
  auto created = Create(*alice, "alpha", key_id);
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.Json()["id"];
  json shown = WaitStatus(*alice, id, "failed", seconds(60));
  ASSERT_EQ(shown["status"], "failed");
  EXPECT_NE(shown["status_reason"].get<std::string>().find("no-such-image"), std::string::npos)
      << shown.dump();
  EXPECT_TRUE(shown["ssh_command"].is_null());
  // Its placement is freed, and no container is left behind (after more rounds too).
  WaitAgentRounds(2);
  EXPECT_EQ(ContainersOf(id), json::array());
  hosts = op_->Get("/api/v1/admin/hosts").Json();
  EXPECT_TRUE(hosts["items"][0]["instance_id"].is_null()) << hosts.dump();
  auto types = alice->Get("/api/v1/gpu-types").Json();
  ASSERT_TRUE(types.is_object()) << types.dump();
  EXPECT_EQ(types["items"][0]["free_capacity"], 1) << types.dump();
  // A failed instance cannot be restarted; it can be deleted, which frees its name.
  auto restart = alice->PostJson("/api/v1/instances/" + id + "/restart", json::object());
  EXPECT_EQ(restart.status, 409) << restart.body;
  EXPECT_THAT(restart, HasApiCode("instance_failed"));
  EXPECT_EQ(alice->Delete("/api/v1/instances/" + id).status, 204);
  EXPECT_TRUE(
      Eventually([&] { return alice->Get("/api/v1/instances/" + id).status == 404; }, seconds(20)));
  std::vector<std::string> actions;
  for (const auto& e : AuditEvents(id)) actions.push_back(e["action"]);
  EXPECT_EQ(actions, (std::vector<std::string>{"instance.create", "instance.fail",
                                               "instance.delete", "instance.deleted"}));

  // The freed host takes the next instance once the server has a real image.
  StopCleanly(server(), "gpuwerk server");
  RestartServer({{"GPUWERK_INSTANCE_IMAGE", kInstanceImage}});
  ASSERT_FALSE(HasFatalFailure());
  auto next = Create(*alice, "alpha", key_id);
  ASSERT_EQ(next.status, 201) << next.body;
  shown = WaitRunning(*alice, next.Json()["id"]);
  EXPECT_EQ(shown["status"], "running");
}

// ---- 7. the CLI's instance verbs against the running platform --------------------------------

TEST_F(InstancesE2eTest, CliInstanceVerbsAndSsh) {
  StartPlatform();
  ASSERT_FALSE(HasFatalFailure());
  SignUp("alice@example.test");
  GeneratedKey key = GenerateKey(dir_.path(), "laptop");
  ASSERT_FALSE(key.public_line.empty());

  auto login = Cli("login --url " + url() + " --email alice@example.test --password-stdin",
                   std::string(kPassword) + "\n");
  ASSERT_EQ(login.exit_code, 0) << login.err;
  auto added = Cli("keys add laptop " + key.private_path.string() + ".pub");
  ASSERT_EQ(added.exit_code, 0) << added.err;

  auto empty = Cli("instances ls");
  EXPECT_EQ(empty.exit_code, 0) << empty.err;
  EXPECT_NE(empty.out.find("No instances"), std::string::npos) << empty.out;
  auto no_key = Cli("instances create web --key nosuchkey");
  EXPECT_EQ(no_key.exit_code, 1);
  EXPECT_NE(no_key.err.find("(not_found)"), std::string::npos) << no_key.err;
  auto bad_name = Cli("instances create Web_1 --key laptop");
  EXPECT_EQ(bad_name.exit_code, 1);
  EXPECT_NE(bad_name.err.find("(invalid_name)"), std::string::npos) << bad_name.err;

  auto create = Cli("instances create web --key laptop --json");
  ASSERT_EQ(create.exit_code, 0) << create.err;
  const json in = json::parse(create.out, nullptr, false);
  ASSERT_TRUE(in.is_object()) << create.out;
  const std::string id = in["id"];
  instances_.insert(id);
  const std::string hostname = in["hostname"];
  EXPECT_EQ(in["name"], "web");
  EXPECT_EQ(in["ssh_key"]["name"], "laptop");

  // One host, one instance (spark-1x): a second is refused with no_capacity.
  auto second = Cli("instances create web2 --key laptop");
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("(no_capacity)"), std::string::npos) << second.err;

  json shown;
  ASSERT_TRUE(Eventually(
      [&] {
        auto r = Cli("instances show web --json");
        shown = json::parse(r.out, nullptr, false);
        return r.exit_code == 0 && shown.is_object() && shown["status"] == "running";
      },
      seconds(90)))
      << shown.dump();
  auto show = Cli("instances show web");
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("status:      running"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("hostname:    " + hostname), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("ssh:         ssh -p "), std::string::npos) << show.out;
  auto ls = Cli("instances ls");
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find("web"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("running"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find(hostname), std::string::npos) << ls.out;
  auto ls_json = Cli("instances ls --json");
  ASSERT_EQ(ls_json.exit_code, 0) << ls_json.err;
  json items = json::parse(ls_json.out, nullptr, false);
  ASSERT_TRUE(items.is_array()) << ls_json.out;
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0]["id"], id);

  // `gpuwerk ssh NAME -- ARGS` runs the system ssh with the instance's address and port; the
  // identity and client options are the person's, passed after `--`.
  const std::string ssh_opts = "-i " + key.private_path.string() +
                               " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
                               " -o BatchMode=yes -o ConnectTimeout=10 -o LogLevel=ERROR";
  auto ssh = Cli("ssh web -- " + ssh_opts + " hostname");
  EXPECT_EQ(ssh.exit_code, 0) << ssh.err;
  EXPECT_EQ(std::string(core::TrimEnd(ssh.out, core::kWhitespace)), hostname);
  auto ssh_nobody = Cli("ssh nosuch -- hostname");
  EXPECT_EQ(ssh_nobody.exit_code, 1);
  EXPECT_NE(ssh_nobody.err.find("(not_found)"), std::string::npos) << ssh_nobody.err;

  auto restart = Cli("instances restart web");
  ASSERT_EQ(restart.exit_code, 0) << restart.err;
  EXPECT_EQ(restart.out, "Restarting web.\n");
  ASSERT_TRUE(Eventually(
      [&] {
        auto r = Cli("instances show web --json");
        shown = json::parse(r.out, nullptr, false);
        return r.exit_code == 0 && shown.is_object() && shown["status"] == "running" &&
               shown["restart_generation"] == 1;
      },
      seconds(90)))
      << shown.dump();
  EXPECT_EQ(shown["billing_session"]["id"], in["billing_session"]["id"]);

  auto rm = Cli("instances rm web");
  ASSERT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_NE(rm.out.find("Deleting web"), std::string::npos) << rm.out;
  EXPECT_TRUE(Eventually(
      [&] {
        auto r = Cli("instances ls --json");
        return r.exit_code == 0 && json::parse(r.out, nullptr, false) == json::array();
      },
      seconds(60)));
  auto show_gone = Cli("instances show web");
  EXPECT_EQ(show_gone.exit_code, 1);
  EXPECT_NE(show_gone.err.find("(not_found)"), std::string::npos) << show_gone.err;
  EXPECT_EQ(ContainersOf(id), json::array());
}

// ---- Docker inside and the runtime settings ---------------------------------------------------

// In `privileged` mode, through the relay: the instance's own Docker daemon builds a Dockerfile
// FROM an image made inside (nothing can be pulled here) and runs the result; /dev/shm's size and
// memlock (the shell's and a login shell's) are what the agent was told. The host listing says
// the host is privileged (docs/docker-inside.md).
TEST_F(InstancesE2eTest, DockerInsidePrivilegedBuildsAndRunsAndShmAndMemlockAreAsConfigured) {
  StartServer();
  ASSERT_FALSE(HasFatalFailure());
  op_ = platform_.Operator();
  StartRelay();
  ASSERT_FALSE(HasFatalFailure());
  E2eHost& host = platform_.AddHost(*op_, "spark-dind");
  ASSERT_FALSE(host.token.empty());
  constexpr int64_t kShm = int64_t{1} << 30;
  platform_.StartAgent(host, {"--relay-ca", relay_ca_line_, "--docker-inside", "privileged",
                              "--instance-shm-bytes", std::to_string(kShm)});
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(WaitHostsReady(*op_, 1)) << Tail(agent_log());
  auto hosts = op_->Get("/api/v1/admin/hosts");
  ASSERT_EQ(hosts.status, 200) << hosts.body;
  const json limits = hosts.Json()["items"][0]["inventory"]["limits"];
  EXPECT_EQ(limits["docker_inside"], "privileged") << limits.dump();
  EXPECT_EQ(limits["shm_bytes"], kShm) << limits.dump();
  EXPECT_NE(limits["not_enforced"].dump().find("root on the host"), std::string::npos)
      << limits.dump();

  auto dana = SignUp("dana@example.test");
  GeneratedKey key;
  const std::string key_id = AddKey(*dana, "laptop", &key);
  auto created = Create(*dana, "builder", key_id);
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.Json()["id"];
  const std::string hostname = created.Json()["hostname"];
  WaitRunning(*dana, id);
  ASSERT_FALSE(HasFailure());

  // The settings, read back through the relay: /dev/shm, memlock in the exec's shell and in a
  // login shell, and memlock of the container's PID 1 (sshd) in bytes. Memlock is unlimited
  // where the host may raise limits; on a host that may not (this build VM: no
  // CAP_SYS_RESOURCE) the inventory says so and sessions get sshd's own limit.
  CommandResult settings = ThroughRelay(key, hostname,
                                        "df -B1 --output=size /dev/shm | tail -n 1 | tr -d ' '\n"
                                        "ulimit -l\n"
                                        "bash -lc 'ulimit -l'\n"
                                        "awk '/^Max locked memory/ {print $4}' /proc/1/limits\n"
                                        "cat /run/gpuwerk/docker-inside\n");
  ASSERT_EQ(settings.exit_code, 0) << settings.err;
  std::vector<std::string> lines;
  std::istringstream in(settings.out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 5u) << settings.out;
  EXPECT_EQ(lines[0], std::to_string(kShm));
  const bool raised = limits["not_enforced"].dump().find("memlock") == std::string::npos;
  const std::string memlock = raised ? "unlimited"
                              : lines[3] == "unlimited"
                                  ? "unlimited"
                                  : std::to_string(std::atoll(lines[3].c_str()) / 1024);
  if (raised) {
    EXPECT_EQ(lines[3], "unlimited");
  }
  EXPECT_EQ(lines[1], memlock) << settings.out;
  EXPECT_EQ(lines[2], memlock) << settings.out;
  EXPECT_EQ(lines[4], "privileged");

  // Docker inside: wait for the daemon the image's start script launched, make a tiny image from
  // the instance's own dash and libraries, build FROM it and run the result.
  CommandResult docker = ThroughRelay(key, hostname, R"sh(set -e
i=0
until docker info >/dev/null 2>&1; do
  i=$((i + 1))
  if [ "$i" -gt 120 ]; then echo "dockerd never answered; its log:" >&2; tail -n 40 /var/log/dockerd.log >&2; exit 3; fi
  sleep 1
done
rm -rf /tmp/tiny /tmp/ctx && mkdir -p /tmp/tiny/bin /tmp/tiny/tmp /tmp/ctx
cp /bin/dash /tmp/tiny/bin/sh
for lib in $(ldd /bin/dash | grep -o '/[^ ]*'); do
  mkdir -p "/tmp/tiny$(dirname "$lib")" && cp -L "$lib" "/tmp/tiny$lib"
done
tar -C /tmp/tiny -c . | docker import - tiny:local >/dev/null
printf 'FROM tiny:local\nRUN echo "echo built-inside" > /built\nCMD ["/bin/sh", "/built"]\n' >/tmp/ctx/Dockerfile
docker build -q -t hello:local /tmp/ctx >/dev/null
docker run --rm hello:local
)sh");
  EXPECT_EQ(docker.exit_code, 0) << docker.err;
  EXPECT_EQ(docker.out, "built-inside\n") << docker.err;
}

}  // namespace
}  // namespace gpuwerk::testing
