// Capacity as operator-managed data over real HTTP (R-7, R-8, R-11, R-17, R-19, issue 5), with
// fake agents: GPU types (admin list and PUT), host removal, spark-2x pairs (link, list, unlink,
// placement on both hosts of one pair, never on unpaired hosts), "online", a create of a type
// that is not online entering the queue, and the drains that linking, adding and undraining
// trigger.
#include <gtest/gtest.h>

#include "tests/integration/queue_fixture.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

class AdminCapacityApiTest : public QueueFixture {
 protected:
  HttpResult PutType(HttpClient& who, const std::string& name, const json& body) {
    return who.Send("PUT", "/api/v1/admin/gpu-types/" + name, body.dump(),
                    {"Content-Type: application/json"});
  }
  int64_t Count(const std::string& sql) {
    auto n = app_->database().Read([&](store::Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(sql));
      return row->Int(0);
    });
    return n ? *n : -1;
  }
  /// The open queue entry of `p` (null when none).
  json OpenEntry(Person& p) {
    auto items = p.browser->Get("/api/v1/queue-entries").Json()["items"];
    return items.empty() ? json(nullptr) : items[0];
  }
  /// The person's live instances.
  json Instances(Person& p) { return p.browser->Get("/api/v1/instances").Json()["items"]; }
};

