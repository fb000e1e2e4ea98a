// Instances over real HTTP with a fake agent that calls /api/v1/agent/sync with a host token
// (no container engine here; the agent's own tests drive the real one). R-5, R-6, R-17, R-19.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/integration/server_fixture.h"
#include "tests/support/ssh_keygen.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

class InstancesApiTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    ASSERT_TRUE(app_->EnsureOperator("op@example.test", "operator password 1"));
    op_ = Browser();
    auto login = op_->PostJson("/api/v1/auth/login",
                               {{"email", "op@example.test"}, {"password", "operator password 1"}});
    ASSERT_EQ(login.status, 200) << login.body;
    alice_ = Browser();
    SignUp(*alice_, "alice@example.test");
    key_id_ = AddKey(*alice_, "laptop", "alice");
  }

  std::string AddKey(HttpClient& who, const std::string& name, const std::string& file) {
    auto key = GenerateKey(dir_.path(), file);
    auto r = who.PostJson("/api/v1/ssh-keys", {{"name", name}, {"public_key", key.public_line}});
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json()["id"];
  }
  /// Registers a host as the operator (its sshd on 127.0.0.1) and returns its agent token.
  std::string AddHost(const std::string& name, bool gpu = true) {
    auto r = op_->PostJson("/api/v1/admin/hosts", {{"name", name},
                                                   {"gpu_type", "spark-1x"},
                                                   {"gpu_required", gpu},
                                                   {"ssh_address", "127.0.0.1"}});
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json()["token"];
  }
  /// One fake agent round.
  HttpResult Sync(const std::string& token, json containers = json::array()) {
    HttpClient agent(app_->base_url());
    agent.SetBearer(token);
    return agent.PostJson("/api/v1/agent/sync",
                          {{"agent_version", "0.1.0"},
                           {"inventory", {{"addresses", json::array()}, {"cpus", 2}}},
                           {"engine", {{"ok", true}, {"error", ""}}},
                           {"containers", containers},
                           {"failures", json::array()}});
  }
  static json Container(const std::string& id, const std::string& state, bool ready,
                        int64_t generation) {
    return {{"instance_id", id}, {"node_index", 0},    {"container_id", "c0"},
            {"state", state},    {"exit_code", 0},     {"started_at", ""},
            {"ssh_port", 40001}, {"ssh_ready", ready}, {"restart_generation", generation},
            {"error", ""}};
  }
  HttpResult Create(HttpClient& who, const std::string& name, const std::string& key,
                    const std::string& type = "spark-1x") {
    return who.PostJson("/api/v1/instances",
                        {{"name", name}, {"ssh_key_id", key}, {"gpu_type", type}});
  }

  std::unique_ptr<HttpClient> op_;
  std::unique_ptr<HttpClient> alice_;
  std::string key_id_;
};

TEST_F(InstancesApiTest, LifecycleWithAFakeAgent) {
  const std::string token = AddHost("spark-a");
  ASSERT_EQ(Sync(token).status, 200);
  auto created = Create(*alice_, "alpha", key_id_);
  ASSERT_EQ(created.status, 201) << created.body;
  const json in = created.Json();
  const std::string id = in["id"];
  EXPECT_EQ(in["status"], "provisioning");
  EXPECT_EQ(in["hosts"], json::array({"spark-a"}));
  EXPECT_EQ(in["ssh_key"]["name"], "laptop");
  EXPECT_TRUE(in["ssh_command"].is_null());
  const std::string session = in["billing_session"]["id"];

  auto round = Sync(token);
  ASSERT_EQ(round.status, 200) << round.body;
  ASSERT_EQ(round.Json()["desired"].size(), 1u);
  EXPECT_EQ(round.Json()["desired"][0]["instance_id"], id);
  EXPECT_EQ(round.Json()["desired"][0]["hostname"], in["hostname"]);

  ASSERT_EQ(Sync(token, json::array({Container(id, "running", true, 0)})).status, 200);
  auto shown = alice_->Get("/api/v1/instances/" + id);
  ASSERT_EQ(shown.status, 200);
  EXPECT_EQ(shown.Json()["status"], "running");
  EXPECT_EQ(shown.Json()["ssh_command"], "ssh -p 40001 root@127.0.0.1");
  // The same target as separate fields, for clients that build an argv (gpuwerk ssh).
  EXPECT_EQ(shown.Json()["ssh"], json({{"host", "127.0.0.1"}, {"port", 40001}, {"user", "root"}}));
  EXPECT_EQ(alice_->Get("/api/v1/instances").Json()["total"], 1);

  // Restart: generation bumped, same billing session.
  auto restarted = alice_->PostJson("/api/v1/instances/" + id + "/restart", json::object());
  ASSERT_EQ(restarted.status, 202) << restarted.body;
  EXPECT_EQ(restarted.Json()["status"], "restarting");
  EXPECT_EQ(restarted.Json()["billing_session"]["id"], session);
  EXPECT_EQ(Sync(token).Json()["desired"][0]["restart_generation"], 1);
  Sync(token, json::array({Container(id, "running", true, 1)}));
  EXPECT_EQ(alice_->Get("/api/v1/instances/" + id).Json()["status"], "running");

  // Delete: deleting until the agent reports the container gone; then the name is free.
  EXPECT_EQ(alice_->Delete("/api/v1/instances/" + id).status, 204);
  EXPECT_EQ(alice_->Get("/api/v1/instances/" + id).Json()["status"], "deleting");
  EXPECT_EQ(alice_->Delete("/api/v1/instances/" + id).status, 204);
  ExpectProblem(Create(*alice_, "alpha", key_id_), 409, "name_taken");
  EXPECT_TRUE(
      Sync(token, json::array({Container(id, "running", true, 1)})).Json()["desired"].empty());
  Sync(token);  // gone
  ExpectProblem(alice_->Get("/api/v1/instances/" + id), 404, "not_found");
  ExpectProblem(alice_->Delete("/api/v1/instances/" + id), 404, "not_found");
  auto again = Create(*alice_, "alpha", key_id_);
  EXPECT_EQ(again.status, 201) << again.body;
  EXPECT_NE(again.Json()["billing_session"]["id"], session);
}

// Issue 12: what a host reports as its sshd address ends up in the commands people are shown
// and run; an address that could be read as an ssh option (or anything but an address or DNS
// name) is refused with the whole sync, as is a port outside 16 bits.
TEST_F(InstancesApiTest, AHostsSshAddressThatCouldBeAnOptionIsRefused) {
  const std::string token = AddHost("spark-a");
  HttpClient agent(app_->base_url());
  agent.SetBearer(token);
  auto sync = [&](json inventory, json containers) {
    return agent.PostJson("/api/v1/agent/sync", {{"agent_version", "0.1.0"},
                                                 {"inventory", inventory},
                                                 {"engine", {{"ok", true}, {"error", ""}}},
                                                 {"containers", containers},
                                                 {"failures", json::array()}});
  };
  for (const char* address : {"-oProxyCommand=touch /tmp/gpuwerk-pwned", "10.0.0.5 -p 1",
                              "root@10.0.0.5", "10.0.0.5\n"}) {
    auto r = sync({{"cpus", 2}, {"ssh_address", address}}, json::array());
    ExpectProblem(r, 400, "invalid_field");
    EXPECT_EQ(r.Json()["field"], "inventory.ssh_address") << address;
  }
  auto ok = sync({{"cpus", 2}, {"ssh_address", "spark-a.rack1.example"}}, json::array());
  EXPECT_EQ(ok.status, 200) << ok.body;
  json container = Container("ins_none", "running", true, 0);
  container["ssh_port"] = 65536 + 22;  // would have been truncated to 22
  auto port = sync({{"cpus", 2}}, json::array({container}));
  ExpectProblem(port, 400, "invalid_field");
  EXPECT_EQ(port.Json()["field"], "containers[0].ssh_port");
}