TEST_F(AdminCapacityApiTest, OperatorManagesGpuTypes) {
  Person alice = NewPerson("alice@example.test");
  // Operators only.
  ExpectProblem(alice.browser->Get("/api/v1/admin/gpu-types"), 403, "forbidden");
  ExpectProblem(PutType(*alice.browser, "spark-1x", {{"price_minor_per_hour", 1}}), 403,
                "forbidden");

  auto listed = op_->Get("/api/v1/admin/gpu-types");
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_EQ(listed.Json()["total"], 2);
  EXPECT_EQ(listed.Json()["page"], 1);
  EXPECT_EQ(listed.Json()["pages"], 1);
  EXPECT_EQ(listed.Json()["items"][0]["name"], "spark-1x");
  EXPECT_EQ(listed.Json()["items"][0]["hosts"], 0);
  EXPECT_EQ(listed.Json()["items"][1]["hosts_per_instance"], 2);
  ExpectProblem(op_->Get("/api/v1/admin/gpu-types?page=0"), 400, "invalid_page");

  // Create: 201 with the type; fields left out get their defaults.
  auto made = PutType(*op_, "gb10-lite",
                      {{"hosts_per_instance", 1},
                       {"price_minor_per_hour", 40},
                       {"description", "A GB10 slice for small jobs"}});
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(made.Json()["name"], "gb10-lite");
  EXPECT_EQ(made.Json()["price"], json({{"amount_minor", 40}, {"currency", "usd"}}));
  EXPECT_EQ(made.Json()["online"], false);
  EXPECT_EQ(made.Json()["queued"], 0);
  // People see it at once.
  EXPECT_EQ(TypeItem(*alice.browser, "gb10-lite")["description"], "A GB10 slice for small jobs");

  // Bad input: a clear problem, nothing changed.
  struct Bad {
    std::string name;
    json body;
    std::string code;
  };
  for (const Bad& bad : std::vector<Bad>{
           {"spark-1x", {{"price_minor_per_hour", -5}}, "invalid_price"},
           {"spark-1x", {{"price_minor_per_hour", 0.65}}, "invalid_price"},
           {"spark-1x", {{"price_minor_per_hour", "65"}}, "invalid_price"},
           {"spark-1x", {{"hosts_per_instance", 1.5}}, "invalid_hosts_per_instance"},
           {"spark-1x", {{"price_minor_per_hour", nullptr}}, "invalid_field"},
           {"spark-1x", {{"description", nullptr}}, "invalid_field"},
           {"spark-1x", {{"description", std::string(900'000, 'x')}}, "invalid_description"},
           {"spark-1x", {{"description", "evil \u202e txet"}}, "invalid_description"},
           {"spark-1x", {{"hosts_per_instance", 3}}, "invalid_hosts_per_instance"},
           {"spark-1x", {{"currency", "USD"}}, "invalid_currency"},
           {"spark-1x", {{"description", "two\nlines"}}, "invalid_description"},
           {"spark-1x", {{"price", 80}}, "invalid_field"},
           {"Spark_1x", {{"price_minor_per_hour", 80}}, "invalid_name"},
           {"spark-8x", {{"price_minor_per_hour", 80}}, "invalid_field"},  // needs hosts
       }) {
    ExpectProblem(PutType(*op_, bad.name, bad.body), 400, bad.code);
  }
  ExpectProblem(op_->Send("PUT", "/api/v1/admin/gpu-types/spark-1x", "[1]",
                          {"Content-Type: application/json"}),
                400, "invalid_json");
  EXPECT_EQ(TypeItem(*op_, "spark-1x")["price"]["amount_minor"], 65);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM gpu_types"), 3);

  // A price change applies to billing sessions that start afterwards.
  AddHost("spark-a");
  AddHost("spark-b");
  ASSERT_EQ(Create(alice, "before").status, 201);
  auto repriced = PutType(*op_, "spark-1x", {{"price_minor_per_hour", 80}});
  ASSERT_EQ(repriced.status, 200) << repriced.body;
  EXPECT_EQ(repriced.Json()["price"]["amount_minor"], 80);
  EXPECT_EQ(repriced.Json()["hosts"], 2);
  ASSERT_EQ(Create(alice, "after").status, 201);
  EXPECT_EQ(Count("SELECT price_minor_per_hour FROM billing_sessions WHERE instance_name = "
                  "'before'"),
            65);
  EXPECT_EQ(Count("SELECT price_minor_per_hour FROM billing_sessions WHERE instance_name = "
                  "'after'"),
            80);

  // Hosts per instance is fixed while the type has hosts, instances or queue entries.
  auto refused = PutType(*op_, "spark-1x", {{"hosts_per_instance", 2}});
  ExpectProblem(refused, 409, "gpu_type_in_use");
  EXPECT_EQ(refused.Json()["hosts"], 2);
  EXPECT_EQ(refused.Json()["instances"], 2);
  EXPECT_EQ(TypeItem(*op_, "spark-1x")["hosts_per_instance"], 1);
  EXPECT_EQ(PutType(*op_, "gb10-lite", {{"hosts_per_instance", 2}}).status, 200);

  // Audited with before and after.
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'gpu_type.create' AND "
                  "target = 'gb10-lite'"),
            1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'gpu_type.update'"), 2);
}

// spark-2x is not online until a pair of usable hosts is linked; a create then enters the
// queue (202), and linking the pair launches it on both hosts, node 0 first, with the rails in
// each container's environment.
TEST_F(AdminCapacityApiTest, TwoHostTypeIsOnlineOnlyWithALinkedPair) {
  Person alice = NewPerson("alice@example.test");
  json t = TypeItem(*alice.browser, "spark-2x");
  EXPECT_EQ(t["online"], false);
  EXPECT_EQ(t["free_capacity"], 0);
  EXPECT_EQ(t["queued"], 0);
  AddHost("node-a", "spark-2x");
  AddHost("node-b", "spark-2x");
  EXPECT_EQ(TypeItem(*alice.browser, "spark-2x")["online"], false);  // unpaired hosts

  // Not online: the create enters the queue directly.
  auto queued = Create(alice, "big", {}, "spark-2x");
  ASSERT_EQ(queued.status, 202) << queued.body;
  EXPECT_EQ(queued.Json()["queued"], true);
  EXPECT_EQ(queued.Json()["status"], "open");
  EXPECT_EQ(queued.Json()["position"], 1);
  EXPECT_EQ(queued.Json()["gpu_type"], "spark-2x");
  EXPECT_EQ(queued.Json()["name"], "big");
  EXPECT_EQ(TypeItem(*alice.browser, "spark-2x")["queued"], 1);
  // Unpaired hosts never take it, whatever drains run.
  ASSERT_TRUE(app_->DrainQueuesNow());
  EXPECT_EQ(Sync("node-a").status, 200);
  EXPECT_TRUE(Instances(alice).empty());
  EXPECT_EQ(InstanceOn("node-a"), "");

  // Linking the pair drains the queue at once: the instance lands on both hosts.
  auto linked = Link("node-b", "192.168.100.2", "node-a", "192.168.100.1");
  ASSERT_EQ(linked.status, 201) << linked.body;
  const json pair = linked.Json();
  EXPECT_TRUE(pair["id"].get<std::string>().starts_with("hpr_"));
  EXPECT_EQ(pair["gpu_type"], "spark-2x");
  EXPECT_EQ(pair["hosts"][0]["name"], "node-b");
  EXPECT_EQ(pair["hosts"][0]["node_index"], 0);
  EXPECT_EQ(pair["hosts"][1]["rail_address"], "192.168.100.1");
  json ins = Instances(alice);
  ASSERT_EQ(ins.size(), 1u) << ins.dump();
  EXPECT_EQ(ins[0]["name"], "big");
  EXPECT_EQ(ins[0]["hosts"], json({"node-b", "node-a"}));
  EXPECT_EQ(InstanceOn("node-a"), ins[0]["id"]);
  EXPECT_EQ(InstanceOn("node-b"), ins[0]["id"]);
  EXPECT_TRUE(OpenEntry(alice).is_null());
  t = TypeItem(*alice.browser, "spark-2x");
  EXPECT_EQ(t["online"], true);
  EXPECT_EQ(t["free_capacity"], 0);

  // The hosts list shows the pair; GET host-pairs names the instance.
  json a = HostItem("node-a");
  EXPECT_EQ(a["pair"]["id"], pair["id"]);
  EXPECT_EQ(a["pair"]["node_index"], 1);
  EXPECT_EQ(a["pair"]["partner"], "node-b");
  EXPECT_EQ(a["pair"]["rail_address"], "192.168.100.1");
  auto pairs = op_->Get("/api/v1/admin/host-pairs");
  ASSERT_EQ(pairs.status, 200);
  EXPECT_EQ(pairs.Json()["total"], 1);
  EXPECT_EQ(pairs.Json()["items"][0]["instance_id"], ins[0]["id"]);

  // Each node's desired state carries the rails.
  for (const std::string host : {"node-a", "node-b"}) {
    json desired = Sync(host).Json()["desired"];
    ASSERT_EQ(desired.size(), 1u) << host;
    const bool node0 = host == "node-b";
    EXPECT_EQ(desired[0]["node_index"], node0 ? 0 : 1);
    auto env = desired[0]["env"].get<std::vector<std::string>>();
    auto has = [&](const std::string& v) {
      return std::find(env.begin(), env.end(), v) != env.end();
    };
    EXPECT_TRUE(has("MASTER_ADDR=192.168.100.2")) << host;
    EXPECT_TRUE(has("MASTER_PORT=29500")) << host;
    EXPECT_TRUE(has(std::string("VLLM_HOST_IP=") + (node0 ? "192.168.100.2" : "192.168.100.1")))
        << host;
    EXPECT_TRUE(has("GPUWERK_NODE1_ADDR=192.168.100.1")) << host;
  }

  // The pair cannot be unlinked, nor its hosts removed, while the instance is on it.
  ExpectProblem(op_->Delete("/api/v1/admin/host-pairs/" + pair["id"].get<std::string>()), 409,
                "host_in_use");
  ExpectProblem(op_->Delete("/api/v1/admin/hosts/node-a"), 409, "host_in_use");
  EXPECT_EQ(op_->Get("/api/v1/admin/host-pairs").Json()["total"], 1);

  // Online and full: a direct create is 409 no_capacity with the queue offer.
  auto full = Create(alice, "big2", {}, "spark-2x");
  ExpectProblem(full, 409, "no_capacity");
  EXPECT_EQ(full.Json()["queue"]["offer"], true);
}

TEST_F(AdminCapacityApiTest, PairInputIsCheckedAndNothingChangesOnError) {
  AddHost("a", "spark-2x");
  AddHost("b", "spark-2x");
  AddHost("c", "spark-2x");
  AddHost("one", "spark-1x");
  AddHost("two", "spark-1x");
  auto post = [&](const json& body) { return op_->PostJson("/api/v1/admin/host-pairs", body); };
  ExpectProblem(post(json::object()), 400, "invalid_field");
  ExpectProblem(post({{"hosts", {{{"name", "a"}, {"rail_address", "10.0.0.1"}}}}}), 400,
                "invalid_field");
  ExpectProblem(post({{"hosts", {{{"name", "a"}}, {{"name", "b"}, {"rail_address", "10.0.0.2"}}}}}),
                400, "invalid_field");
  ExpectProblem(Link("a", "10.0.0.1", "b", "not-an-ip"), 400, "invalid_rail_address");
  ExpectProblem(Link("a", "10.0.0.1", "a", "10.0.0.2"), 400, "invalid_pair");
  ExpectProblem(Link("a", "10.0.0.1", "nope", "10.0.0.2"), 404, "not_found");
  ExpectProblem(Link("a", "10.0.0.1", "one", "10.0.0.2"), 409, "gpu_type_mismatch");
  ExpectProblem(Link("one", "10.0.0.1", "two", "10.0.0.2"), 409, "not_a_pair_type");
  Person alice = NewPerson("alice@example.test");
  ExpectProblem(alice.browser->PostJson("/api/v1/admin/host-pairs",
                                        {{"hosts",
                                          {{{"name", "a"}, {"rail_address", "10.0.0.1"}},
                                           {{"name", "b"}, {"rail_address", "10.0.0.2"}}}}}),
                403, "forbidden");
  EXPECT_EQ(op_->Get("/api/v1/admin/host-pairs").Json()["total"], 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM host_pair_members"), 0);

  ASSERT_EQ(Link("a", "10.0.0.1", "b", "10.0.0.2").status, 201);
  auto again = Link("c", "10.0.0.3", "b", "10.0.0.4");
  ExpectProblem(again, 409, "already_paired");
  EXPECT_EQ(again.Json()["host"], "b");
  EXPECT_EQ(op_->Get("/api/v1/admin/host-pairs").Json()["total"], 1);
  EXPECT_TRUE(HostItem("c")["pair"].is_null());

  // Unlink (free pair): both hosts stay, unpaired; audited.
  const std::string id = HostItem("a")["pair"]["id"];
  ExpectProblem(op_->Delete("/api/v1/admin/host-pairs/hpr_nope"), 404, "not_found");
  EXPECT_EQ(op_->Delete("/api/v1/admin/host-pairs/" + id).status, 204);
  EXPECT_TRUE(HostItem("a")["pair"].is_null());
  EXPECT_TRUE(HostItem("b").is_object());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action IN ('host_pair.link', "
                  "'host_pair.unlink')"),
            2);
}

TEST_F(AdminCapacityApiTest, HostRemovalIsRefusedWhileInUse) {
  Person alice = NewPerson("alice@example.test");
  AddHost("spark-a");
  auto created = Create(alice, "alpha");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.Json()["id"];

  ExpectProblem(alice.browser->Delete("/api/v1/admin/hosts/spark-a"), 403, "forbidden");
  auto refused = op_->Delete("/api/v1/admin/hosts/spark-a");
  ExpectProblem(refused, 409, "host_in_use");
  EXPECT_EQ(refused.Json()["instance_id"], id);
  ExpectProblem(op_->Delete("/api/v1/admin/hosts/nope"), 404, "not_found");
  EXPECT_TRUE(HostItem("spark-a").is_object());
  EXPECT_EQ(Sync("spark-a").status, 200);

  // Deleted, and the agent reports the container gone: the host can go.
  ASSERT_EQ(alice.browser->Delete("/api/v1/instances/" + id).status, 204);
  ASSERT_EQ(Sync("spark-a").status, 200);
  EXPECT_EQ(op_->Delete("/api/v1/admin/hosts/spark-a").status, 204);
  EXPECT_TRUE(HostItem("spark-a").is_null());
  // Its agent token stops working at once.
  EXPECT_EQ(Sync("spark-a").status, 401);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'host.remove'"), 1);
  // Without a host the type is not online: a create enters the queue.
  EXPECT_EQ(TypeItem(*alice.browser, "spark-1x")["online"], false);
  auto queued = Create(alice, "beta");
  EXPECT_EQ(queued.status, 202) << queued.body;
}

// Issue 5 Deliver 4: adding a host, undraining one and linking a pair each launch the oldest
// waiting entry at once, without waiting for the periodic drain.
TEST_F(AdminCapacityApiTest, AddingUndrainingAndLinkingDrainTheQueue) {
  Person alice = NewPerson("alice@example.test");
  Person bob = NewPerson("bob@example.test");
  Person carol = NewPerson("carol@example.test");

  // Added (and its agent's first sync): the entry is launched.
  ASSERT_EQ(Join(alice, "first").status, 201);
  AddHost("spark-a");
  EXPECT_EQ(InstanceOn("spark-a"), Instances(alice)[0]["id"]);

  // Undrained: the entry is launched by the undrain itself.
  AddHost("spark-b");  // nothing waits: stays free
  ASSERT_EQ(op_->PostJson("/api/v1/admin/hosts/spark-b/drain", json::object()).status, 200);
  EXPECT_EQ(TypeItem(*bob.browser, "spark-1x")["online"], true);  // spark-a is usable
  auto waiting = Join(bob, "second");
  ASSERT_EQ(waiting.status, 201);
  EXPECT_EQ(waiting.Json()["status"], "open");
  ASSERT_EQ(op_->PostJson("/api/v1/admin/hosts/spark-b/undrain", json::object()).status, 200);
  EXPECT_EQ(InstanceOn("spark-b"), Instances(bob)[0]["id"]);

  // Linked: see TwoHostTypeIsOnlineOnlyWithALinkedPair; here with the entry joined first.
  AddHost("x", "spark-2x");
  AddHost("y", "spark-2x");
  ASSERT_EQ(Join(carol, "third", "spark-2x").status, 201);
  ASSERT_EQ(Link("x", "10.9.0.1", "y", "10.9.0.2").status, 201);
  ASSERT_EQ(Instances(carol).size(), 1u);
  EXPECT_EQ(Instances(carol)[0]["hosts"], json({"x", "y"}));
}

// The 202 of a create that was queued is what an Idempotency-Key replays.
// Issue 12 finding 1: where the relay reaches a host's instances is the operator's registration
// (`ssh_address`, `ssh_ports`), checked on add and on PUT …/ssh; a refusal has a stable code and
// stores nothing; a change is audited.
TEST_F(AdminCapacityApiTest, HostSshRegistrationIsCheckedAndAuditedAndNothingIsStoredOnRefusal) {
  auto add = [&](const json& extra) {
    json body = {{"name", "spark-s"}, {"gpu_type", "spark-1x"}};
    body.update(extra);
    return op_->PostJson("/api/v1/admin/hosts", body);
  };
  const int64_t hosts_before = Count("SELECT COUNT(*) FROM hosts");
  for (const char* bad : {"-oProxyCommand=x", "10.0.0.5 -oProxyCommand=touch${IFS}x", "a b", "",
                          "root@10.0.0.5", "10.0.0.5;id", "[fd00::5]", "x\ny", "-10.0.0.5"}) {
    ExpectProblem(add({{"ssh_address", bad}}), 400, "invalid_ssh_address");
  }
  ExpectProblem(add({{"ssh_address", 5}}), 400, "invalid_field");
  ExpectProblem(add({{"ssh_ports", {{"low", 40000}, {"high", 40100}}}}), 400,
                "invalid_ssh_address");  // ports need the address
  for (const json& ports :
       {json{{"low", 0}, {"high", 100}}, json{{"low", 1}, {"high", 70000}},
        json{{"low", 0}, {"high", 0}}, json{{"low", 5000}, {"high", 4000}},
        json{{"low", -1}, {"high", 10}}, json{{"low", 1}}, json{{"low", "1"}, {"high", "2"}},
        json{{"low", 1.5}, {"high", 2}}, json("1024-65535"), json::array({1024, 65535}),
        json{{"low", 18446744073709551615u}, {"high", 2}}}) {
    ExpectProblem(add({{"ssh_address", "10.0.0.5"}, {"ssh_ports", ports}}), 400,
                  "invalid_ssh_ports");
  }
  ExpectProblem(
      add({{"ssh_address", "10.0.0.5"}, {"ssh_ports", {{"low", 1}, {"high", 2}, {"step", 1}}}}),
      400, "invalid_field");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM hosts"), hosts_before);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'host.add' AND "
                  "target NOT IN (SELECT id FROM hosts)"),
            0);

  auto added = add({{"ssh_address", "10.0.0.5"}, {"ssh_ports", {{"low", 32768}, {"high", 60999}}}});
  ASSERT_EQ(added.status, 201) << added.body;
  EXPECT_EQ(added.Json()["ssh_address"], "10.0.0.5");
  EXPECT_EQ(added.Json()["ssh_ports"], json({{"low", 32768}, {"high", 60999}}));
  auto plain = op_->PostJson(
      "/api/v1/admin/hosts",
      {{"name", "spark-t"}, {"gpu_type", "spark-1x"}, {"ssh_address", "spark-t.internal"}});
  ASSERT_EQ(plain.status, 201) << plain.body;
  EXPECT_EQ(plain.Json()["ssh_ports"], json({{"low", 1024}, {"high", 65535}}));  // the default

  auto put = [&](HttpClient& who, const std::string& name, const json& body) {
    return who.Send("PUT", "/api/v1/admin/hosts/" + name + "/ssh", body.dump(),
                    {"Content-Type: application/json"});
  };
  ExpectProblem(put(*op_, "spark-s", {{"ssh_address", "-oProxyCommand=x"}}), 400,
                "invalid_ssh_address");
  ExpectProblem(put(*op_, "spark-s", json::object()), 400, "invalid_ssh_address");
  ExpectProblem(
      put(*op_, "spark-s", {{"ssh_address", "10.0.0.6"}, {"ssh_ports", {{"low", 0}, {"high", 9}}}}),
      400, "invalid_ssh_ports");
  ExpectProblem(put(*op_, "spark-s", {{"ssh_address", "10.0.0.6"}, {"gpu_type", "x"}}), 400,
                "invalid_field");
  ExpectProblem(put(*op_, "nope", {{"ssh_address", "10.0.0.6"}}), 404, "not_found");
  Person alice = NewPerson("alice@example.test");
  ExpectProblem(put(*alice.browser, "spark-s", {{"ssh_address", "10.0.0.6"}}), 403, "forbidden");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'host.set_ssh'"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM hosts WHERE name = 'spark-s' AND ssh_address = "
                  "'10.0.0.5' AND ssh_port_low = 32768 AND ssh_port_high = 60999"),
            1);

  auto changed = put(*op_, "spark-s",
                     {{"ssh_address", "fd00::6"}, {"ssh_ports", {{"low", 2200}, {"high", 2299}}}});
  ASSERT_EQ(changed.status, 200) << changed.body;
  EXPECT_EQ(changed.Json()["ssh_address"], "fd00::6");
  EXPECT_EQ(changed.Json()["ssh_ports"], json({{"low", 2200}, {"high", 2299}}));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'host.set_ssh'"), 1);
  auto listed = op_->Get("/api/v1/admin/hosts").Json()["items"];
  bool seen = false;
  for (const auto& h : listed) {
    if (h["name"] != "spark-s") continue;
    seen = true;
    EXPECT_EQ(h["ssh_address"], "fd00::6");
  }
  EXPECT_TRUE(seen) << listed;
}

TEST_F(AdminCapacityApiTest, QueuedCreateIsIdempotent) {
  Person alice = NewPerson("alice@example.test");
  auto first = Create(alice, "alpha", {"Idempotency-Key: k-1"});
  ASSERT_EQ(first.status, 202) << first.body;
  auto second = Create(alice, "alpha", {"Idempotency-Key: k-1"});
  EXPECT_EQ(second.status, 202) << second.body;
  EXPECT_EQ(second.Json()["id"], first.Json()["id"]);
  EXPECT_EQ(second.Header("idempotent-replayed"), "true");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM queue_entries"), 1);
  // Without the key, the second is refused as a second entry of the same type.
  ExpectProblem(Create(alice, "other"), 409, "already_queued");
}

}  // namespace
}  // namespace gpuwerk::testing