TEST_F(InstancesApiTest, SecondPersonGets404) {
  const std::string token = AddHost("spark-a");
  Sync(token);
  auto created = Create(*alice_, "alpha", key_id_);
  ASSERT_EQ(created.status, 201);
  const std::string id = created.Json()["id"];
  auto bob = Browser();
  SignUp(*bob, "bob@example.test");
  ExpectProblem(bob->Get("/api/v1/instances/" + id), 404, "not_found");
  ExpectProblem(bob->PostJson("/api/v1/instances/" + id + "/restart", json::object()), 404,
                "not_found");
  ExpectProblem(bob->Delete("/api/v1/instances/" + id), 404, "not_found");
  EXPECT_EQ(bob->Get("/api/v1/instances").Json()["total"], 0);
  EXPECT_EQ(alice_->Get("/api/v1/instances/" + id).Json()["status"], "provisioning");
}

TEST_F(InstancesApiTest, BadInputGetsClearCodesAndCreatesNothing) {
  const std::string token = AddHost("spark-a");
  Sync(token);
  auto bob = Browser();
  SignUp(*bob, "bob@example.test");
  const std::string bobs_key = AddKey(*bob, "bobs", "bob");
  ExpectProblem(Create(*alice_, "Not_A_Label", key_id_), 400, "invalid_name");
  // New-user trial: a name longer than the generic 256-character field bound still gets the
  // instance-name rule's message (1 to 63 characters), not "must be at most 256 characters".
  for (size_t length : {64u, 100u, 300u}) {
    auto too_long = Create(*alice_, std::string(length, 'a'), key_id_);
    ExpectProblem(too_long, 400, "invalid_name");
    EXPECT_THAT(too_long.Json()["detail"].get<std::string>(), ::testing::HasSubstr("1 to 63"))
        << length;
  }
  ExpectProblem(Create(*alice_, "alpha", bobs_key), 404, "not_found");
  ExpectProblem(Create(*alice_, "alpha", key_id_, "spark-9x"), 400, "unknown_gpu_type");
  ExpectProblem(alice_->PostJson("/api/v1/instances", {{"name", "alpha"}}), 400, "invalid_field");
  EXPECT_EQ(alice_->Get("/api/v1/instances").Json()["total"], 0);
  EXPECT_EQ(Sync(token).Json()["desired"].size(), 0u);
  auto gpu_types = alice_->Get("/api/v1/gpu-types");
  ASSERT_EQ(gpu_types.status, 200);
  EXPECT_EQ(gpu_types.Json()["items"][0]["name"], "spark-1x");
  EXPECT_EQ(gpu_types.Json()["items"][0]["free_capacity"], 1);
  EXPECT_EQ(gpu_types.Json()["items"][0]["price"]["amount_minor"], 65);

  // No capacity once the host is taken.
  ASSERT_EQ(Create(*alice_, "alpha", key_id_).status, 201);
  auto full = Create(*alice_, "beta", key_id_);
  ExpectProblem(full, 409, "no_capacity");
  EXPECT_EQ(full.Json()["queue"]["offer"], true);
}

// R-19: a misspelt field ("gpu_typ") or a repeated one is refused with invalid_field naming it, and
// nothing is launched or handed to the agent; the same for the agent's own sync.
TEST_F(InstancesApiTest, UnknownOrDuplicateFieldsLaunchNothing) {
  const std::string token = AddHost("spark-a");
  Sync(token);
  auto typo = alice_->PostJson(
      "/api/v1/instances", {{"name", "typo"}, {"ssh_key_id", key_id_}, {"gpu_typ", "spark-2x"}});
  ExpectProblem(typo, 400, "invalid_field");
  EXPECT_EQ(typo.Json()["field"], "gpu_typ");
  auto twice = alice_->Post("/api/v1/instances",
                            R"({"name":"dupa","ssh_key_id":")" + key_id_ + R"(","name":"dupb"})",
                            "application/json");
  ExpectProblem(twice, 400, "invalid_field");
  EXPECT_EQ(twice.Json()["field"], "name");
  EXPECT_EQ(alice_->Get("/api/v1/instances").Json()["total"], 0);
  EXPECT_EQ(Sync(token).Json()["desired"].size(), 0u);
  // The agent's sync: an unknown member anywhere is refused, naming it.
  HttpClient agent(app_->base_url());
  agent.SetBearer(token);
  auto sync = agent.PostJson("/api/v1/agent/sync", {{"agent_version", "0.1.0"},
                                                    {"inventory", {{"cpus", 2}}},
                                                    {"engine", {{"ok", true}, {"error", ""}}},
                                                    {"containers", json::array()},
                                                    {"failures", json::array()},
                                                    {"desired", json::array()}});
  ExpectProblem(sync, 400, "invalid_field");
  EXPECT_EQ(sync.Json()["field"], "desired");
}

TEST_F(InstancesApiTest, KeyInUseNamesTheInstance) {
  const std::string token = AddHost("spark-a", false);
  Sync(token);
  auto created = Create(*alice_, "alpha", key_id_);
  ASSERT_EQ(created.status, 201);
  EXPECT_EQ(created.Json()["gpu"], "no GPU attached");
  auto refused = alice_->Delete("/api/v1/ssh-keys/" + key_id_);
  ExpectProblem(refused, 409, "key_in_use");
  EXPECT_EQ(refused.Json()["instances"], json::array({"alpha"}));
  // Deleted instance: the key may go.
  ASSERT_EQ(alice_->Delete("/api/v1/instances/" + created.Json()["id"].get<std::string>()).status,
            204);
  Sync(token);
  EXPECT_EQ(alice_->Delete("/api/v1/ssh-keys/" + key_id_).status, 204);
}

TEST_F(InstancesApiTest, HostsAreForOperatorsAndAgentsNeedTheirToken) {
  ExpectProblem(alice_->PostJson("/api/v1/admin/hosts", {{"name", "x"}, {"gpu_type", "spark-1x"}}),
                403, "forbidden");
  ExpectProblem(alice_->Get("/api/v1/admin/hosts"), 403, "forbidden");
  ExpectProblem(Sync("gwh_not-a-token"), 401, "unauthenticated");
  HttpClient anonymous(app_->base_url());
  ExpectProblem(anonymous.Get("/api/v1/instances"), 401, "unauthenticated");
  const std::string token = AddHost("spark-a");
  auto list = op_->Get("/api/v1/admin/hosts");
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.Json()["items"][0]["name"], "spark-a");
  EXPECT_TRUE(list.Json()["items"][0]["last_seen_at"].is_null());
  EXPECT_FALSE(list.Json()["items"][0].contains("token"));
  Sync(token);
  EXPECT_TRUE(op_->Get("/api/v1/admin/hosts").Json()["items"][0]["last_seen_at"].is_string());
}

TEST_F(InstancesApiTest, AdminHostsArePagedLikeEveryList) {
  for (int i = 0; i < 17; ++i)
    AddHost("spark-" + std::string(i < 10 ? "0" : "") + std::to_string(i));
  auto first = op_->Get("/api/v1/admin/hosts");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.Json()["items"].size(), 15u);
  EXPECT_EQ(first.Json()["items"][0]["name"], "spark-00");
  EXPECT_EQ(first.Json()["page"], 1);
  EXPECT_EQ(first.Json()["pages"], 2);
  EXPECT_EQ(first.Json()["total"], 17);
  auto second = op_->Get("/api/v1/admin/hosts?page=2");
  ASSERT_EQ(second.status, 200) << second.body;
  ASSERT_EQ(second.Json()["items"].size(), 2u);
  EXPECT_EQ(second.Json()["items"][1]["name"], "spark-16");
  EXPECT_EQ(second.Json()["page"], 2);
  ExpectProblem(op_->Get("/api/v1/admin/hosts?page=0"), 400, "invalid_page");
  // Drain and undrain answer the one host.
  auto drained = op_->PostJson("/api/v1/admin/hosts/spark-16/drain", json::object());
  ASSERT_EQ(drained.status, 200) << drained.body;
  EXPECT_EQ(drained.Json()["name"], "spark-16");
  EXPECT_EQ(drained.Json()["drained"], true);
  ExpectProblem(op_->PostJson("/api/v1/admin/hosts/nope/drain", json::object()), 404, "not_found");
}

TEST_F(InstancesApiTest, SilentHostMakesInstanceUnknownAndBack) {
  const std::string token = AddHost("spark-a");
  Sync(token);
  auto created = Create(*alice_, "alpha", key_id_);
  const std::string id = created.Json()["id"];
  Sync(token, json::array({Container(id, "running", true, 0)}));
  clock_.Advance(std::chrono::seconds(31));
  EXPECT_EQ(alice_->Get("/api/v1/instances/" + id).Json()["status"], "unknown");
  Sync(token, json::array({Container(id, "running", true, 0)}));
  EXPECT_EQ(alice_->Get("/api/v1/instances/" + id).Json()["status"], "running");
}

// The agent's long poll: a watch with the sync's desired_version returns as soon as an instance
// is created on the host (not after its wait), and with the version unchanged after the wait.
TEST_F(InstancesApiTest, WatchReturnsWhenTheHostsDesiredStateChanges) {
  const std::string token = AddHost("spark-a");
  auto first = Sync(token);
  ASSERT_EQ(first.status, 200);
  const std::string version = first.Json()["desired_version"];
  ASSERT_FALSE(version.empty());

  HttpResult watched;
  auto started = std::chrono::steady_clock::now();
  std::chrono::steady_clock::duration took{};
  std::thread watcher([&] {
    HttpClient agent(app_->base_url());
    agent.SetBearer(token);
    watched = agent.Get("/api/v1/agent/watch?version=" + version + "&wait_seconds=20");
    took = std::chrono::steady_clock::now() - started;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the watch wait
  ASSERT_EQ(Create(*alice_, "alpha", key_id_).status, 201);
  watcher.join();
  ASSERT_EQ(watched.status, 200) << watched.body;
  EXPECT_NE(watched.Json()["version"], version);
  EXPECT_LT(took, std::chrono::seconds(10));
  // The next sync carries the new version and the new desired entry.
  auto next = Sync(token).Json();
  EXPECT_EQ(next["desired_version"], watched.Json()["version"]);
  EXPECT_EQ(next["desired"].size(), 1u);

  // Nothing changes: the watch answers after its wait with the same version.
  HttpClient agent(app_->base_url());
  agent.SetBearer(token);
  auto idle =
      agent.Get("/api/v1/agent/watch?version=" + next["desired_version"].get<std::string>() +
                "&wait_seconds=1");
  ASSERT_EQ(idle.status, 200);
  EXPECT_EQ(idle.Json()["version"], next["desired_version"]);
}

TEST_F(InstancesApiTest, WatchRefusesBadInputAndStrangers) {
  const std::string token = AddHost("spark-a");
  HttpClient agent(app_->base_url());
  agent.SetBearer(token);
  EXPECT_EQ(agent.Get("/api/v1/agent/watch").Json()["code"], "invalid_version");
  EXPECT_EQ(agent.Get("/api/v1/agent/watch?version=abc").Json()["code"], "invalid_version");
  EXPECT_EQ(agent.Get("/api/v1/agent/watch?version=1&wait_seconds=0").Json()["code"],
            "invalid_wait");
  EXPECT_EQ(agent.Get("/api/v1/agent/watch?version=1&wait_seconds=56").status, 400);
  HttpClient stranger(app_->base_url());
  stranger.SetBearer("gwh_not-a-host");
  EXPECT_EQ(stranger.Get("/api/v1/agent/watch?version=1").status, 401);
  // A person's session is not a host token.
  EXPECT_EQ(alice_->Get("/api/v1/agent/watch?version=1").status, 401);
}

// C13 over the API: a host whose GPU runtime failed a create shows why and takes no instance.
TEST_F(InstancesApiTest, C13_DegradedHostIsShownAndAvoided) {
  const std::string token = AddHost("spark-a");
  Sync(token);
  auto created = Create(*alice_, "alpha", key_id_);
  ASSERT_EQ(created.status, 201);
  const std::string id = created.Json()["id"];
  HttpClient agent(app_->base_url());
  agent.SetBearer(token);
  auto r = agent.PostJson(
      "/api/v1/agent/sync",
      {{"inventory", {{"cpus", 2}}},
       {"engine", {{"ok", true}, {"error", ""}}},
       {"containers", json::array()},
       {"failures",
        json::array({{{"instance_id", id},
                      {"node_index", 0},
                      {"code", "engine_error"},
                      {"message", "start: unknown or invalid runtime name: nvidia"}}})}});
  ASSERT_EQ(r.status, 200) << r.body;
  auto shown = alice_->Get("/api/v1/instances/" + id).Json();
  EXPECT_EQ(shown["status"], "failed");
  EXPECT_NE(shown["status_reason"].get<std::string>().find("runtime"), std::string::npos);
  auto hosts = op_->Get("/api/v1/admin/hosts").Json()["items"];
  EXPECT_NE(hosts[0]["degraded_reason"].get<std::string>().find("GPU runtime failed"),
            std::string::npos);
  EXPECT_TRUE(hosts[0]["instance_id"].is_null());
  // The only host is degraded: spark-1x is not online, so a create enters the queue (issue 5).
  auto again = Create(*alice_, "beta", key_id_);
  EXPECT_EQ(again.status, 202) << again.body;
  EXPECT_EQ(again.Json()["queued"], true);
}

TEST_F(InstancesApiTest, OperatorDrainsAndUndrainsAHost) {
  const std::string token = AddHost("spark-a");
  Sync(token);
  auto drained = op_->PostJson("/api/v1/admin/hosts/spark-a/drain", json::object());
  ASSERT_EQ(drained.status, 200) << drained.body;
  EXPECT_EQ(drained.Json()["drained"], true);
  EXPECT_EQ(Create(*alice_, "alpha", key_id_).Json()["queued"], true);  // not online: queued
  EXPECT_EQ(alice_->PostJson("/api/v1/admin/hosts/spark-a/undrain", json::object()).status, 403);
  EXPECT_EQ(op_->PostJson("/api/v1/admin/hosts/nope/undrain", json::object()).status, 404);
  auto undrained = op_->PostJson("/api/v1/admin/hosts/spark-a/undrain", json::object());
  ASSERT_EQ(undrained.status, 200);
  EXPECT_EQ(undrained.Json()["drained"], false);
  // The undrain launched the queued alpha; a direct create takes nothing more.
  EXPECT_EQ(alice_->Get("/api/v1/instances").Json()["items"][0]["name"], "alpha");
}

// Issue 11 break test (LOW): `POST …/drain {"undrain":true}` drained. Routes that only act take
// no body: one is refused and nothing changes.
TEST_F(InstancesApiTest, ABodyOnARouteThatTakesNoneIsRefusedAndChangesNothing) {
  const std::string token = AddHost("spark-a");
  Sync(token);
  ExpectProblem(op_->PostJson("/api/v1/admin/hosts/spark-a/drain", {{"undrain", true}}), 400,
                "invalid_field");
  ExpectProblem(op_->Post("/api/v1/admin/hosts/spark-a/drain", "undrain", "text/plain"), 400,
                "invalid_json");  // not JSON at all (docs/api.md)
  EXPECT_EQ(op_->Get("/api/v1/admin/hosts").Json()["items"][0]["drained"], false);
  auto created = Create(*alice_, "alpha", key_id_);
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.Json()["id"];
  ExpectProblem(alice_->PostJson("/api/v1/instances/" + id + "/restart", {{"force", true}}), 400,
                "invalid_field");
  ExpectProblem(alice_->Send("DELETE", "/api/v1/instances/" + id, R"({"name":"beta"})",
                             {"Content-Type: application/json"}),
                400, "invalid_field");
  EXPECT_EQ(alice_->Get("/api/v1/instances/" + id).Json()["restart_generation"], 0);
  EXPECT_NE(alice_->Get("/api/v1/instances/" + id).Json()["status"], "deleting");
  ExpectProblem(alice_->Send("GET", "/api/v1/instances", "[1]", {"Content-Type: application/json"}),
                400, "invalid_field");
  // An empty body, or `{}` as the CLI sends with every POST, is still fine.
  EXPECT_EQ(op_->PostJson("/api/v1/admin/hosts/spark-a/drain", json::object()).status, 200);
  EXPECT_EQ(op_->Post("/api/v1/admin/hosts/spark-a/undrain", "", "application/json").status, 200);
}

}  // namespace
}  // namespace gpuwerk::testing
